"""The line picker on the formats real pastes come in: which line carries the error, and what it says."""

from __future__ import annotations

import pytest

from app.normalize import extract, key_shape, normalize

# (paste, the line that must be offered first, lines that must not be offered at all)
FORMATS = {
    # a C++ exception's message has no type in front: the backtrace under it says what it is, and a
    # warning printed before it is not the question
    "cpp-message-above-its-backtrace": (
        """/env/lib/python3.6/site-packages/torch/nn/modules/module.py:545: UserWarning: Implicit dimension choice for softmax has been deprecated. Change the call to include dim=X as an argument.
  result = self._slow_forward(*input, **kwargs)
Only tensors or tuples of tensors can be output from traced functions (getOutput at /work/torch/csrc/jit/tracer.cpp:208)
frame #0: c10::Error::Error(c10::SourceLocation, std::string const&) + 0xbc (0x7fff48d5b6ac in /env/torch/lib/libc10.so)
frame #1: torch::jit::tracer::TracingState::getOutput(c10::IValue const&) + 0x410 (0x7fff4c91fd30 in /env/torch/lib/libtorch.so)""",
        "Only tensors or tuples of tensors can be output from traced functions (getOutput at "
        "/work/torch/csrc/jit/tracer.cpp:208)",
        ["frame #"],
    ),
    "cpp-message-above-exception-raised-from": (
        """[W accumulate_grad.h:170] Warning: grad and param do not obey the gradient layout contract.
Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!
Exception raised from compute_types at ../aten/src/ATen/TensorIterator.cpp:392 (most recent call first):
frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x42 (0x7f0 in /env/torch/lib/libc10.so)""",
        "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
        ["frame #"],
    ),
    # the line that ends a traceback is its exception, whatever the class is called (`BadZipFile`,
    # `torch._dynamo.exc.Unsupported`, a bare `StopIteration`), before the log lines above it
    "exception-named-without-error-ends-a-traceback": (
        """Downloading: "https://github.com/snakers4/silero-vad/zipball/master" to C:\\Users\\L/.cache\\torch\\hub\\master.zip
Traceback (most recent call last):
  File "slice.py", line 13, in <module>
    vad_model, utils = torch.hub.load(
  File "venv\\lib\\site-packages\\torch\\hub.py", line 257, in _get_cache_or_reload
    with zipfile.ZipFile(cached_file) as cached_zipfile:
  File "zipfile.py", line 1336, in _RealGetContents
zipfile.BadZipFile: File is not a zip file""",
        "zipfile.BadZipFile: File is not a zip file",
        [],
    ),
    "bare-builtin-exception-ends-a-traceback": (
        """it stops at iteration 160/20000
Traceback (most recent call last):
  File "train.py", line 88, in main
    batch = next(loader_iter)
            ^^^^^^^^^^^^^^^^^
StopIteration""",
        "StopIteration",
        [],
    ),
    # a message set alone in inline code, above a system dump: marked as what was pasted, so it
    # comes before the report's last lines (a code line in backticks is no message)
    "inline-code-line-above-a-dump": (
        """I can load the 8-bit model, but then I get the message:

`Error invalid configuration argument at line 69 in file /src/csrc/ops.cu`

`model = AutoModel.from_pretrained(name, load_in_8bit=True)`
My system:
```
8x NVIDIA RTX A6000
CUDA SETUP: Detected CUDA version 113
```

Any insights would be greatly appreciated.""",
        "Error invalid configuration argument at line 69 in file /src/csrc/ops.cu",
        [],
    ),
    "vscode-chinese": (
        """发生异常: RuntimeError
CUDA error: device-side assert triggered
  File "D:\\proj\\train.py", line 41, in <module>
    loss.backward()""",
        "RuntimeError: CUDA error: device-side assert triggered",
        [],
    ),
    "vscode-english": (
        """Exception has occurred: RuntimeError
Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!
  File "/home/u/a.py", line 9, in <module>""",
        "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
        [],
    ),
    "pycharm-trailer": (
        """Traceback (most recent call last):
  File "C:/work/main.py", line 3, in <module>
    x.view(-1, 10)
RuntimeError: shape '[-1, 10]' is invalid for input of size 7
python-BaseException""",
        "RuntimeError: shape '[-1, 10]' is invalid for input of size 7",
        ["python-BaseException"],
    ),
    # Windows has no signals: PyCharm's last line is the native crash, as an NTSTATUS exit code
    "pycharm-native-crash": (
        """Epoch 51/100:   0%|          | 0/18 [00:00<?, ?it/s]Start Train

Process finished with exit code -1073741819 (0xC0000005)
What is the reason for this?""",
        "Process finished with exit code -1073741819 (0xC0000005)",
        [],
    ),
    # ... and on Linux and macOS a signal, which the IDE names after the exit code
    "pycharm-signal-crash": (
        """I run the sample in PyCharm and it exits right after loading the point cloud:
```
Loading data done
Process finished with exit code 139 (interrupted by signal 11: SIGSEGV)
```""",
        "Process finished with exit code 139 (interrupted by signal 11: SIGSEGV)",
        [],
    ),
    # ... while an ordinary exit code under a traceback is only the run ending
    "pycharm-exit-code-1": (
        """Traceback (most recent call last):
  File "C:/work/main.py", line 3, in <module>
RuntimeError: shape '[-1, 10]' is invalid for input of size 7

Process finished with exit code 1""",
        "RuntimeError: shape '[-1, 10]' is invalid for input of size 7",
        ["Process finished"],
    ),
    # Chinese and Japanese prose runs into the exception with no space, and an input method types a
    # full-width colon after it
    "cjk-prose-runs-into-type": (
        """你好，我在训练的时候报了这个错误AssertionError:
The NVIDIA driver on your system is too old (found version 9010).

(pvnet) user@host:~/clean-pvnet$ nvidia-smi""",
        "AssertionError: The NVIDIA driver on your system is too old (found version 9010).",
        [],
    ),
    "full-width-colon": (
        "运行时报错ValueError：Expected 2D (unbatched) or 3D (batched) input to conv1d, but got input of size: [2, 1, 3, 16]",
        "ValueError：Expected 2D (unbatched) or 3D (batched) input to conv1d, but got input of size: [2, 1, 3, 16]",
        [],
    ),
    # the error is offered alone first; read with the source line that raised it, second
    "source-line-then-error": (
        """  File "/x/y.py", line 12
    t.cuda(async=self.use_cuda)
               ^
SyntaxError: invalid syntax""",
        "SyntaxError: invalid syntax",
        [],
    ),
    # Markdown italics around the pasted error (`_..._`) are no part of its type
    "italic-underscores": (
        "It stops with\n_AssertionError: Trying to use CUDA, but CUDA is not available._\n\nany idea?",
        "AssertionError: Trying to use CUDA, but CUDA is not available.",
        ["_AssertionError"],
    ),
    # an exception printed as `f"{type(e)}: {e}"`: the class's repr before the message
    "class-repr-before-message": (
        """## Exception summary

<class 'torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode'>: Could not extract specialized integer from data-dependent expression u0 (unhinted: u0).  (Size-like symbols: none)

Caused by: (_export/non_strict_utils.py:1066 in __torch_function__)
For more information, run with TORCH_LOGS="dynamic\"""",
        "torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode: Could not extract specialized integer "
        "from data-dependent expression u0 (unhinted: u0).  (Size-like symbols: none)",
        ["<class"],
    ),
    # a service's output read back from the system journal: each line behind `date host unit[pid]: `
    "journald-prefix-on-every-line": (
        """Aug 12 10:38:34 fileserver unsloth[4073658]: Unable to import `torchao` Tensor objects.
Aug 12 10:38:34 fileserver unsloth[4073658]: [xformers|WARNING]WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built for:
Aug 12 10:38:34 fileserver unsloth[4073658]:     PyTorch 2.10.0+cu128 with CUDA 1208 (you have 2.11.0+cu130)""",
        "PyTorch 2.10.0+cu128 with CUDA 1208 (you have 2.11.0+cu130)",
        ["fileserver", "4073658"],
    ),
    "exception-ignored-after": (
        """RuntimeError: DataLoader worker (pid(s) 1234) exited unexpectedly
Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f>
Closing remaining open files:data.h5...done""",
        "RuntimeError: DataLoader worker (pid(s) 1234) exited unexpectedly",
        ["Closing remaining open files:data.h5...done"],
    ),
    "no-type-prefix": (
        "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
        "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
        [],
    ),
    "inside-sentence": (
        "When I run train.py I get RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB",
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB",
        [],
    ),
    "backticks": (
        "`RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x10 and 20x5)`",
        "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x10 and 20x5)",
        [],
    ),
    "markdown-report": (
        """- **Exception Type:** RuntimeError
- **Exception Message:** RuntimeError: Input type (float) and bias type (c10::Half) should be the same""",
        "RuntimeError: Input type (float) and bias type (c10::Half) should be the same",
        [],
    ),
    "quoted-reply": (
        "> TypeError: can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first.",
        "TypeError: can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first.",
        [],
    ),
    "jupyter-header": (
        """---------------------------------------------------------------------------
IndexError                                Traceback (most recent call last)
Cell In[3], line 2
----> 2 emb(torch.tensor([10]))

IndexError: index out of range in self""",
        "IndexError: index out of range in self",
        ["IndexError                                Traceback (most recent call last)"],
    ),
    "warning-wrapped": (
        """/opt/conda/lib/python3.7/site-packages/torch/nn/functional.py:3613: UserWarning:
    Found GPU0 GRID K1 which is of cuda capability 3.0.
    PyTorch no longer supports this GPU because it is too old.
""",
        "UserWarning: Found GPU0 GRID K1 which is of cuda capability 3.0. PyTorch no longer supports this GPU because it is too old.",
        [],
    ),
    "timestamped-log": (
        """2024-03-01 10:02:11 | INFO | epoch 3
2024-03-01 10:02:12 | ERROR | RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system error, NCCL version 2.14.3""",
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system error, NCCL version 2.14.3",
        [],
    ),
    "progress-bar": (
        "Epoch 1:  12%|█▏ | 12/100 [00:03<00:20]\rEpoch 1:  13%|█▎ | 13/100\nValueError: Expected more than 1 value per channel when training, got input size torch.Size([1, 64])",
        "ValueError: Expected more than 1 value per channel when training, got input size torch.Size([1, 64])",
        [],
    ),
    "chained-last-wins": (
        """ImportError: libcudart.so.11.0: cannot open shared object file: No such file or directory

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "x.py", line 1, in <module>
OSError: [WinError 126] The specified module could not be found""",
        "OSError: [WinError 126] The specified module could not be found",
        ["During handling of the above exception, another exception occurred:"],
    ),
    "pip-error-lines": (
        """Collecting torch==1.12.1+cu113
ERROR: Could not find a version that satisfies the requirement torch==1.12.1+cu113 (from versions: 2.2.0, 2.2.1)
ERROR: No matching distribution found for torch==1.12.1+cu113""",
        "ERROR: No matching distribution found for torch==1.12.1+cu113",
        [],
    ),
    "logger-error-record": (
        """[2024-05-02 11:03:12,441] torch.distributed.run: [WARNING] Setting OMP_NUM_THREADS
ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 4121) of binary: /usr/bin/python3""",
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 "
        "(pid: 4121) of binary: /usr/bin/python3",
        [],
    ),
    "quoted-with-log-tag": (
        'I get "[Error]: Target size (torch.Size([8])) must be the same as input size (torch.Size([8, 1]))" '
        "when training",
        "Target size (torch.Size([8])) must be the same as input size (torch.Size([8, 1]))",
        [],
    ),
    "root-logger-error-record": (
        "=== Diagnostic Run ===\n"
        "ERROR:root:Exporting to ONNX failed. Expected all tensors to be on the same device, but found at "
        "least two devices, cuda:0 and cpu!",
        "ERROR:root:Exporting to ONNX failed. Expected all tensors to be on the same device, but found at "
        "least two devices, cuda:0 and cpu!",
        [],
    ),
    "cpp-backtrace-frames": (
        "terminate called after throwing an instance of 'c10::Error'\n"
        '  what():  isTensor() INTERNAL ASSERT FAILED at "../aten/src/ATen/core/ivalue_inl.h":133, please '
        "report a bug to PyTorch. Expected Tensor but got Tuple\n"
        "Exception raised from toTensor at ../aten/src/ATen/core/ivalue_inl.h:133 (most recent call first):\n"
        "frame #0: c10::Error::Error(c10::SourceLocation, std::__cxx11::basic_string<char, "
        "std::char_traits<char>, std::allocator<char> >) + 0x69 (0x7f3c in /usr/lib/libc10.so)\n"
        "frame #1: c10::detail::torchCheckFail(char const*, char const*, unsigned int, std::string const&) "
        "+ 0xd2 (0x7f3d in /usr/lib/libc10.so)\n"
        "Aborted (core dumped)",
        # (C++ prints the message as `what():`; Python would show it after `RuntimeError: `)
        'RuntimeError: isTensor() INTERNAL ASSERT FAILED at "../aten/src/ATen/core/ivalue_inl.h":133, please '
        "report a bug to PyTorch. Expected Tensor but got Tuple",
        ["frame #", "c10::Error::Error", "torchCheckFail"],
    ),
    "cpp-terminate-what": (
        "terminate called after throwing an instance of 'c10::Error'\n"
        "  what():  CUDA error: initialization error\n"
        "Exception raised from c10_cuda_check_implementation at ../c10/cuda/CUDAException.cpp:44",
        "RuntimeError: CUDA error: initialization error",
        [],
    ),
    "tqdm-bar-before-the-message": (
        "  0%|          | 0/1 [00:00<?, ?it/s]Could not load library libcudnn_cnn_infer.so.8. Error: libcuda.so: "
        "cannot open shared object file: No such file or directory\nAborted",
        "Could not load library libcudnn_cnn_infer.so.8. Error: libcuda.so: cannot open shared object file: "
        "No such file or directory",
        ["it/s]"],
    ),
    "library-warning-records-around-its-error": (
        "MIOpen(HIP): Warning [FindWinogradSolutions] /MIOpen/src/sqlite_db.cpp:108: open memvfs: unable to open "
        "database file\n"
        "MIOpen Error: /MIOpen/src/ocl/convolutionocl.cpp:831: Forward Convolution cannot be executed due to "
        "incorrect params\n"
        "MIOpen(HIP): Warning [FindWinogradSolutions] /MIOpen/src/sqlite_db.cpp:108: open memvfs: unable to open "
        "database file",
        "MIOpen Error: /MIOpen/src/ocl/convolutionocl.cpp:831: Forward Convolution cannot be executed due to "
        "incorrect params",
        [],
    ),
    "bare-assertion-error-under-its-assert": (
        "I get an error when training on VOC\n----------------------\n"
        'assert all("masks" in t for t in targets)\nAssertionError\n-----------------------------',
        # (the assert statement is the bare error's only message; a drawn rule is no message)
        'AssertionError: assert all("masks" in t for t in targets)',
        ["-----"],
    ),
    "traceback-cut-at-an-assert-with-a-message": (
        "Training stops with this:\n\nTraceback (most recent call last):\n"
        '  File "train.py", line 88, in step\n'
        '    assert len(state["found_inf"]) > 0, "No inf checks were recorded for this optimizer."\n\n'
        "My environment is the same as requirements.txt",
        # (the copy stops before `AssertionError`: the assert's own message is the error)
        "No inf checks were recorded for this optimizer.",
        [],
    ),
    "build-log-first-error-before-the-failed-step": (
        "/usr/local/cuda/bin/nvcc -DWITH_CUDA -c src/nms_kernel.cu -o build/nms_kernel.o\n"
        "nvcc fatal   : Unsupported gpu architecture 'compute_75'\n"
        "error: command '/usr/local/cuda/bin/nvcc' failed with exit status 1",
        # (the failed step only reports that the error above it happened)
        "nvcc fatal   : Unsupported gpu architecture 'compute_75'",
        [],
    ),
    "a-plain-warning-prefix": (
        "loading model from ckpt\n"
        "Warning, cannot find cuda-compiled version of RoPE2D, using a slow pytorch version instead\n"
        "done",
        "Warning, cannot find cuda-compiled version of RoPE2D, using a slow pytorch version instead",
        [],
    ),
    "jupyter-traceback-cut-before-its-message": (
        "---------------------------------------------------------------------------\n"
        "BrokenPipeError                           Traceback (most recent call last)\n"
        "<ipython-input-12-07d529c513cd> in <module>()\n"
        "---> 22 for i_batch, sample_batched in enumerate(dataloader):\n",
        # (the header is all that names the error when the paste stops before the last line)
        "BrokenPipeError",
        [],
    ),
    "torchrun-rank-prefixes": (
        "[rank1]: Traceback (most recent call last):\n"
        '[rank1]:   File "/w/train.py", line 9, in <module>\n'
        "[rank1]:     loss.backward()\n"
        "[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
        '2025-10-31 03:11:02,474 - trainer - INFO - [rank0]:   File "/w/run.py", line 3, in <module>',
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        ["[rank", "loss.backward()", "run.py"],
    ),
    # a logger or a launcher relaying a child's traceback puts its own prefix before every line
    "vllm-log-prefix-on-every-line": (
        "INFO 05-27 11:47:55 [backends.py:430] Dynamo bytecode transform time: 13.06 s\n"
        "ERROR 05-27 11:47:57 [core.py:396] EngineCore failed to start.\n"
        "ERROR 05-27 11:47:57 [core.py:396] Traceback (most recent call last):\n"
        'ERROR 05-27 11:47:57 [core.py:396]   File "/env/site-packages/vllm/v1/engine/core.py", line 387, in run\n'
        "ERROR 05-27 11:47:57 [core.py:396]     engine_core = EngineCoreProc(*args, **kwargs)\n"
        'ERROR 05-27 11:47:58 [core.py:396]   File "/env/site-packages/torch/cuda/__init__.py", line 478, in _lazy_init\n'
        "ERROR 05-27 11:47:58 [core.py:396]     torch._C._cuda_init()\n"
        "ERROR 05-27 11:47:58 [core.py:396] RuntimeError: No CUDA GPUs are available",
        "RuntimeError: No CUDA GPUs are available",
        ["[core.py:396]", "engine_core ="],
    ),
    "ray-worker-prefix-on-every-line": (
        "(RayTrainWorker pid=48211, ip=10.0.0.2) Traceback (most recent call last):\n"
        '(RayTrainWorker pid=48211, ip=10.0.0.2)   File "/app/train.py", line 41, in train_loop\n'
        "(RayTrainWorker pid=48211, ip=10.0.0.2)     loss = criterion(out, y)\n"
        "(RayTrainWorker pid=48211, ip=10.0.0.2) ValueError: Expected input batch_size (32) to match target "
        "batch_size (64).",
        "ValueError: Expected input batch_size (32) to match target batch_size (64).",
        ["pid=", "criterion"],
    ),
    "docker-compose-service-prefix": (
        "web-1     | Traceback (most recent call last):\n"
        'web-1     |   File "/app/main.py", line 3, in <module>\n'
        "web-1     |     import torch\n"
        "web-1     | ModuleNotFoundError: No module named 'torch'\n"
        "web-1 exited with code 1",
        "ModuleNotFoundError: No module named 'torch'",
        ["web-1", "exited with code"],
    ),
    "cuda-error-advice-is-no-line": (
        "RuntimeError: CUDA error: invalid device ordinal\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
        "might be incorrect.\n"
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1.\n"
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
        "RuntimeError: CUDA error: invalid device ordinal",
        ["asynchronously reported", "CUDA_LAUNCH_BLOCKING", "TORCH_USE_CUDA_DSA"],
    ),
    # ComfyUI reports the message without its type before the traceback (often cut off in a post)
    "app-reported-message-before-a-cut-traceback": (
        "got prompt\n"
        "C:\\env\\torch\\nn\\utils\\weight_norm.py:28: UserWarning: torch.nn.utils.weight_norm is deprecated in "
        "favor of torch.nn.utils.parametrizations.weight_norm.\n"
        '  warnings.warn("torch.nn.utils.weight_norm is deprecated")\n'
        "!!! Exception during processing!!! probability tensor contains either `inf`, `nan` or element < 0\n"
        "Traceback (most recent call last):\n"
        '  File "C:\\ComfyUI\\execution.py", line 151, in recursive_execute',
        "probability tensor contains either `inf`, `nan` or element < 0",
        ["Exception during processing"],
    ),
    "bare-assertion-below-assert-call": (
        'File "mel.py", line 58, in mel_spectrogram\n    assert(torch.min(y.data) >= -1)\nAssertionError',
        "AssertionError: assert(torch.min(y.data) >= -1)",
        [],
    ),
    "exception-quoted-in-a-sentence": (
        "I get \"ModuleNotFoundError: No module named 'torchtext.legacy'\" when the code attempted to import it",
        "ModuleNotFoundError: No module named 'torchtext.legacy'",
        [],
    ),
    "exception-in-backticks-then-prose": (
        "`RuntimeError: 'weight' must be 2-D` error when finetuning llama3-8b with ZeRO3",
        "RuntimeError: 'weight' must be 2-D",
        [],
    ),
    "quoted-path-kept-whole": (
        'OSError: [WinError 126] Error loading "C:\\envs\\torch\\lib\\c10.dll" or one of its dependencies.',
        'OSError: [WinError 126] Error loading "C:\\envs\\torch\\lib\\c10.dll" or one of its dependencies.',
        [],
    ),
    "warn-call-in-prose": (
        'Same code, but with the error warnings.warn("Detected call of `lr_scheduler.step()` before '
        '`optimizer.step()`. In PyTorch 1.1.0 and later")\nHow to solve it',
        "Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and later",
        [],
    ),
    "pip-build-wrapper": (
        """  Preparing metadata (setup.py) ... error
  error: subprocess-exited-with-error

  × python setup.py egg_info did not run successfully.
  ╰─> [3 lines of output]
      OSError: CUDA_HOME environment variable is not set. Please set it to your CUDA install root.
      [end of output]
  note: This error originates from a subprocess, and is likely not a problem with pip.
error: metadata-generation-failed""",
        "OSError: CUDA_HOME environment variable is not set. Please set it to your CUDA install root.",
        ["subprocess-exited-with-error", "metadata-generation-failed", "originates from a subprocess"],
    ),
    # a traceback that lost its newlines (an issue title, a chat message)
    "one-line-traceback": (
        'Traceback (most recent call last):   File "D:\\llm\\run\\pretrain.py", line 17, in <module>     '
        'from lit_gpt.model import GPT   File "D:\\llm\\lit_gpt\\model.py", line 13, in <module>     '
        "from flash_attn import flash_attn_func ModuleNotFoundError: No module named 'flash_attn'",
        "ModuleNotFoundError: No module named 'flash_attn'",
        ["from flash_attn import"],
    ),
    # the same without its header, in backticks: the last frame run on with its exception
    "one-line-frame-then-error": (
        '`File "/Users/ana/envs/m/lib/python3.12/site-packages/torch/serialization.py", line 1548, in load '
        "raise pickle.UnpicklingError(_get_wo_message(str(e))) from None _pickle.UnpicklingError: Weights only "
        "load failed. In PyTorch 2.6, we changed the default value of the weights_only argument in torch.load "
        "from False to True.`",
        "_pickle.UnpicklingError: Weights only load failed. In PyTorch 2.6, we changed the default value of the "
        "weights_only argument in torch.load from False to True.",
        ["raise pickle"],
    ),
    # a shell's crash report in the user's language reads as the English one
    "crash-line-in-the-users-language": (
        "Loading pretrained weights from the hub\nstart training ...\n段错误 (核心已转储)",
        "Segmentation fault (core dumped)",
        [],
    ),
    # the linker's diagnostic above make's trailers: each trailer only says the step above it failed
    "link-error-above-make-trailers": (
        """/usr/bin/ld: CMakeFiles/app.dir/main.cpp.o: in function `main':
main.cpp:(.text+0x2d): undefined reference to `c10::Error::Error(c10::SourceLocation, std::string)'
collect2: error: ld returned 1 exit status
make[2]: *** [CMakeFiles/app.dir/build.make:104: app] Error 1
make[1]: *** [CMakeFiles/Makefile2:83: CMakeFiles/app.dir/all] Error 2
make: *** [Makefile:91: all] Error 2""",
        "main.cpp:(.text+0x2d): undefined reference to `c10::Error::Error(c10::SourceLocation, std::string)'",
        [],
    ),
    # a step that died of a native crash: the crash code is the error, not a trailer (nor is the
    # `raise` above it, read with the error)
    "failed-step-with-a-crash-code": (
        """Training stops right away with this, and my GPU looks fine:
Traceback (most recent call last):
  File "C:\\kohya\\launch.py", line 9, in <module>
    raise subprocess.CalledProcessError(returncode=process.returncode, cmd=cmd)
subprocess.CalledProcessError: Command '['python.exe', 'train_network.py']' returned non-zero exit status 3221225477.""",
        "subprocess.CalledProcessError: Command '['python.exe', 'train_network.py']' returned non-zero exit "
        "status 3221225477.",
        [],
    ),
    # an exception quoted in a sentence, its message quoting a name with the same mark
    "exception-quoted-in-a-sentence-quoting-a-name": (
        'When I run inference I get "RuntimeError: "addmm_impl_cpu_" not implemented for \'Half\'" from the line '
        '"out = model(x)", any idea?',
        "RuntimeError: \"addmm_impl_cpu_\" not implemented for 'Half'",
        [],
    ),
    # a compiler's diagnostic above the build step that failed: the diagnostic, without its location
    "compiler-diagnostic": (
        """building 'DCN' extension
gcc -pthread -fPIC -I/opt/conda/lib/python3.8/site-packages/torch/include -c src/cpu/dcn_cpu.cpp
src/cpu/dcn_cpu.cpp:9:10: fatal error: TH/TH.h: No such file or directory
    9 | #include <TH/TH.h>
      |          ^~~~~~~~~
compilation terminated.
error: command 'gcc' failed with exit status 1""",
        "fatal error: TH/TH.h: No such file or directory",
        [],
    ),
    "nvcc-diagnostic": (
        """/home/kim/ops/src/roi_align_kernel.cu(38): error: identifier "AT_CHECK" is undefined

1 error detected in the compilation of "/home/kim/ops/src/roi_align_kernel.cu".
error: command '/usr/local/cuda/bin/nvcc' failed with exit code 1""",
        'error: identifier "AT_CHECK" is undefined',
        [],
    ),
    # a kernel's assertion breaks the CUDA context: the next CUDA call's failure ends the traceback
    "cuda-failure-after-kernel-assertion": (
        """/opt/conda/aten/src/ATen/native/cuda/ScatterGatherKernel.cu:365: operator(): block: [924,0,0], thread: [31,0,0] Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds"` failed.
Traceback (most recent call last):
  File "train.py", line 208, in train
    loss.backward()
RuntimeError: Unable to find a valid cuDNN algorithm to run convolution""",
        "/opt/conda/aten/src/ATen/native/cuda/ScatterGatherKernel.cu:365: operator(): block: [924,0,0], thread: "
        '[31,0,0] Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds"` failed.',
        [],
    ),
    # a notebook's traceback copied up to its last arrow, a `raise` cut mid-call: no message line
    "jupyter-cut-at-the-raise": (
        """RuntimeError                              Traceback (most recent call last)
Cell In[17], line 1
----> 1 torchaudio.save("out.wav", wav, 24000, format='wav')

File site-packages\\torchaudio\\_backend\\utils.py:221, in get_save_func.<locals>.dispatcher(uri, format, backend_name)
    219     if backend.can_encode(uri, format):
    220         return backend
--> 221 raise RuntimeError(f"Couldn't find appropriate backend to handle uri {uri} and format {format}.""",
        "RuntimeError: Couldn't find appropriate backend to handle uri {uri} and format {format}.",
        [],
    ),
    # a message quoted in a sentence that opens on a quoted name, the last line a thank-you
    "quoted-message-opening-on-a-name": (
        """I met some errors and I don't know what happened.
It says "'RACNN' object has no attribute 'module'".Do you have some solutions?
many thanks""",
        "'RACNN' object has no attribute 'module'",
        [],
    ),
    # a serverless worker's JSON log holding a JSON error record: escaped twice, the traceback cut
    "json-error-record-escaped-twice": (
        r"""### Logs
"error": "{\"error_type\": \"<class 'RuntimeError'>\", \"error_message\": \"expected scalar type Half but found Float\", \"error_traceback\": \"Traceback (most recent call last):\\n  File \\\"/usr/lib/python3.11/site-packages/torch/nn/modules/module.py\\\", line 1501, in _call_impl\\n    return forward_call(*args, **kwargs)\\n""",
        "RuntimeError: expected scalar type Half but found Float",
        [],
    ),
    # a whole message in curly quotes, its own quotes inside (straightened, the pairs don't nest)
    "message-in-outer-quotes-holding-quotes": (
        """Does somebody meet this error when loading the pretrained model?
“Unexpected key(s) in state_dict: "cond_stage_model.transformer.text_model.embeddings.position_ids". “""",
        'Unexpected key(s) in state_dict: "cond_stage_model.transformer.text_model.embeddings.position_ids".',
        [],
    ),
    # a JavaScript app (React Native, Node) prints its own stack under torch's message: frames too
    "javascript-stack": (
        """Error: Lite Interpreter version number does not match. The model version must be between 3 and 7 but the model version is 8 ()
Exception raised from parseMethods at ../torch/csrc/jit/mobile/import.cpp:317 (most recent call first):
(no backtrace available)
    at promiseMethodWrapper (http://localhost:8081/index.bundle?platform=android&dev=true:2772:45)
    at call (native)
    at tryCatch (http://localhost:8081/index.bundle?platform=android&dev=true:7703:23)
    at Object.<anonymous> (/home/app/node_modules/onnxruntime-node/dist/index.js:12:5)""",
        "Error: Lite Interpreter version number does not match. The model version must be between 3 and 7 but "
        "the model version is 8 ()",
        ["at tryCatch", "at call", "no backtrace", "at Object"],
    ),
}


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_line_picker_finds_the_error_line(name):
    paste, first, absent = FORMATS[name]
    ex = extract(paste)
    assert ex.lines, name
    assert ex.lines[0][0] == first, ex.lines[:3]
    offered = [
        line for line, _ in ex.lines if line not in ex.raised_by
    ]  # (not the error read with its source)
    for line in absent:
        assert all(line not in o for o in offered), (line, offered)


def test_line_picker_offers_wrapped_message_joined_and_alone():
    ex = extract(
        "UserWarning: To copy construct from a tensor, it is recommended to use\n"
        "sourceTensor.clone().detach() or sourceTensor.clone().detach().requires_grad_(True),\n"
        "rather than torch.tensor(sourceTensor)."
    )
    offered = [line for line, _ in ex.lines]
    assert "UserWarning: To copy construct from a tensor, it is recommended to use" in offered
    assert any(
        o.endswith("rather than torch.tensor(sourceTensor).") and o.startswith("UserWarning") for o in offered
    )


def test_plain_text_is_marked_plain():
    assert extract("dataloader hangs at the first batch").plain
    assert not extract("RuntimeError: boom").plain


def test_a_report_that_opens_with_its_error_offers_it_before_pages_of_log():
    # no exception line anywhere: the opening line names the error, the tail is a config dump
    log = "\n".join(f"main/0 [0]: 'option_{n}': None," for n in range(12))
    ex = extract(f"Failed to initialize NumPy: _ARRAY_API not found\n\n{log}")
    assert ex.plain
    # among the lines that gather candidates (search.MAX_LINES), not the seventh of seven
    assert "Failed to initialize NumPy: _ARRAY_API not found" in [line for line, _ in ex.lines[:2]]
    # an opening that is the user talking, or a shell prompt, is no title
    for opening in ("When I run the training script it fails", "C:\\work>python -m pip install deepspeed"):
        assert opening not in [line for line, _ in extract(f"{opening}\n\n{log}").lines]


def test_an_issue_forms_headings_and_ticked_boxes_are_not_its_message():
    # the message sits in the form's first section; the headings and boxes below it are the form's
    form = [
        "### Is there an existing issue for this?",
        "- [X] I have searched the existing issues",
        "### Current Behavior",
        "v1.1 fails to load: Unable to load weights from pytorch checkpoint file for './model.bin'",
        "it worked in v1.0",
        "### Expected Behavior",
        "- [ ] loads as before",
        "### Steps To Reproduce",
        "### Environment",
        "PyTorch 2.0.0, Python 3.8, ubuntu 20.04, Cuda 11.8",
    ]
    lines = [line for line, _ in extract("\n\n".join(form)).lines]
    assert not [line for line in lines if line.startswith(("###", "[X]", "[ ]"))]
    assert any("Unable to load weights" in line for line in lines[:4])


def test_a_printed_tensor_is_not_a_message():
    # the values under "but found invalid values:" are a tensor's repr, whatever its size
    dump = (
        "tensor([[nan, nan, nan,  ..., nan, nan, nan],\n" + "        [nan, nan, 0.5,  ..., 1e-3, nan],\n" * 8
    )
    text = f"Expected parameter scale of distribution Normal to satisfy the constraint, but found invalid values:\n{dump}"
    text += "        [nan, nan, nan,  ..., nan, nan, nan]], device='cuda:0', grad_fn=<ExpBackward0>)"
    lines = [line for line, _ in extract(text).lines]
    assert lines and lines[0].startswith("Expected parameter scale"), lines
    assert not [line for line in lines if "nan," in line], lines


@pytest.mark.parametrize("tag", ["[bug]: ", "[BUG]", "[Bug Report] ", "Bug: "])
def test_an_issue_titles_template_tag_is_not_part_of_its_error(tag):
    # issue forms put `[Bug]:` before the title; the title is still the error the report is about
    log = "### What happened\n\nit fails on the first image\nand on every one after it\n\n### OS\n\nmacOS 14 on an M2"
    ex = extract(f"{tag}Cannot convert a MPS Tensor to float64 dtype\n\n{log}")
    assert "Cannot convert a MPS Tensor to float64 dtype" in [line for line, _ in ex.lines[:2]]


@pytest.mark.parametrize(
    "text, placeholder",
    [
        ("undefined symbol: _ZN3c1017RegisterOperatorsD1Ev", "_symbol_"),
        ("Tried to allocate 20.00 MiB", "_size_"),
        ("File C:\\Users\\ana\\x.py", "_path_"),
        ("got torch.Size([1, 64])", "_shape_"),
    ],
)
def test_volatile_parts_become_placeholders(text, placeholder):
    assert placeholder in normalize(text).tokens


def test_a_state_dict_key_is_a_placeholder_whatever_the_model():
    # "size mismatch for <key>": the key names one model's parameter; the batch-norm buffer added in
    # torch 0.4 is the point of its own message and stays a word
    short = normalize(
        "size mismatch for fc.bias: copying a param with shape torch.Size([10]) from checkpoint"
    )
    long = normalize(
        "size mismatch for model.encoder.layer.11.attention.self.value.weight: copying a param with "
        "shape torch.Size([768, 768]) from checkpoint"
    )
    assert short.tokens == long.tokens and "_key_" in short.tokens
    assert "k:encoder" in long.aux and "k:fc" in short.aux
    assert "num_batches_tracked" in normalize('unexpected key "bn1.num_batches_tracked" in state_dict').aux
    assert "num_batches_tracked" in normalize("Unexpected key(s): layer1.0.bn1.num_batches_tracked").tokens
    # dotted module paths are words, as before
    assert "floattensor" in normalize("Expected object of type torch.cuda.FloatTensor").tokens


def test_where_in_torchs_sources_an_error_was_raised_is_not_a_name():
    # the same THC error raised from another source file in another release is the same error; a
    # library that failed to load is not
    a = normalize(
        "RuntimeError: cuda runtime error (2) : out of memory at /pytorch/aten/src/THC/THCGeneral.cpp:663"
    )
    b = normalize(
        "RuntimeError: cuda runtime error (2) : out of memory at /opt/conda/aten/src/THC/generic/THCStorage.cu:158"
    )
    assert (a.tokens, a.aux) == (b.tokens, b.aux)
    assert (
        "p:detectron2"
        in normalize("ImportError: /env/site-packages/detectron2/_C.so: undefined symbol: x").aux
    )


def test_error_codes_stay_words():
    # "[WinError 126]" and "[WinError 1455]" are different errors whatever language the rest is in
    assert "c126" in normalize("OSError: [WinError 126] 找不到指定的模块。").tokens
    assert "c1455" not in normalize("OSError: [WinError 126] 找不到指定的模块。").tokens
    assert (
        "c118"
        in normalize("_pickle.UnpicklingError: Weights only load failed. Unsupported operand 118").tokens
    )


def test_small_numbers_are_kept_as_weak_tokens():
    a, b = normalize("except in dimension 0"), normalize("except in dimension 1")
    assert a.tokens == b.tokens and a.aux != b.aux


def test_private_accelerator_module_reads_as_its_public_name():
    # pickle raises from its C module: users paste both spellings
    assert (
        normalize("_pickle.UnpicklingError: invalid load key, 'v'.").tokens
        == normalize("pickle.UnpicklingError: invalid load key, 'v'.").tokens
    )
    assert "_c" in normalize("torch._C._LinAlgError: linalg.cholesky").tokens  # inner private names stay


def test_boilerplate_sentences_do_not_count():
    a = normalize(
        "RuntimeError: Expected is_sm80 || is_sm90 to be true, but got false. (Could this error message "
        "be improved? If so, please report an enhancement request to PyTorch.)"
    )
    assert "enhancement" not in a.tokens and "is_sm80" in a.tokens
    # the dispatcher's tail, with its list of backends, is the same for every operator
    c = normalize(
        "NotImplementedError: Could not run 'quantized::conv2d.new' with arguments from the 'CPU' backend. "
        "This could be because the operator doesn't exist for this backend, or was omitted during the "
        "selective/custom build process (if using custom build). If you are a Facebook employee using "
        "PyTorch on mobile, please visit https://fburl.com/ptmfixes for possible resolutions. "
        "'quantized::conv2d.new' is only available for these backends: [QuantizedCPU, QuantizedCUDA, "
        "BackendSelect, Python, Named, Conjugate, Negative, ZeroTensor, ADInplaceOrView, AutogradOther]."
    )
    assert (
        c.tokens
        == normalize(
            "NotImplementedError: Could not run 'quantized::conv2d.new' with arguments from "
            "the 'CPU' backend."
        ).tokens
    )
    # the linker's last line under every failed link
    assert (
        normalize("/usr/bin/ld: cannot find -lcuda\ncollect2: error: ld returned 1 exit status").tokens
        == normalize("/usr/bin/ld: cannot find -lcuda").tokens
    )
    # dynamo's trailer under every error it raises
    d = normalize(
        "torch._dynamo.exc.Unsupported: generator. Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace "
        "(please do this especially if you're reporting a bug to PyTorch). For even more developer context, "
        'set TORCH_LOGS="+dynamo"'
    )
    assert d.tokens == normalize("torch._dynamo.exc.Unsupported: generator.").tokens
    b = normalize(
        "RuntimeError: CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously "
        "reported at some other API call, so the stacktrace below might be incorrect."
    )
    assert b.tokens == normalize("RuntimeError: CUDA error: device-side assert triggered").tokens


# Lines beside a recognised error line: offered, but the picker trusts them less than the error.
BESIDE = {
    "crash-after-traceback": (
        "THCudaCheck FAIL file=/w/k.cu line=192 error=98 : invalid device function\n"
        "RuntimeError: cuda runtime error (98) : invalid device function at /w/k.cu:192\n"
        "Segmentation fault (core dumped)",
        "Segmentation fault (core dumped)",
    ),
    "warning-above-error": (
        "/w/ppo.py:457: UserWarning: Creating a tensor from a list of numpy.ndarrays is extremely slow.\n"
        "Traceback (most recent call last):\n"
        "ValueError: expected sequence of length 17 at dim 1 (got 0)",
        "UserWarning: Creating a tensor from a list of numpy.ndarrays is extremely slow.",
    ),
    # Python prints the warning's source line under it; that echo (and the message quoted in it) is
    # the same warning, not an error line of its own
    "warning-source-echo-above-error": (
        "/venv/torch/nn/utils/weight_norm.py:30: UserWarning: torch.nn.utils.weight_norm is deprecated "
        "in favor of torch.nn.utils.parametrizations.weight_norm.\n"
        '  warnings.warn("torch.nn.utils.weight_norm is deprecated in favor of '
        'torch.nn.utils.parametrizations.weight_norm.")\n'
        "Traceback (most recent call last):\n"
        "RuntimeError: Couldn't find appropriate backend to handle uri a.wav and format None.",
        'warnings.warn("torch.nn.utils.weight_norm is deprecated in favor of '
        'torch.nn.utils.parametrizations.weight_norm.")',
    ),
    "native-crash-after-traceback": (
        "RuntimeError: CUDA error: an illegal memory access was encountered\n\n"
        "Process finished with exit code -1073740791 (0xC0000409)",
        "Process finished with exit code -1073740791 (0xC0000409)",
    ),
    "log-line-above-own-raise": (
        "No CUDA runtime is found, using CUDA_HOME='/usr/local/cuda'\n"
        "Traceback (most recent call last):\n"
        '  File "setup.py", line 47, in get_extensions\n'
        "    raise NotImplementedError('Cuda is not availabel')\n"
        "NotImplementedError: Cuda is not availabel",
        "No CUDA runtime is found, using CUDA_HOME='/usr/local/cuda'",
    ),
}


@pytest.mark.parametrize("name", sorted(BESIDE))
def test_lines_beside_an_error_are_offered_with_less_weight(name):
    paste, beside = BESIDE[name]
    weights = dict(extract(paste).lines)
    assert beside in weights, weights
    error = max(weights.values())
    assert error >= 0.97 and weights[beside] <= 0.8, weights
    assert all(w <= 0.8 for line, w in weights.items() if "deprecated" in line), weights


def test_crash_line_alone_is_the_error():
    # with nothing else in the paste, the crash is what there is to explain
    assert extract("Segmentation fault (core dumped)").lines[0][1] >= 0.9


def test_relative_library_path_reads_as_a_file():
    # `torch_scatter/_version_cuda.so` in a message names the library that failed, like a full path
    assert "p:_version_cuda" in normalize("torch_scatter/_version_cuda.so: undefined symbol:").aux
    assert "p:_version_cuda" in normalize("/opt/x/torch_scatter/_version_cuda.so: undefined symbol").aux
    assert normalize("see pytorch/vision for details").aux == []


@pytest.mark.parametrize(
    "path, name",
    [
        ("/usr/lib/python3.10/site-packages/torchvision/_C.so", "p:torchvision"),
        ("/home/u/envs/a/lib/python3.8/site-packages/kaolin/_C.so", "p:kaolin"),
        ("/opt/conda/lib/python3.8/site-packages/mmcv/_ext.cpython-38-x86_64-linux-gnu.so", "p:mmcv"),
        ("/x/vllm/_C.abi3.so", "p:vllm"),
        ("/x/mmdet/ops/dcn/deform_conv_cuda.cpython-36m-x86_64-linux-gnu.so", "p:deform_conv_cuda"),
    ],
)
def test_a_compiled_module_named_like_every_packages_reads_as_its_package(path, name):
    # `_C.so` and `_ext.so` are in many packages: torchvision's failing to load is not kaolin's, and
    # the ABI tag (`cpython-36m-...`) names no library
    aux = normalize(f"ImportError: {path}: undefined symbol: _ZN3c1017RegisterOperatorsD1Ev").aux
    assert [t for t in aux if t.startswith("p:")] == [name]


def test_which_side_is_on_the_gpu_is_kept():
    # both directions have the same words; the side left on the CPU is what the fix is about
    gpu_input = normalize(
        "Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be the same"
    )
    cpu_input = normalize(
        "Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same"
    )
    assert sorted(gpu_input.tokens) == sorted(cpu_input.tokens)
    assert gpu_input.aux == ["input_gpu", "weight_cpu"] and cpu_input.aux == ["input_cpu", "weight_gpu"]
    # an Apple GPU input beside a CPU model is the same mistake as a CUDA one
    assert normalize("Input type (MPSFloatType) and weight type (torch.FloatTensor)").aux == gpu_input.aux


@pytest.mark.parametrize(
    "message, kind",
    [
        (
            "Expected object of type torch.FloatTensor but found type torch.cuda.FloatTensor for argument #2 'weight'",
            "device",
        ),
        (
            "Expected object of type Variable[torch.cuda.FloatTensor] but found type Variable[torch.FloatTensor] for argument #1 'mat2'",
            "device",
        ),
        ("expected type torch.cuda.FloatTensor but got torch.FloatTensor", "device"),
        ("Expected object of backend CUDA but got backend CPU for argument #2 'mat2'", "device"),
        (
            "Expected object of type torch.cuda.FloatTensor but found type torch.cuda.LongTensor for argument #2 'other'",
            "dtype",
        ),
        ("expected type torch.cuda.FloatTensor but got torch.cuda.LongTensor", "dtype"),
        ("Expected object of backend CPU but got backend SparseCPU for argument #2 'mat2'", "layout"),
    ],
)
def test_which_way_two_named_tensor_types_differ_is_kept(message, kind):
    # the old type checks print the same words for a tensor left on the CPU and for two dtypes mixed
    n = normalize(f"RuntimeError: {message}")
    assert [t for t in n.aux if t.startswith("ty:")] == [f"ty:{kind}"]


def test_two_tensor_types_that_differ_in_nothing_read_say_no_kind():
    n = normalize("RuntimeError: expected type Variable[CUDAType] but got Variable[CUDAType]")
    assert not [t for t in n.aux if t.startswith("ty:")]


@pytest.mark.parametrize(
    "symbol, kind",
    [
        ("_ZN3c105ErrorC1ENS_14SourceLocationESs", "sym:string"),  # the old ABI's std::string
        ("_ZN5torch3jit11parseSchemaERKSsb", "sym:string"),
        (
            "_ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE",
            "sym:string",
        ),
        ("_ZN8pybind116detail11type_casterIN2at6TensorEvE4loadENS_6handleEb", "sym:python"),
        ("_ZN3c104cuda9SetDeviceEi", "sym:api"),
        ("_ZN2at4_ops5zeros4callEN3c108ArrayRefINS2_6SymIntEEE", "sym:api"),
    ],
)
def test_an_undefined_symbol_is_replaced_but_its_kind_is_kept(symbol, kind):
    n = normalize(f"ImportError: /x/y/_ext.so: undefined symbol: {symbol}")
    assert "_symbol_" in n.tokens and symbol.lower() not in n.tokens
    assert [t for t in n.aux if t.startswith("sym:")] == [kind]


@pytest.mark.parametrize(
    "lists, shape",
    [
        (
            'Missing key(s) in state_dict: "fc.weight". Unexpected key(s) in state_dict: "module.fc.weight".',
            "wrapper",
        ),
        ('Unexpected key(s) in state_dict: "_orig_mod.fc.weight", "_orig_mod.fc.bias"', "wrapper"),
        (
            'Missing key(s) in state_dict: "fc.weight". Unexpected key(s) in state_dict: "model.fc.weight".',
            "prefix",
        ),
        (
            'Missing key(s) in state_dict: "fc.weight". Unexpected key(s) in state_dict: "epoch", "optimizer".',
            "container",
        ),
        (
            'Unexpected key(s) in state_dict: "bn1.num_batches_tracked", "layer1.0.bn1.num_batches_tracked".',
            "counters",
        ),
        (
            'Missing key(s) in state_dict: "head.weight". Unexpected key(s) in state_dict: "classifier.weight".',
            "renamed",
        ),
        ('Missing key(s) in state_dict: "fc.weight", "fc.bias"', "missing"),
        ('Unexpected key(s) in state_dict: "aux_head.weight",...', "unexpected"),
        ("Error(s) in loading state_dict for Net:", None),
    ],
)
def test_a_state_dicts_key_lists_are_read_for_their_shape(lists, shape):
    # one message, many causes: which keys are missing and which are left over tells them apart
    assert key_shape(lists) == shape
    # a paste with the lists on two lines reads the same
    assert key_shape(lists.replace(". Unexpected", ".\n\tUnexpected")) == shape


def test_curly_quotes_read_as_straight_ones():
    # GCC in a UTF-8 locale prints `‘AT_CHECK’ was not declared`: the same quoted name as 'AT_CHECK'
    assert (
        normalize("error: ‘AT_CHECK’ was not declared in this scope").aux
        == normalize("error: 'AT_CHECK' was not declared in this scope").aux
        == ["at_check"]
    )
    assert extract("error: ‘AT_CHECK’ was not declared").lines[0][0] == "error: 'AT_CHECK' was not declared"


def test_traceback_inside_an_escaped_string_is_read_as_one():
    # a JSON log (or a repr) holds the traceback with `\n` and `\"` escapes
    paste = (
        '{"status": "error", "traceback": "Traceback (most recent call last):\\n  File \\"/a/b.py\\", line 3, '
        'in run\\n    scaler.step(opt)\\nNotImplementedError: \\"_amp_foreach_non_finite_check_and_unscale_cuda\\" '
        "not implemented for 'BFloat16'\\n\"}"
    )
    ex = extract(paste)
    offered = [line for line, _ in ex.lines]
    assert (
        "NotImplementedError: \"_amp_foreach_non_finite_check_and_unscale_cuda\" not implemented for 'BFloat16'"
        in offered
    )
    assert ex.frames == 1 and not any("scaler.step" in o for o in offered if o not in ex.raised_by)
    # an error's repr in an app's error box: escaped quotes around its names, `\n` between its lines
    boxed = extract(
        "Generation failed, see the terminal. \\'RuntimeError: Expected all tensors to be on the same device, "
        "but found at least two devices, cuda:0 and cpu! (when checking argument for argument \\'mat1\\')"
        "\\n\\nSet TORCHDYNAMO_VERBOSE=1 for the internal stack trace\\n\\'"
    )
    assert boxed.lines[0][0].endswith("(when checking argument for argument 'mat1')"), boxed.lines[:2]
    # a Windows path is no escaped newline
    assert extract('OSError: cannot open "C:\\new\\nets\\model.pt"').lines[0][0].endswith('nets\\model.pt"')


def test_a_notebook_error_copied_as_json_is_read_as_python_prints_it():
    # VS Code's Jupyter output, copied: the type and the message are JSON strings, escapes and all
    paste = (
        '{\n\t"name": "OSError",\n\t"message": "[WinError 126] The specified module could not be '
        'found. Error loading \\"C:\\\\envs\\\\DL\\\\lib\\\\fbgemm.dll\\" or one of its dependencies.",\n'
        '\t"stack": "-----------\nOSError        Traceback (most recent call last)\nCell In[1], line 1\n'
        '----> 1 import torch\n"\n}'
    )
    assert extract(paste).lines[0][0] == (
        "OSError: [WinError 126] The specified module could not be found. "
        'Error loading "C:\\envs\\DL\\lib\\fbgemm.dll" or one of its dependencies.'
    )


def test_a_warning_comes_before_the_plain_lines_offered_beside_it():
    # only the first few lines gather candidates: six plain lines (code, prose) must not push out
    # the one line the paste marks as a warning
    from app.search import MAX_LINES

    paste = (
        "Here is what I get:\n>>> import torch\n>>> torch.cuda.device_count()\n1\n>>> torch.cuda.is_available()\n"
        "/opt/venv/lib/python3.9/site-packages/torch/cuda/__init__.py:88: UserWarning: CUDA initialization: CUDA "
        "driver initialization failed, you might not have a CUDA gpu.\n"
        "  return torch._C._cuda_getDeviceCount() > 0\nFalse\nInstalled with\n"
        "pip install torch==1.13.1+cu117 --extra-index-url https://download.pytorch.org/whl/cu117"
    )
    first = [line for line, _ in extract(paste).lines[:MAX_LINES]]
    assert (
        "UserWarning: CUDA initialization: CUDA driver initialization failed, you might not have a CUDA gpu."
        in first
    )


def test_a_quoted_symbol_is_a_name_too():
    # "invalid load key, '<'" names the file's first byte: '<' and '?' must not read alike
    assert normalize("invalid load key, '<'.").aux != normalize("invalid load key, '?'.").aux


@pytest.mark.parametrize(
    "sentence, message",
    [
        # an apostrophe opens nothing, and a backtick pair around a name is not around the prose after it
        (
            "It's possible: I create functions via Python's `exec()` and compiling them using `torch.compile` "
            "as below gives the error `torch._dynamo.exc.Unsupported: cache_size_limit reached` every time.",
            "torch._dynamo.exc.Unsupported: cache_size_limit reached",
        ),
        # Markdown bold inside the quotes
        (
            'However, the train_mem.py tells "**Expected is_sm80 to be true, but got false.** " every time.',
            "Expected is_sm80 to be true, but got false.",
        ),
        # ``double backticks`` quote as one, with `single` ones inside
        (
            "I encountered ``Checkpointing is not compatible with .grad() or when an `inputs` parameter is passed`` "
            "when adding checkpointing.",
            "Checkpointing is not compatible with .grad() or when an",
        ),
    ],
)
def test_a_message_quoted_in_a_sentence_is_offered_whole(sentence, message):
    offered = [line for line, _ in extract(sentence).lines]
    assert any(o.startswith(message) for o in offered), offered
    assert not any(o.startswith(("s possible", "and compiling")) for o in offered), offered


def test_a_windows_crash_code_is_kept_whichever_way_it_is_printed():
    # PyCharm prints `exit code -1073741819 (0xC0000005)`, multiprocessing `exit code 3221225477`,
    # the event log `Exception code: 0xc0000005`: one crash (access violation), and not another
    # (0xC000001D, an illegal instruction); other numbers and addresses stay placeholders
    codes = [
        normalize(text).tokens
        for text in (
            "exit code -1073741819 (0xC0000005)",
            "exit code 3221225477",
            "Exception code: 0xc0000005",
            # subprocess's message ends with a full stop
            "returned non-zero exit status 3221225477.",
        )
    ]
    assert all("ntstatus_c0000005" in tokens for tokens in codes), codes
    assert "ntstatus_c000001d" in normalize("exit code -1073741795 (0xC000001D)").tokens
    assert normalize("exit code 1").tokens == ["exit", "code", "_num_"]
    assert normalize("at address 0x7ffe0000").tokens == ["at", "address", "_hex_"]


def test_a_library_file_named_without_its_folder_reads_as_a_file():
    # `exllamav2_ext.so: undefined symbol` and `libcudart.so.11.0: cannot open` name the library as a
    # path would: a signature written with the bare name matches a paste with the full path
    bare = normalize("exllamav2_ext.so: undefined symbol: _ZN3c104cuda14ExchangeDeviceEa")
    full = normalize(
        "/home/u/.cache/torch_extensions/exllamav2_ext/exllamav2_ext.so: undefined symbol: _ZN3c104cuda9SetDeviceEi"
    )
    assert bare.tokens == full.tokens and "p:exllamav2_ext" in bare.aux and "p:exllamav2_ext" in full.aux
    assert "p:libcudart" in normalize("ImportError: libcudart.so.11.0: cannot open shared object file").aux
    assert normalize("the so called fix").aux == []


def test_a_wrapped_models_own_module_keys_are_not_a_wrapper_mismatch():
    # loading into a DataParallel model, every key of both sides starts with `module.`: spare ones
    # are extra weights, not a checkpoint saved from a wrapped model
    keys = '\tUnexpected key(s) in state_dict: "module.to_rgb.0.weight", "module.to_rgb.0.bias".'
    assert key_shape(f"Error(s) in loading state_dict for DataParallel:\n{keys}") == "unexpected"
    assert key_shape(f"Error(s) in loading state_dict for Net:\n{keys}") == "wrapper"


def test_the_state_dict_message_without_keys_says_it_names_no_key_shape():
    # the bare message (the hub's wording) yields to an entry whose keys the paste's keys match
    assert "sd:none" in normalize("RuntimeError: Error(s) in loading state_dict for SACPolicy:").aux
    with_keys = normalize('Error(s) in loading state_dict for Net: Missing key(s) in state_dict: "fc.weight"')
    assert "sd:missing" in with_keys.aux and "sd:none" not in with_keys.aux


def test_an_error_is_also_offered_with_the_source_line_that_raised_it():
    paste = FORMATS["source-line-then-error"][0]
    ex = extract(paste)
    joined = "t.cuda(async=self.use_cuda) SyntaxError: invalid syntax"
    assert [line for line, _ in ex.lines] == ["SyntaxError: invalid syntax", joined]
    assert ex.raised_by == {joined: "SyntaxError: invalid syntax"}
    assert ex.groups[0] == ex.groups[1]  # one line of the paste, read two ways


def test_a_notebooks_arrow_marks_the_source_line_that_raised_the_error():
    paste = """EOFError                                  Traceback (most recent call last)
Cell In[3], line 1
----> 1 m = torch.load("x.pt")

File ~/env/lib/python3.10/site-packages/torch/serialization.py:1040, in load(f, map_location)
   1039     pass
-> 1040 magic_number = pickle_module.load(f, **pickle_load_args)
   1041 return x

EOFError: Ran out of input"""
    ex = extract(paste)
    joined = "magic_number = pickle_module.load(f, **pickle_load_args) EOFError: Ran out of input"
    assert ex.lines[0][0] == "EOFError: Ran out of input"
    assert ex.raised_by == {joined: "EOFError: Ran out of input"}
    # prose between the arrow and the error: the arrow is no longer the error's own line
    assert not extract(paste.replace("   1041 return x", "and then it said")).raised_by


def test_a_cuda_extensions_own_check_outweighs_the_crash_after_it():
    # OpenPCDet's `CUDA kernel failed : %s` is the error; the segfault that follows is its consequence
    weights = dict(
        extract("CUDA kernel failed : invalid device function\nSegmentation fault (core dumped)").lines
    )
    assert (
        weights["CUDA kernel failed : invalid device function"] > weights["Segmentation fault (core dumped)"]
    )


def test_a_signature_written_with_the_class_repr_reads_as_the_paste_does():
    # extract reads `<class 'KeyError'>: ...` in a paste as `KeyError: ...`; a signature copied the
    # same way must give the same tokens, or the two never match whole
    printed = normalize("<class 'KeyError'>: 'getpwuid(): uid not found: 501'")
    plain = normalize("KeyError: 'getpwuid(): uid not found: 501'")
    assert (printed.tokens, printed.aux) == (plain.tokens, plain.aux)


def test_the_signal_that_killed_a_worker_is_a_word_and_a_kind_of_its_own():
    killed, bus = (
        normalize(f"RuntimeError: DataLoader worker (pid 77) is killed by signal: {name}.")
        for name in ("Killed", "Bus error")
    )
    assert "signal_killed" in killed.tokens and "signal_bus" in bus.tokens
    assert "sg:killed" in killed.aux and "sg:bus" in bus.aux


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        (
            "Expected 4-dimensional input for 4-dimensional weight [64, 3, 7, 7], but got 3-dimensional input",
            "fewer",
        ),
        (
            "Expected 4-dimensional input for 4-dimensional weight 64 1 3 3, but got 5-dimensional input",
            "more",
        ),
        (
            "Expected 4-dimensional input for 4-dimensional weight [8, 3, 3, 3], but got input of size [2, 5, 3, 9, 9]",
            "more",
        ),
        (
            "Expected 4D (unbatched) or 5D (batched) input to conv3d, but got input of size: [1, 1, 16, 24, 24, 16]",
            "more",
        ),
        (
            "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [224, 224]",
            "fewer",
        ),
        (
            "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [3, 224, 224]",
            None,
        ),
    ],
)
def test_a_convolution_input_off_by_an_axis_is_a_kind(line, kind):
    # both directions of the message share every word: the kind says which way the input is off
    assert {t for t in normalize(line).aux if t.startswith("dm:")} == ({f"dm:{kind}"} if kind else set())


@pytest.mark.parametrize(
    ("saved", "current", "kind"),
    [
        ("4096, 1024", "2097152, 1", "packed"),  # a 4-bit layer: two codes a byte, in one column
        ("4096, 1024", "0", "empty"),  # a ZeRO-3 partitioned parameter outside its gather
        ("10, 512", "1000, 512", "other"),
        ("4096, 1024", "4096, 1", "other"),  # a column, but not the packed count
    ],
)
def test_a_size_mismatch_s_two_shapes_are_a_kind(saved, current, kind):
    # every cause prints the same words; only the shapes, read together, tell these apart
    line = (
        f"size mismatch for model.proj.weight: copying a param with shape torch.Size([{saved}]) from "
        f"checkpoint, the shape in current model is torch.Size([{current}])."
    )
    assert {t for t in normalize(line).aux if t.startswith("sm:")} == {f"sm:{kind}"}
