"""Turn a pasted error into the lines that matter, with their volatile parts set aside.

Both sides of a match go through here: entry signatures at sync time and user pastes at search
time, so "Tried to allocate 20.00 MiB (GPU 0 ...)" and "Tried to allocate 1.5 GiB (GPU 3 ...)" meet.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field

# Bump when tokens change: stored signatures are re-tokenised on the next sync.
VERSION = 37

# GCC in a UTF-8 locale, Word and chat apps curl quotes: `‘AT_CHECK’ was not declared` is `'AT_CHECK'`
STRAIGHT_QUOTES = str.maketrans({"‘": "'", "’": "'", "“": '"', "”": '"'})
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# a traceback inside a JSON or repr string: its newlines and quotes are escapes (`\n`, `\"`)
ESCAPED_TRACEBACK = re.compile(
    r"Traceback \(most recent call last\):\\n|\\n\s+File \\?[\"']"
    # or an error's repr, in an app's error box (`\'AttributeError: type object \'X\' has no ...\n\n...`)
    r"|\\'[^'\n]{1,200}\\'[^\n]*\\n"
)
# a traceback escaped twice: a JSON log's string holding another JSON document (`\\n`, `\\\"`)
TWICE_ESCAPED = re.compile(r"Traceback \(most recent call last\):\\\\n")
# a notebook's error copied as JSON (VS Code's Jupyter output: `"name": "OSError", "message": "...",
# "stack": "..."`): the type and its message, and the strings' escapes (`\"`, `\\`, `\n`)
# (or a service's error record: `"error_type": "<class 'RuntimeError'>", "error_message": "..."`)
JSON_ERROR = re.compile(
    r'"(?:name|error_type|exc_type|exception_type)":\s*"(?:<class \')?([A-Za-z_][\w.]*)(?:\'>)?",\s*'
    r'"(?:message|error_message|exc_message|exception_message)":\s*"((?:[^"\\]|\\.)*)",?'
)
JSON_ESCAPE = re.compile(r'\\(["\\/nt])')
# an exception printed as `f"{type(e)}: {e}"`: `<class 'KeyError'>: 'x'` reads as `KeyError: 'x'`
CLASS_REPR = re.compile(r"^(\s*)<class '([A-Za-z_][\w.]*)'>(?=:)", re.M)
# (placeholder, what the reader is told was ignored, pattern); order matters: wide shapes first.
RULES: list[tuple[str, str, re.Pattern[str]]] = [
    ("_url_", "url", re.compile(r"https?://\S+")),
    ("_hex_", "address", re.compile(r"\b0x[0-9a-fA-F]+\b")),
    ("_symbol_", "C++ symbol", re.compile(r"\b_Z[A-Za-z0-9_]{6,}")),
    ("_shape_", "shape", re.compile(r"torch\.Size\(\[[\d,\s]*\]\)")),
    ("_size_", "size", re.compile(r"\b\d+(?:\.\d+)?\s?(?:[KMGT]i?B|bytes|B)\b")),
    (
        "_path_",
        "path",
        # absolute (`/usr/lib/x/y`, `C:\\x`), and relative ones naming a library file (`pkg/_ext.so`)
        re.compile(
            r"(?:[A-Za-z]:\\|\\\\)[^\s\"'<>|:]+|(?<![\w.:/])(?:~|\.{1,2})?(?:/[\w.\-+@~]+){2,}/?"
            r"|(?<![\w.:/])[\w.\-+@~]+(?:/[\w.\-+@~]+)*\.(?:so|pyd|dll|dylib)\b"
        ),
    ),
    (
        "_shape_",
        "shape",
        re.compile(
            r"\[\s*-?\d+(?:\s*,\s*-?\d+)+\s*,?\s*\]|\(\s*\d+(?:\s*,\s*\d+)+\s*,?\s*\)|\b\d+(?:x\d+)+\b"
        ),
    ),
    ("_arch_", "GPU arch", re.compile(r"\bsm_\d+a?\b|\bcompute_\d+\b")),
    (
        "_gpu_",
        "GPU name",
        re.compile(
            r"\b(?:NVIDIA\s+)?(?:GeForce|Tesla|Quadro|TITAN|RTX|GTX|A\d{2,3}|H\d{3}|L\d{1,2}|V100|T4|P100|K\d{2})\b[\w\- ]*?(?=\s+(?:with|which|GPU|is|has)\b|\s*[,;)]|$)"
        ),
    ),
    # quoted names, and called names (`forward()`): in a template such as "X() takes 2 positional
    # arguments" the name is what tells one error from another
    (
        "_q_",
        "quoted name",
        re.compile(
            r"(?<![A-Za-z])'([^'\n]{1,200})'(?![A-Za-z])|\"([^\"\n]{1,200})\"|"
            r"(?<![\w.])((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)\(\)|"
            # the package pip could not find ("... satisfies the requirement torch==1.8.1")
            r"(?<=satisfies the requirement )([A-Za-z][\w.\-]*)|(?<=No matching distribution found for )([A-Za-z][\w.\-]*)"
        ),
    ),
    # a state_dict key (`encoder.layer.0.attention.self.value.weight`): which parameter is named
    # varies with the model, the message around it does not
    (
        "_key_",
        "parameter name",
        re.compile(
            r"(?<![\w./\\])(?:[A-Za-z_]\w*\.)(?:\w+\.)*"
            r"(?:weight|bias|running_mean|running_var|weight_g|weight_v)\b"
        ),
    ),
    (
        "_num_",
        "number",
        re.compile(r"(?<=\bGPU)\d+\b|(?<![\w.])[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?!\w)", re.I),
    ),
]
# Sentences PyTorch appends to many different errors: they say nothing about which error it is, and
# left in, a signature that carries one "matches" every other error that carries it too.
BOILERPLATE = re.compile(
    r"\(?Could this error message be improved\? If so, please report an enhancement request to PyTorch\.?\)?|"
    r"CUDA kernel errors might be asynchronously reported at some other API call,? so the stacktrace below "
    r"might be incorrect\.?|For debugging,? consider passing CUDA_LAUNCH_BLOCKING=1\.?|"
    r"Compile with `?TORCH_USE_CUDA_DSA`? to enable device-side assertions\.?|"
    r"\(Triggered internally at [^)]*\)|"
    # the dispatcher's tail on every "Could not run 'op' with arguments from the 'X' backend"
    r"This could be because the operator doesn't exist for this backend, or was omitted during the "
    r"selective/custom build process(?: \(if using custom build\))?\.?|"
    r"If you are a Facebook employee using PyTorch on mobile, please visit \S+ for possible resolutions\.?|"
    r"'[^'\n]{1,200}' is only available for these backends: \[[^\]]*\]?\.?|"
    # the linker's last word on every failed link (the missing library is named above it)
    r"collect2: error: ld returned \d+ exit status|"
    # dynamo's trailer under every error it raises (the error itself is the line above it)
    r"Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace \(please do this especially if you're "
    r"reporting a bug to PyTorch\)\.?(?: For even more developer context, set TORCH_LOGS=\S+)?|"
    r"You can suppress this exception and fall back to eager by setting:?\s*(?:import torch\._dynamo\s*)?"
    r"(?:torch\._dynamo\.config\.suppress_errors = True)?|"
    # transformers/diffusers wrap the real import error in this sentence
    r"Failed to import [\w.]+ because of the following error \(look up to see its traceback\):?",
    re.I,
)
# A code that names the error in any language and any release ("[WinError 126] 找不到指定的模块" is
# "[WinError 126] The specified module could not be found"; the pickle opcode of "Unsupported operand
# 118" tells a zip checkpoint from a text file): a word of its own (`c126`), not a number placeholder
ERROR_CODE = re.compile(r"\b(WinError|Errno|Unsupported operand)\s*(\d+)", re.I)
# a Windows process's crash code, in hex (`0xC0000005`) or as an exit code (-1073741819, 3221225477):
# which code it is names the crash (access violation, illegal instruction, divide by zero)
NTSTATUS_EXIT = r"-10737\d{5}|3221\d{6}"  # an NTSTATUS crash as a signed or unsigned exit code
NTSTATUS = re.compile(rf"\b0x(c0000[0-9a-f]{{3}})\b|(?<![\w.])({NTSTATUS_EXIT})(?!\w|\.\w)", re.I)


def _ntstatus(m: re.Match[str]) -> str:
    code = (m.group(1) or f"{int(m.group(2)) % 2**32:08x}").lower()
    return f" ntstatus_{code} " if code.startswith("c0000") else m.group(0)


# a convolution given fewer dimensions than it takes lacks its batch (or time) axis, one given more has
# an extra one: the message reads the same in both directions, with only small numbers apart
CONV_DIMS = re.compile(
    r"Expected (\d)-dimensional input for \d-dimensional weight.*?but got (?:(\d)-dimensional input|input of size:? ?\[([^\]]*)\])"
    r"|Expected (\d)D \(unbatched\) or (\d)D \(batched\) input to \w+, but got input of size:? ?\[([^\]]*)\]"
)


def _conv_dims(line: str) -> str | None:
    """`fewer` or `more` dimensions than a convolution takes, as its message says."""
    if not (m := CONV_DIMS.search(line)):
        return None
    if m.group(1):
        takes = least = int(m.group(1))
        got = int(m.group(2)) if m.group(2) else len(m.group(3).split(","))
    else:
        least, takes = int(m.group(4)), int(m.group(5))
        got = len(m.group(6).split(","))
    return "fewer" if got < least else "more" if got > takes else None


# `size mismatch for w: copying a param with shape torch.Size([4096, 1024]) from checkpoint, the shape in
# current model is torch.Size([2097152, 1])`: the words are the same for every cause, the two shapes
# together tell a few apart (a 4-bit quantized layer packs `[out, in]` into `[out * in / 2, 1]`; ZeRO-3
# leaves a partitioned parameter empty)
PARAM_SHAPES = re.compile(
    r"copying a param with shape torch\.Size\(\[([\d,\s]*)\]\) from checkpoint, "
    r"the shape in current model is torch\.Size\(\[([\d,\s]*)\]\)"
)


def _param_shapes(line: str) -> str | None:
    """`packed`, `empty` or `other`: what a size mismatch's two shapes say together (PARAM_SHAPES)."""
    if not (m := PARAM_SHAPES.search(line)):
        return None
    saved, current = ([int(d) for d in re.findall(r"\d+", g)] for g in m.groups())
    if 0 in current:
        return "empty"
    if len(saved) == 2 and len(current) == 2 and current[1] == 1 and math.prod(saved) == 2 * current[0]:
        return "packed"
    return "other"


# which signal killed a DataLoader worker names its cause (`Killed`: out of RAM, `Bus error`: out of
# shared memory, `Illegal instruction`: a CPU without AVX): a word of its own, not one of the sentence's
KILLED_BY_SIGNAL = re.compile(r"(killed by signal:\s*)([A-Za-z]+)")
WORD = re.compile(r"[a-z0-9_]+")
# what an undefined C++ symbol is tells its cause: one taking a std::string (`__cxx11`, or the old
# ABI's `Ss`) points at the C++ ABI flag, a pybind11 one at an extension not linked against
# libtorch_python, one in another library's namespace (`tbb::`, `cudnn::`, `onnx_torch::`) at that
# library missing or another build of it, any other at a torch the extension was not built against
SYMBOL_KINDS = (
    ("string", re.compile(r"__cxx11|[EKR]Ss")),
    ("python", re.compile(r"pybind11|THP")),
    ("library", re.compile(r"^_ZN[KVr]*(?!3c10|2at|5torch|6caffe2|4thpp|3std)\d")),
)
# a state_dict's key lists, read together, tell the cause apart (see key_shape)
KEY_LIST = re.compile(r"(Missing|Unexpected) key\(s\) in state_dict:\s*((?:\"[^\"\n]*\"[\s,.]*)+)")
KEY_LISTS_READ = 20_000  # characters of a paste from its first key list on
WRAPPERS = ("module.", "_orig_mod.")  # DataParallel / DDP and torch.compile put these before every key
# a model that is itself the wrapper: `module.` keys are its own (key_shape)
WRAPPER_MODEL = re.compile(r"in loading state_dict for (?:Distributed)?DataParallel\b")
# "Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be the same"
INPUT_AND_WEIGHT = re.compile(r"Input type \(([^)]*)\) and weight type \(([^)]*)\)", re.I)
# torch's old type checks name both tensor types (`Expected object of type torch.FloatTensor but found
# type torch.cuda.FloatTensor`, `expected type X but got Y`, `... backend CPU but got backend CUDA`) in
# the same words whether a tensor was left on the CPU, two dtypes met, or a sparse tensor came in
TYPE_PAIR = re.compile(
    r"\bexpected (?:object of )?(?:type|backend)\s+(\S+?)\s+but (?:found|got)(?: type| backend)?\s+([\w.\[\]]+)",
    re.I,
)
DTYPE_WORD = re.compile(r"bfloat16|float|double|half|long|int|short|byte|char|bool|complex", re.I)

# `_pickle.UnpicklingError` is `pickle.UnpicklingError` raised from the C accelerator module
PRIVATE_MODULE = re.compile(r"(?<![\w.])_([a-z]\w*)\.(?=[A-Z]\w*(?:Error|Exception|Warning)\b)")
# the module an import could not find, whole: `No module named 'torch._dynamo'` is not `... 'torch'`
# (Python 2 named the last part alone, unquoted: that is no whole name)
MISSING_MODULE = re.compile(r"No module named (?:'([A-Za-z_][\w.]*\w)'|([A-Za-z_]\w*(?:\.\w+)+))")
SMALL_INT = re.compile(r"[-+]?\d{1,2}")
# a C++/CUDA source file (`at /pytorch/aten/src/THC/generic/THCStorage.cu:58`): where in torch's
# sources an error was raised moves between releases, so unlike a library that failed to load it
# doesn't tell errors apart
SOURCE_FILE = re.compile(r"\.(?:c|cc|cpp|cxx|cu|cuh|h|hpp)(?::\d+)*$", re.I)
# file names every package uses for its compiled part or its init module
PACKAGE_FILES = frozenset(["_c", "_ext", "__init__"])
ABI_TAG = re.compile(r"\.(?:cpython|cp|pypy)\d*[\w-]*(?=\.)|\.abi3(?=\.)")
PATHLIKE = re.compile(
    r"[\\/]|\.(?:py|so|dll|pyd|dylib|cpp|cu|h|pt|pth|ckpt|bin|safetensors|json|yaml|txt)\b", re.I
)
FILE_NOISE = frozenset(
    [
        "py",
        "so",
        "dll",
        "pyd",
        "dylib",
        "cpp",
        "cu",
        "h",
        "pt",
        "pth",
        "cpython",
        "linux",
        "gnu",
        "x86_64",
        "aarch64",
        "win_amd64",
        "darwin",
        "lib",
    ]
)

# Lines that carry the error: `ExcType: message` anywhere (after timestamps or `file.py:12:`),
# CUDA kernel assertions, NCCL/CUDA error lines, and bare exception names.
# (after a space or a quote, or straight after words of a language written without spaces: `报了这个错误AssertionError:`)
EXC_LINE = re.compile(
    r"(?:^|[\s:\[(>`*'\"\u3000-\u9fff\uac00-\ud7af\uff00-\uffef])"
    r"((?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Warning|Interrupt|Failure))"
    r"(?:[:：]\s*(.*))?$"  # (a full-width colon too, typed with a Chinese or Japanese input method)
)
# the line that ends a traceback: its exception, also when the class isn't named `...Error`
# (`zipfile.BadZipFile`, `torch._dynamo.exc.Unsupported`, a bare `StopIteration`)
TRACEBACK_END = re.compile(
    r"^((?:[A-Za-z_]\w*\.)+[A-Z]\w*|Exception|BaseException|StopIteration|StopAsyncIteration|"
    r"KeyboardInterrupt|SystemExit|GeneratorExit)(?::\s*(.*))?$"
)
# (Windows has no signals: a native crash is an NTSTATUS exit code, `-1073741819 (0xC0000005)` in an
# IDE's `Process finished with exit code ...`, `3221225477` unsigned; elsewhere the IDE names the
# signal: `exit code 139 (interrupted by signal 11: SIGSEGV)`)
NATIVE_CRASH_CODE = rf"(?:(?:{NTSTATUS_EXIT})\b|\d+ \(interrupted by signal \d+: SIG[A-Z]+\))"
NATIVE_CRASH_EXIT = rf"exit code {NATIVE_CRASH_CODE}"
SIGNAL_LINE = re.compile(
    r"Assertion `|CUDA error|CUDA kernel failed|CUDNN_STATUS|CUBLAS_STATUS|NCCL (?:error|WARN)|Watchdog caught|"
    r"killed by signal|bus error|Segmentation fault|core dumped|out of memory|is deprecated|"
    r"Error\(s\) in|Missing key|Unexpected key|size mismatch for|undefined symbol|"
    r"cannot open shared object|DLL load failed|not implemented for '|no kernel image|"
    r"not compatible with the current PyTorch|cuda runtime error|THCudaCheck FAIL|"
    r"INTERNAL ASSERT FAILED|Expected .+ but got|must match the size|shapes cannot be multiplied|"
    + NATIVE_CRASH_EXIT,
    re.I,
)
# a C++ exception's backtrace (`frame #0: c10::Error::Error(...)`, from torch 1.5 under `Exception
# raised from f at file.cpp:12`): the line above it is the exception's message, whatever its words
CPP_BACKTRACE = re.compile(r"^\s*(?:frame #0:|Exception raised from \S+ at )")
CRASH_LINE = re.compile(
    rf"Segmentation fault|core dumped|Illegal instruction|^(?:zsh: )?(?:Killed|Aborted)\b|{NATIVE_CRASH_EXIT}",
    re.I,
)
# A kernel's device-side assertion (`Kernel.cu:365: operator(): block: [9,0,0], thread: [31,0,0]
# Assertion `idx_dim >= 0` failed.`) leaves the CUDA context broken: whatever CUDA call comes next fails
# (`Unable to find a valid cuDNN algorithm`, `CUBLAS_STATUS_ALLOC_FAILED`), and that is what the
# traceback ends with. Beside the assertion, such a line is its consequence; the assertion is the question.
KERNEL_ASSERT = re.compile(
    r"\.cuh?:\d+:.*Assertion `|block: \[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\] Assertion `"
)
CUDA_FAILURE = re.compile(
    r"CUDA error|CUDNN_STATUS|cuDNN|CUBLAS_STATUS|cublas|illegal memory access|unspecified launch failure",
    re.I,
)
# how sure the picker is of lines beside a recognised error line (chosen on eval/wild, not held-out)
CRASH_AFTER_ERROR = 0.7  # a crash line: the process died of that error
SOURCE_THEN_ERROR = 0.96  # an exception line read with the source line that raised it
EARLIER_IN_CHAIN = 0.85  # an exception the last one follows or wraps (a TorchScript wrapper)
WARNING_BESIDE_ERROR = 0.7  # a warning: rarely the question
PLAIN_BESIDE_ERROR = 0.7  # a plain line: a weak second opinion ...
PLAIN_LINES = 3  # ... from the last few
# A log record at error level, or a tool's `error:` line (pip, the compiler): an error line too.
LOG_ERROR = re.compile(
    r"^\s*(?:[\d\-:/.,T ]+\s)?(?:\[?(?:ERROR|FATAL|CRITICAL)\]?(?::[\w.]+)*:?|error:)\s*\S"
    # a library's or a tool's own (`MIOpen Error: ...`, `nvcc fatal   : Unsupported gpu architecture`)
    r"|^\s*[\w.()\-]+ (?:Error|ERROR|fatal|FATAL)\s*:"
)
# A compiler's diagnostic (gcc/clang `src/x.cpp:9:10: fatal error: TH/TH.h: No such file`, nvcc/MSVC
# `x.cu(12): error: ...`): an error line; where in which file is the user's, the rest is the message
COMPILER_ERROR = re.compile(
    r"^\s*\S+?(?::\d+(?::\d+)?|\(\d+\)):\s*((?:fatal )?error(?: [A-Z]+\d+)?\s*:\s*\S.*)$"
)
FAILED_STEP = re.compile(
    r"^error: command .* failed with exit (?:status|code)|ninja: build stopped: subcommand failed|"
    # (unless the status is a native crash: then it is what the step died of)
    rf"^(?:subprocess\.)?CalledProcessError: Command .* returned non-zero exit status (?!{NATIVE_CRASH_CODE})|"
    r"^RuntimeError: Error compiling objects for extension|"
    # make's and the linker's last words (`make[2]: *** [...] Error 1`, `collect2: error: ld returned 1`)
    r"^g?make(?:\[\d+\])?: \*\*\* .*\bError \d+|^collect2: error: ld returned \d+ exit status",
    re.I,
)
# A linker's diagnostic (`x.o: undefined reference to `c10::Error::Error(...)'`, `ld: cannot find -lcudart`)
LINK_ERROR = re.compile(r"\bundefined reference to [`'\u2018]|^\S*\bld(?:\.\w+)?: (?:cannot find |error: )")
FRAME = re.compile(
    r"^\s*(?:File \"|File '|at \S+\(|\^+\s*$|~+\^*~*\s*$|-+>\s*\d+|\d+\s+\w|Cell In\[|Input In \[|"
    r"<ipython-input-|\[\d+\]\(vscode-notebook-cell|frame #\d+:)"  # (the last: a C++ backtrace's frames)
    # a JavaScript stack's frames (React Native, Node: `at invoke (http://localhost:8081/index.bundle:7876:32)`)
    r"|^\s*at (?:[\w$.<>\[\] ]+ )?\((?:[^()]*:\d+:\d+|native)\)\s*$"
)
# (also a library's own warning records: `MIOpen(HIP): Warning [FindWinogradSolutions] ...`)
WARNING_LINE = re.compile(r"^(?:[\w.]*Warning\b|[\w.]+(?:\([\w.]+\))?:\s*Warning\b|WARNING\b\s*[:\]])")
SAYS_WARNING = re.compile(r"^(?:Warning|WARNING)\s*[,:]\s*\S")  # `Warning, cannot find ...`: a warning line
SOURCE_OF = re.compile(r"^\s*File [\"'].*line \d+")
CARETS = re.compile(r"^\s*[\^~]+\s*$")  # Python's marks under the failing expression
NOTEBOOK_ARROW = re.compile(r"^\s*-+>\s*\d+\s+(\S.*)$")  # IPython's `---> 12 x = f(y)`
NOTEBOOK_CONTEXT_LINE = re.compile(r"^\s*\d+\s")  # ... and the numbered lines around it
NOTEBOOK_CONTEXT = 12
# Lines that look like errors but only frame one: traceback headers, chain separators, shutdown noise.
NOISE = re.compile(
    r"Traceback \(most recent call last\)|^\s*Exception ignored in|During handling of the above exception|"
    r"The above exception was the direct cause|Closing remaining open files|python-BaseException|"
    r"Error in atexit\._run_exitfuncs|^\s*Exception raised from \S+ at \S+|^\s*\(no backtrace available\)\s*$|"
    rf"^\s*wandb:|Process finished with exit code (?!{NATIVE_CRASH_CODE})|"  # (a crash code: CRASH_LINE)
    r"^\s*(?:Error|Exception|Warning)s?\s*(?:message|type|details)?\s*:?\s*$|"
    # pip's wrapper around a failed build: the error is in the output it shows
    r"^\s*error: (?:subprocess-exited-with-error|metadata-generation-failed)\s*$|^\s*\[end of output\]\s*$|"
    r"^\s*note: This error originates from a subprocess|"
    # the advice CUDA errors end with: the same under every error, so it tells none apart
    r"^\s*(?:CUDA kernel errors might be asynchronously reported|For debugging consider passing CUDA_LAUNCH_BLOCKING|"
    r"Compile with .TORCH_USE_CUDA_DSA. to enable device-side assertions)|"
    r"^\s*[\w.\-]+ exited with code \d+\s*$",  # docker compose, after a service's last line
    re.I,
)
# A line that announces an exception whose message follows on the next lines (VS Code, PyCharm, reports).
ANNOUNCE = re.compile(
    r"^(?:.*?(?:发生异常|Exception has occurred|Exception Type|Error Type|Exception Message)\W*)"
)
# What launchers and loggers put before each line of a child's output: torchrun's `[rank3]:` /
# `[default0]:`, mpirun's `[1,0]<stderr>:`, and a logging record's `2025-10-31 03:11:02,474 - name -
# INFO - ` (error-level records keep theirs: they are error lines); and the system journal's
# `Aug 12 10:38:34 host unsloth[4073658]: ` before each line of a service's output
LINE_PREFIX = re.compile(
    r"^\s*(?:\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[,.\d]*\s+-\s+[\w.\-]+\s+-\s+(?:DEBUG|INFO|WARNING)\s+-\s+)?"
    r"(?:\[(?:rank|default)\d+\]:|\[\d+,\d+\]<std(?:out|err)>:)"
    r"|^[A-Z][a-z]{2} [ \d]?\d \d\d:\d\d:\d\d [\w.\-]+ [\w.\-@/]+\[\d+\]: ?"
)
# A tqdm progress bar the message was printed behind (`  0%|    | 0/1 [00:00<?, ?it/s]Could not load ...`)
PROGRESS_BAR = re.compile(r"^.*?\d+%\|[^|\n]*\|\s*[\d.]+\w?/[\d.?]+\w?\s*\[[^\]\n]*\]")
# Markdown and report decoration around a pasted line: quotes, bullets, bold labels, backticks.
DECOR = re.compile(r"^\s*(?:>\s*)*(?:[-*]\s+)?(?:\*\*[^*]{1,40}:\*\*\s*)?`*|`+\s*$")
# ... and an exception set in italics (`_RuntimeError: expected scalar type Float but found Half_`)
ITALIC_EXC = re.compile(r"^(\s*)_([A-Z]\w*(?:Error|Exception|Warning)\b.*?)_?\s*$")
WHOLE_LINE_CODE = re.compile(r"^\s*`[^`]+`\s*$")
# a line of code set in backticks (an assignment, a call, a statement): no message
CODE_LINE = re.compile(r"^\s*[\w.\[\], ]+\s*=[^=]|\)\s*$|^\s*(?:import|from|def|class|return|for|if)\b")
# a message in quotes or backticks inside a sentence, long enough to be an error rather than a name
# (backticks and double quotes pair up in order; a single quote only counts where it can't be an
# apostrophe: "It's possible" opens nothing)
PAIRED_QUOTES = ("`", '"')
# a whole line in quotes around a message that holds quotes itself (`"Unexpected key(s): "x.y"."`)
WHOLE_LINE_QUOTED = re.compile(r'^\s*"(.{20,600}".{0,600})"\s*[.,;:!?]?\s*$')
OTHER_QUOTES = re.compile(r"“([^”]{20,600})”|(?:^|(?<=[\s(:=\[]))'([^']{20,600})'(?=[\s.,;:)\]!?]|$)")
QUOTED_MESSAGE = re.compile(r"^\s*\**\s*(?:\[\w+\]:?\s*)?([A-Za-z_].{19,599}?)\s*\**\s*$")  # (**bold** too)
RAISED_MESSAGE = re.compile(
    r"(?:(?:\bwarn|\braise\s+[\w.]+|\b[A-Z]\w*(?:Error|Exception|Warning))\(\s*|^\s*assert\b[^\n]*?,\s*)"
    r"[frbu]?([\"'])(.{20,600}?)(?:\1|$)"  # (or cut at the line's end, where a paste stops mid-call)
)
QUOTED_WORDS = 4
# ... or one opening on a quoted name (`It says "'Net' object has no attribute 'module'"`), in prose
# only: in code (`AttributeError("'NoneType' object ...")`) the line as a whole is the better read
NAMED_MESSAGE = re.compile(r"^\s*('[A-Za-z_][\w.]*' .{19,599}?)\s*$")
WARN_CALL = re.compile(r"\bwarn(?:ings\.warn)?\(")
# an exception quoted in a sentence ('I get "RuntimeError: ...msg..." when I ...'): the line starts at
# the type, past the opening quote, so the first quote mark it holds an odd number of closes the message
CLOSING_QUOTE = re.compile(r"[\"`]")
# C++ `terminate called after throwing an instance of 'c10::Error'` prints the message as `what():  ...`:
# the message Python would show after `RuntimeError: `
CPP_WHAT = re.compile(r"^what\(\):\s*")
# An application's own line reporting an exception's message (ComfyUI: `!!! Exception during processing !!! msg`)
APP_REPORTS = re.compile(r"!!!\s*Exception during processing\s*!!!\s*(\S.*)$")
# Jupyter's header names the exception: `BrokenPipeError      Traceback (most recent call last)`
JUPYTER_HEADER = re.compile(
    r"^([A-Za-z_][\w.]*(?:Error|Exception|Warning|Interrupt))\s{2,}Traceback \(most recent"
)
ONE_LINE_TRACEBACK = re.compile(
    r"Traceback \(most recent call last\):?\s+File [\"']"
    # (or without its header: the line starts with a frame and goes on past it)
    r"|^\W{0,3}File [\"'][^\"'\n]+[\"'], line \d+, in \S+\s+\S"
)
# in a frame run on with its code, the exception type that starts the message (`... import torch
# ModuleNotFoundError: No module named 'torch'`), or one alone at the end (`raise StopIteration StopIteration`)
FRAME_THEN_EXC = re.compile(
    r"\s((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Warning|Interrupt|Exit|StopIteration))(?::\s|\s*$)"
)
# where a relayed traceback starts on a line, past the logger's or launcher's prefix
TRACEBACK_PART = re.compile(r"Traceback \(most recent call last\)|File \"[^\"\n]+\", line \d+")
MAX_PREFIX = 120
RULE_LINE = re.compile(r"^[-=_*~#+.\s]{3,}$")  # a separator a user or a logger drew: no message
# an issue form's own lines: a markdown heading (`### Steps To Reproduce`) or a ticked box; no message
FORM_LINE = re.compile(r"^(?:#{1,6}\s|\[[ xX]\]\s)")
JOIN_LINES = 6  # a message that wraps goes on for at most this many lines
JOIN_CHARS = 1200


@dataclass
class Normalized:
    """A line with volatile parts replaced, its tokens, and what was set aside."""

    text: str
    tokens: list[str]
    aux: list[str]  # low-weight tokens: what was inside quotes
    ignored: Counter[str] = field(default_factory=Counter)


# A shell's crash report in the user's language (glibc's strsignal, translated): read as English
LOCALIZED_CRASH = {
    "段错误": "Segmentation fault",
    "非法指令": "Illegal instruction",
    "总线错误": "Bus error",
    "已放弃": "Aborted",
    "已杀死": "Killed",
    "核心已转储": "core dumped",
    "吐核": "core dumped",
    "Speicherzugriffsfehler": "Segmentation fault",
    "Speicherabzug geschrieben": "core dumped",
    "Erreur de segmentation": "Segmentation fault",
    "Violación de segmento": "Segmentation fault",
    "Falha de segmentação": "Segmentation fault",
    "Ошибка сегментирования": "Segmentation fault",
    "セグメンテーション違反です": "Segmentation fault",
    "コアダンプ": "core dumped",
}
LOCALIZED_CRASH_WORDS = re.compile("|".join(map(re.escape, LOCALIZED_CRASH)))


def clean(text: str) -> str:
    """Drop NULs, ANSI colours and progress-bar overwrites; unify newlines and quotes; open up a
    traceback pasted as an escaped string (a JSON log's `"traceback": "Traceback ...:\\n  File \\"..."`)."""
    text = text.replace("\x00", "").replace("\r\n", "\n").translate(STRAIGHT_QUOTES)
    if TWICE_ESCAPED.search(text):  # a JSON log inside a JSON log: one level of escapes off first
        text = JSON_ESCAPE.sub(lambda m: m.group(1) if m.group(1) in '\\"' else m.group(0), text)
    # a notebook error copied as JSON, read as Python prints it (`OSError: [WinError 126] ...`)
    text, copied_as_json = JSON_ERROR.subn(lambda m: f"\n{m.group(1)}: {m.group(2)}\n", text)
    if copied_as_json:
        text = JSON_ESCAPE.sub(lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), text)
    text = LOCALIZED_CRASH_WORDS.sub(lambda m: LOCALIZED_CRASH[m.group(0)], ANSI.sub("", text))
    if ESCAPED_TRACEBACK.search(text):
        text = text.replace("\\n", "\n").replace('\\"', '"').replace("\\'", "'")
    # a progress bar rewrites its line with \r: keep what was printed last
    return "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))


def _device(tensor_type: str) -> str:
    """Whether a tensor type (`torch.cuda.HalfTensor`, `MPSFloatType`, `Variable[CUDAType]`) lives on
    an accelerator or on the CPU: the side that was not moved is what the fix is about."""
    t = tensor_type.lower()
    return "gpu" if any(d in t for d in ("cuda", "mps", "xpu", "hip")) else "cpu"


def _type_difference(expected: str, found: str) -> str | None:
    """How two tensor types named by a type check differ: device, layout (sparse) or dtype."""
    if _device(expected) != _device(found):
        return "device"
    if ("sparse" in expected.lower()) != ("sparse" in found.lower()):
        return "layout"
    dtypes = [m.group(0).lower() for t in (expected, found) if (m := DTYPE_WORD.search(t))]
    return "dtype" if len(dtypes) == 2 and dtypes[0] != dtypes[1] else None


def key_shape(text: str) -> str | None:
    """What a failed `load_state_dict` says of its keys, read from the lists it prints: one side
    wrapped (`module.`), one side under a prefix of its own, a checkpoint's own dict passed whole
    (keys without dots: `epoch`, `optimizer`), BatchNorm counters alone, both lists (renamed layers,
    another network), or one list only. None without a key list. The same message names all of these
    causes; the shape of its keys is what tells them apart."""
    start = text.find("key(s) in state_dict")
    if start < 0:
        return None
    lists: dict[str, list[str]] = {}
    for m in KEY_LIST.finditer(text[max(0, start - 12) : start + KEY_LISTS_READ]):
        lists.setdefault(m.group(1), re.findall(r'"([^"\n]*)"', m.group(2)))
    if not lists:
        return None
    missing, unexpected = lists.get("Missing", []), lists.get("Unexpected", [])
    if unexpected and all("." not in k for k in unexpected):
        return "container"
    if all(k.endswith("num_batches_tracked") for k in missing + unexpected):
        return "counters"
    wrapped = [all(k.startswith(WRAPPERS) for k in keys) for keys in (missing, unexpected) if keys]
    # (a model that is itself the wrapper has `module.` keys of its own: one list of them is not that)
    itself = WRAPPER_MODEL.search(text[:start])
    if len(set(wrapped)) > 1 or (wrapped == [True] and not itself):
        return "wrapper"
    if missing and unexpected:
        lacking, spare = missing[0], unexpected[0]
        return "prefix" if spare.endswith("." + lacking) or lacking.endswith("." + spare) else "renamed"
    return "missing" if missing else "unexpected"


def file_tokens(path: str) -> list[str]:
    """The words of a path's file name, marked as such (`p:libtorchaudio`): which library failed to
    load tells errors apart, but a different file is not a different error. Where every package
    names its file alike (`torchvision/_C.so`, `kaolin/_C.so`, `mmcv/_ext.so`), the package does."""
    *folders, name = re.split(r"[\\/]", path.rstrip("/\\").lower())
    name = ABI_TAG.sub("", name)  # `_C.cpython-36m-x86_64-linux-gnu.so` is `_C.so`
    if folders and name.split(".")[0] in PACKAGE_FILES:
        name = folders[-1]
    return [f"p:{w}" for w in WORD.findall(name) if w not in FILE_NOISE and not w.isdigit()]


# `module 'torch' has no attribute 'compile'`, `'Net' object has no attribute 'fit'`: what lacks which
# attribute. Quoted names are a set everywhere else; here which one is the attribute decides.
NO_ATTRIBUTE = re.compile(
    r"(?:(module |type object )?'([^'{}\s]+)'(?: object)?|\bobject) has no attribute '([^'{}\s]+)'"
)


def missing_attribute(line: str) -> tuple[bool, str, str] | None:
    """(whether the owner is a module, the owner or "" where it is not named, the attribute) of a
    missing-attribute message."""
    if m := NO_ATTRIBUTE.search(line.translate(STRAIGHT_QUOTES)):
        return m.group(1) == "module ", (m.group(2) or "").lower(), m.group(3).lower()
    return None


# Python's call templates (`Net.forward() missing 1 required positional argument: 'x'`, `__init__() got an
# unexpected keyword argument 'fused'`): the function named, not the argument, tells one error from another
CALL_TEMPLATE = re.compile(
    r"(?<![\w.<])(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*)\(\) (?:missing \d+ required|takes (?:\d+|from|no)|"
    r"got (?:an unexpected keyword|multiple values))"
)


def called_function(line: str) -> str | None:
    """The function a call-template message names, without its class or a dunder's underscores
    (`forward` of `Net.forward()`; `init` of `__init__()`, which Markdown renders as a bold `init()`)."""
    return m.group(1).strip("_").lower() if (m := CALL_TEMPLATE.search(line)) else None


def normalize(line: str) -> Normalized:
    """Replace numbers, sizes, shapes, paths, addresses, GPU names and quoted names by placeholders."""
    ignored: Counter[str] = Counter()
    aux: list[str] = []
    line = CLASS_REPR.sub(r"\1\2", line.translate(STRAIGHT_QUOTES))  # (as extract reads a paste)
    out = BOILERPLATE.sub(" ", line).strip() or line.strip()
    out = ERROR_CODE.sub(r"\1 c\2", out)
    out = NTSTATUS.sub(_ntstatus, out)
    if dims := _conv_dims(out):
        aux.append(f"dm:{dims}")  # (a kind: the missing axis and the extra one are other causes)
    if shapes := _param_shapes(out):
        aux.append(f"sm:{shapes}")  # (a kind: a packed or empty current shape is another cause)
    if m := KILLED_BY_SIGNAL.search(out):
        signal = m.group(2).lower()
        aux.append(f"sg:{signal}")  # (a kind: another signal is another cause)
        out = f"{out[: m.start(2)]}signal_{signal}{out[m.end(2) :]}"
    # which side is on which device decides the fix, and the words of both directions are the same
    if m := INPUT_AND_WEIGHT.search(out):
        aux += [f"input_{_device(m.group(1))}", f"weight_{_device(m.group(2))}"]
    if (m := TYPE_PAIR.search(out)) and (differ := _type_difference(m.group(1), m.group(2))):
        aux.append(f"ty:{differ}")
    if m := MISSING_MODULE.search(out):
        aux.append(f"qd:{(m.group(1) or m.group(2)).lower()}")
    if shape := key_shape(out):
        aux.append(f"sd:{shape}")
    elif "in loading state_dict for" in out:  # the message without its keys names no cause: keys
        aux.append("sd:none")  # that point at one cause make it a lesser match (KIND_MISMATCH)
    for placeholder, label, pattern in RULES:

        def _sub(m: re.Match[str], placeholder: str = placeholder, label: str = label) -> str:
            ignored[label] += 1
            if placeholder == "_q_":
                quoted = next((g for g in m.groups() if g), "")
                if PATHLIKE.search(quoted):  # "torch\lib\c10.dll": a file, not a name
                    aux.extend(file_tokens(quoted))
                elif words := WORD.findall(quoted.lower()):
                    aux.extend(words)
                elif quoted.strip():  # a quoted symbol ("invalid load key, '<'"): its characters decide
                    aux.append("ch" + "".join(f"{ord(ch):x}" for ch in quoted.strip()[:4]))
            elif placeholder == "_symbol_":
                kind = next((k for k, p in SYMBOL_KINDS if p.search(m.group(0))), "api")
                aux.append(f"sym:{kind}")
            elif placeholder == "_path_" and not SOURCE_FILE.search(m.group(0)):
                aux.extend(file_tokens(m.group(0)))
            elif placeholder == "_key_":
                aux.extend(f"k:{w}" for w in WORD.findall(m.group(0).lower()) if not w.isdigit())
            elif placeholder == "_num_" and SMALL_INT.fullmatch(m.group(0)):
                aux.append(
                    "n" + m.group(0).lstrip("+").replace("-", "m")
                )  # tells "dimension 0" from "dimension 1", a little
            return f" {placeholder} "

        out = pattern.sub(_sub, out)
    out = PRIVATE_MODULE.sub(r"\1.", re.sub(r"\s+", " ", out).strip())
    tokens = [t for t in WORD.findall(out.lower()) if not t.isdigit()]
    return Normalized(out, tokens, aux, ignored)


@dataclass
class Extracted:
    """The lines of a paste worth matching, best first, with a weight each."""

    lines: list[tuple[str, float]]
    free_text: str
    frames: int = 0
    plain: bool = False  # no error line was recognised: the lines are the paste's plain text
    groups: list[int] = field(
        default_factory=list
    )  # per line: the paste line it comes from (variants share one)
    keys: str | None = None  # the paste's state_dict key lists, read together (key_shape)
    # an exception line read with the source line that raised it -> the exception line alone
    raised_by: dict[str, str] = field(default_factory=dict)


def _unfolded(line: str) -> list[str]:
    """A traceback flattened onto one line (a title, a chat message, a log that lost its newlines)
    back as its lines: the header, each frame, and the exception after the last frame."""
    if not ONE_LINE_TRACEBACK.search(line):
        return [line]
    parts = re.split(r"\s+(?=File [\"'])", line)
    last = parts[-1]
    m = FRAME_THEN_EXC.search(last)
    if m:
        parts[-1:] = [last[: m.start(1)].rstrip(), last[m.start(1) :]]
    return parts


def _is_exc(line: str) -> re.Match[str] | None:
    m = EXC_LINE.search(line)
    return m if m and not NOISE.search(line) else None


def _ends_traceback(lines: list[str], i: int) -> re.Match[str] | None:
    """Line i as the exception of the traceback right above it (a frame, or a frame's source line)."""
    above = i >= 1 and (
        FRAME.match(lines[i - 1]) or (i >= 2 and FRAME.match(lines[i - 2]) and lines[i - 1].strip())
    )
    return TRACEBACK_END.match(lines[i].strip()) if above else None


def _printed_class(line: str, printed: set[str]) -> re.Match[str] | None:
    """The line as an exception whose class was printed by its repr (`<class 'a.b.Unsupported'>: ...`)."""
    m = TRACEBACK_END.match(line) if printed else None
    return m if m and m.group(1) in printed else None


def _inside_quotes(line: str) -> str | None:
    """An exception line cut where the quote around it closes, when prose follows it. The message may
    quote names with the same mark (`"RuntimeError: "addmm_impl_cpu_" not implemented for 'Half'" at
    ...`): the closing one has as many of its marks before it as pair up, and no word right after it."""
    for m in CLOSING_QUOTE.finditer(line):
        mark, after = m.group(0), line[m.end() : m.end() + 1]
        if (
            line.count(mark) % 2
            and not line.count(mark, 0, m.start()) % 2
            and not (after.isalnum() or after == "_")
            and len(WORD.findall(line[m.end() :])) >= 2
        ):
            return line[: m.start()].rstrip(" .,;")
    return None


def _quoted(line: str) -> list[str]:
    """The spans of a line inside quotes or backticks, in order."""
    spans: list[tuple[int, str]] = []
    for q in PAIRED_QUOTES:
        parts = re.split(f"{q}+", line)  # (``double backticks`` quote as one)
        for n in range(1, len(parts) - 1, 2):  # inside pairs only: a lone last quote closes nothing
            spans.append((line.find(parts[n]), parts[n]))
    spans += [(m.start(), m.group(1) or m.group(2)) for m in OTHER_QUOTES.finditer(line)]
    return [text for _, text in sorted(spans)]


def _message_after(lines: list[str], i: int) -> list[str]:
    """The lines after line i that go on with its message (wrapped text, indented state_dict lists)."""
    more: list[str] = []
    for ln in lines[i + 1 : i + 1 + JOIN_LINES]:
        s = ln.strip()
        if (
            not s
            or FRAME.match(ln)
            or NOISE.search(ln)
            or _is_exc(s)
            or RULE_LINE.match(s)
            or APP_REPORTS.search(s)
        ):
            break
        more.append(s)
    return more


def _failing_source(lines: list[str], i: int) -> str | None:
    """The source line of the frame right above line i (`    magic_number = pickle_module.load(f)`
    under its `File "...", line 1, in ...`), carets and tildes under it skipped: where a bare
    Python error (`EOFError: Ran out of input`, `SyntaxError: invalid syntax`) was raised says which."""
    j = i - 1
    while j >= 1 and CARETS.match(lines[j]):
        j -= 1
    if j >= 1 and lines[j].strip() and SOURCE_OF.match(lines[j - 1]) and not FRAME.match(lines[j]):
        return lines[j].strip()
    # a notebook's traceback marks the failing line with an arrow among numbered lines of context
    for j in range(i - 1, max(i - NOTEBOOK_CONTEXT, -1), -1):
        if m := NOTEBOOK_ARROW.match(lines[j]):
            return m.group(1).strip()
        if lines[j].strip() and not NOTEBOOK_CONTEXT_LINE.match(lines[j]):
            return None
    return None


def _after_assertion(s: str) -> bool:
    """Whether `s` is a CUDA failure that follows a device-side assertion (KERNEL_ASSERT): one that
    doesn't itself report the assertion."""
    return bool(CUDA_FAILURE.search(s)) and not KERNEL_ASSERT.search(s) and "device-side assert" not in s


def _assert_source(lines: list[str], i: int) -> str | None:
    """The `assert ...` statement a traceback shows above a bare `AssertionError`: its only message."""
    for j in range(i - 1, max(i - 4, -1), -1):
        s = lines[j].strip()
        if s.startswith(("assert ", "assert(")):
            return s
        if s and not RULE_LINE.match(s):
            return None
    return None


# an opening line that is the user talking, a shell prompt, a heading or a log line: no title
NOT_A_TITLE = re.compile(
    r"\b(?:I|I'm|I've|my|me|we|our|you)\b|^\s*(?:[#\[(]|\S*>\s*\w|\$ )|^\s*(?:Hi|Hello|When|Whenever|Thanks)\b",
    re.I,
)


# the tag an issue form puts before its title (`[Bug]: `, `[BUG]`, `Bug: `): the title after it may
# still be the error
ISSUE_TAG = re.compile(r"^\s*(?:\[[A-Za-z][\w .-]{0,24}\]\s*:?|(?:bug|question|issue)\s*:)\s*", re.I)


# a printed tensor or array (`tensor([[nan, nan, ...,`, `[0.1, 0.2]], device='cuda:0')`): values, no message
DUMP_PARTS = re.compile(
    r"\b(?:tensor|array)\(|(?:device|dtype|grad_fn|requires_grad)=\S+|\b(?:nan|inf|True|False)\b"
)
DUMP_REST = re.compile(r"[\s\[\](),.\d+\-eE]*")


def _is_dump(s: str) -> bool:
    return "[" in s and bool(DUMP_REST.fullmatch(DUMP_PARTS.sub(" ", s)))


def _plain_message(lines: list[str], i: int, seen: set[str]) -> bool:
    """Whether line `i` could be a bare message: not a frame, not noise, not the code line a frame
    shows, not part of an error line already found."""
    ln, s = lines[i], lines[i].strip()
    return bool(
        s
        and 10 <= len(s) <= 2000
        and not FRAME.match(ln)
        and not NOISE.search(ln)
        and not RULE_LINE.match(s)
        and not FORM_LINE.match(s)
        and not _is_dump(s)
        and not (i and SOURCE_OF.match(lines[i - 1]))
        and not any(s in f for f in seen)  # a wrapped line of a message already found
        and not _is_exc(s)
        and not APP_REPORTS.search(s)  # offered already, as its message
    )


def _last_plain_lines(lines: list[str], seen: set[str], want: int) -> list[tuple[int, str]]:
    """The last `want` lines that could be a bare message, in paste order. Walks from the end: a
    huge log costs what its tail costs."""
    picked: list[tuple[int, str]] = []
    for i in range(len(lines) - 1, -1, -1):
        if _plain_message(lines, i, seen):
            picked.append((i, lines[i].strip()))
            if len(picked) == want:
                break
    return picked[::-1]


def _first_plain_line(lines: list[str], seen: set[str]) -> tuple[int, str] | None:
    """The paste's opening line, where it could be a bare message: a report that opens by naming its
    error (a title, "Failed to initialize NumPy: _ARRAY_API not found") before pages of log."""
    first = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if first is None or not _plain_message(lines, first, seen):
        return None
    title = ISSUE_TAG.sub("", lines[first]).strip()
    return None if NOT_A_TITLE.search(title) or len(title) < 10 else (first, title)


def _repeated_prefix(lines: list[str]) -> re.Pattern[str] | None:
    """The prefix a logger or a launcher put before every line of a traceback it relayed (vLLM's
    `ERROR 05-27 11:47:57 [core.py:396] `, Ray's `(RayWorker pid=12) `, glog's `E0915 14:32:19.27 1 x.py:9] `,
    `docker compose`'s `web-1  | `), as a pattern with its numbers free: what stands before a
    traceback's header or frames on at least two lines, in the same shape."""
    shapes: Counter[str] = Counter()
    for ln in lines:
        m = TRACEBACK_PART.search(ln)
        if m and 0 < m.start() <= MAX_PREFIX and (p := ln[: m.start()].rstrip()):
            shapes[re.sub(r"\\ |\s+", r"\\s+", re.sub(r"\d+", r"\\d+", re.escape(p)))] += 1
    if not shapes:
        return None
    shape, n = shapes.most_common(1)[0]
    return re.compile(f"^{shape} ?") if n >= 2 else None


def extract(text: str, *, max_lines: int = 10) -> Extracted:
    """Find the lines that carry the error in a paste: a one-liner, a traceback, a log, a report.

    Each exception line is offered alone and, when its message wraps over the next lines, joined
    with them; a paste with no recognisable error line offers its plain lines (a message pasted
    without its `RuntimeError:`, or inside a sentence).
    """
    printed: set[str] = set()  # classes named by their repr: exceptions, whatever their names

    def _unrepr(m: re.Match[str]) -> str:
        printed.add(m.group(2))
        return m.group(1) + m.group(2)

    cleaned = CLASS_REPR.sub(_unrepr, clean(text))
    lines = [LINE_PREFIX.sub("", ln) for line in cleaned.split("\n") for ln in _unfolded(line)]
    prefix = _repeated_prefix(lines)
    # a line the user set in inline code, alone: marked as the thing pasted (DECOR drops the marks)
    in_code = {i for i, ln in enumerate(lines) if WHOLE_LINE_CODE.match(ln)}
    lines = [
        ITALIC_EXC.sub(
            r"\1\2", DECOR.sub("", PROGRESS_BAR.sub("", prefix.sub("", ln, count=1) if prefix else ln))
        )
        for ln in lines
    ]
    frames = sum(1 for ln in lines if FRAME.match(ln))
    found: list[tuple[float, str, float]] = []  # (position, text, weight)
    raised_by: dict[str, str] = {}
    headers: list[tuple[int, str]] = []
    reported: list[tuple[float, str, float]] = []  # messages an application reported (APP_REPORTS)
    for i, ln in enumerate(lines):
        s = ln.strip()
        if whole := WHOLE_LINE_QUOTED.match(s):
            s = whole.group(1).strip()
        if not s or len(s) > 2000 or FRAME.match(ln) or NOISE.search(s):
            if header := JUPYTER_HEADER.match(s):  # the type, in case the paste stops before the message
                headers.append((i, header.group(1)))
            continue
        if CPP_WHAT.match(s) and (said := CPP_WHAT.sub("", s)):
            s = said if _is_exc(said) else f"RuntimeError: {said}"
        if (app := APP_REPORTS.search(s)) and not _is_exc(app.group(1)):
            reported.append((i, app.group(1), 0.9))  # a message without its type: an error line still
            continue
        m = _is_exc(s) or _ends_traceback(lines, i) or _printed_class(s, printed)
        if m:
            line = s[m.start(1) :]
            more = _message_after(lines, i)
            if m.group(2) is None or not m.group(2).strip() or ANNOUNCE.match(s):
                # `发生异常: RuntimeError` / a bare `UserWarning:`: the message is on the next lines
                if m.group(1) == "AssertionError" and (stated := _assert_source(lines, i)):
                    found.append((i, f"AssertionError: {stated}", 1.0))
                if not more:
                    # (a type alone, colon or not: torchrun's `...errors.ChildFailedError:` above its report)
                    if i == len(lines) - 1 or s.rstrip(": ") == m.group(1):
                        found.append((i, line, 1.0))
                    continue
                line = f"{m.group(1)}: {' '.join(more)}"[:JOIN_CHARS]
                found.append((i, line, 1.0))
            else:
                if inside := _inside_quotes(line):
                    found.append((i, inside, 1.0))
                found.append((i, line, 1.0))
                if source := _failing_source(
                    lines, i
                ):  # (after the line itself: it gathers candidates first)
                    raised_by[with_source := f"{source} {line}"[:JOIN_CHARS]] = line
                    found.append((i + 0.3, with_source, SOURCE_THEN_ERROR))
                if more:
                    found.append((i + 0.5, f"{line} {' '.join(more)}"[:JOIN_CHARS], 0.97))
        elif c := COMPILER_ERROR.match(s):
            found.append((i, c.group(1), 0.9))
        elif (
            SIGNAL_LINE.search(s)
            or LOG_ERROR.match(s)
            or SAYS_WARNING.match(s)
            or LINK_ERROR.search(s)
            or FAILED_STEP.search(s)
            or (i + 1 < len(lines) and CPP_BACKTRACE.match(lines[i + 1]))
        ):
            found.append((i, s, 0.9))
    # (unless the traceback's own exception line says the same)
    found += [r for r in reported if not any(r[1] in t for _, t, _ in found)]
    # (a notebook's traceback cut before its message: the header's type, and the `raise` its last
    # arrow shows, below, are all it says)
    typeless = bool(headers) and not any(_is_exc(t) for _, t, _ in found)
    if typeless:
        found.append((headers[-1][0], headers[-1][1], 0.9))
    # errors outrank warnings: a warning pasted along with the error is rarely the question
    errors = any(not WARNING_LINE.match(s) for _, s, _ in found)
    cap = WARNING_BESIDE_ERROR if errors else 0.9
    # (Python prints a warning's source line under it: `warnings.warn("... is deprecated ...")` is
    # that warning again, and so is the message quoted in it)
    found = [
        (pos, s, min(w, cap) if WARNING_LINE.match(s) or WARN_CALL.search(s) else w) for pos, s, w in found
    ]
    # a process that dies after an error message (`Segmentation fault (core dumped)` below a
    # traceback) died of that error: the crash line is its consequence, not the question
    if any(not CRASH_LINE.search(s) and not WARNING_LINE.match(s) for _, s, _ in found):
        found = [
            (pos, s, min(w, CRASH_AFTER_ERROR) if CRASH_LINE.search(s) and not _is_exc(s) else w)
            for pos, s, w in found
        ]
    # a build or launcher reporting that a step failed (`error: command 'nvcc' failed with exit status
    # 1`) wraps the error printed before it: beside that error it is the consequence, not the question
    if any(not FAILED_STEP.search(s) and not WARNING_LINE.match(s) for _, s, _ in found):
        found = [
            (pos, s, min(w, CRASH_AFTER_ERROR) if FAILED_STEP.search(raised_by.get(s, s)) else w)
            for pos, s, w in found
        ]
    if any(KERNEL_ASSERT.search(s) for _, s, _ in found) and any(_after_assertion(s) for _, s, _ in found):
        found = [
            (pos, s, CRASH_AFTER_ERROR if _after_assertion(s) else 1.0 if KERNEL_ASSERT.search(s) else w)
            for pos, s, w in found
        ]
    plain = not found
    warnings_only = not plain and all(WARNING_LINE.match(s) for _, s, _ in found)
    # plain lines: with no error line (or warnings only) the error may be a bare message, a title, a
    # sentence; beside an error line they are a weak second opinion (`No CUDA runtime is found` above
    # the setup script's own `raise`)
    seen_text = {s for _, s, _ in found}
    order: dict[float, float] = {}  # where a line sorts, when not where it stands
    if plain or warnings_only:
        # next to warnings, a plain line is likelier the error ("module 'torch' has no attribute 'rfft'")
        weight, offered = (0.92 if warnings_only else 0.9), _last_plain_lines(lines, seen_text, 6)
        # (an opening among those last lines keeps its place, unless it was an issue form's title)
        if (first := _first_plain_line(lines, seen_text)) and first not in offered:
            offered = [first] + [(i, s) for i, s in offered if i != first[0]]
            order[first[0]] = len(lines) - 1.5  # (beside the last line: it gathers candidates too)
    else:
        weight, offered = PLAIN_BESIDE_ERROR, _last_plain_lines(lines, seen_text, PLAIN_LINES)
    found += [(i, s, weight) for i, s in offered if s not in seen_text and not WARNING_LINE.match(s)]
    # an error quoted inside prose ('it shows "An attempt has been made to start a new process..."')
    quoted = [
        (i + 0.1, m.group(1).strip(), min(0.95, cap) if WARN_CALL.search(ln) else 0.95)
        for i, ln in enumerate(lines)
        if not FRAME.match(ln) and not (i and SOURCE_OF.match(lines[i - 1]))
        for q in (
            [ln]
            if i in in_code and not (_is_exc(ln) or NOISE.search(ln) or CODE_LINE.search(ln))
            else _quoted(ln)
        )
        if (m := QUOTED_MESSAGE.match(q) or (None if CODE_LINE.search(ln) else NAMED_MESSAGE.match(q)))
        and len(WORD.findall(m.group(1).lower())) >= QUOTED_WORDS
    ]
    found += quoted[-4:]
    # (beside a real exception line, a frame's `raise` may be another branch)
    if plain or warnings_only or typeless:
        # the message as the code that raised it spells it (`raise X("...")`, `warnings.warn("...")`)
        raised = [
            (i + 0.2, m.group(2).strip(), 0.95)
            for i, ln in enumerate(lines)
            for m in RAISED_MESSAGE.finditer(ln)
            if len(WORD.findall(m.group(2).lower())) >= QUOTED_WORDS
        ]
        found += raised[-2:]
        # a notebook's last arrow raising the header's type is the exception line the paste lacks
        kind = headers[-1][1] if typeless else ""
        if raised and kind and re.search(rf"\braise\s+{re.escape(kind)}\(", lines[int(raised[-1][0])]):
            found.append((raised[-1][0], f"{kind}: {raised[-1][1]}", 1.0))
    # prefer the final exception, then later lines over earlier ones (chained causes come first)
    top = max((f[0] for f in found if f[2] >= 0.97), default=None)
    # (lines the paste marks as errors or warnings come before plain ones offered beside them, whatever
    # their weights: only the first few lines gather candidates)
    marked = set(seen_text)
    found.sort(
        key=lambda f: (f[2] < 0.97, f[1] not in marked, 0 if f[2] >= 0.97 else -f[2], -order.get(f[0], f[0]))
    )
    seen: set[str] = set()
    picked: list[tuple[str, float]] = []
    groups: list[int] = []
    for pos, s, w in found:
        if s not in seen:
            seen.add(s)
            # earlier exceptions in a chain weigh less than the last one, which is the question: a
            # wrapper (`The following operation failed in the TorchScript interpreter`) is no rival to it
            picked.append((s, w if top is None or int(pos) == int(top) else min(w, EARLIER_IN_CHAIN)))
            groups.append(int(pos))
        if len(picked) >= max_lines:
            break
    free = " ".join(ln.strip() for ln in lines if ln.strip() and not FRAME.match(ln))[:2000]
    return Extracted(picked, free, frames, plain, groups, key_shape(cleaned), raised_by)
