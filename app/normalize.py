"""Turn a pasted error into the lines that matter, with their volatile parts set aside.

Both sides of a match go through here: entry signatures at sync time and user pastes at search
time, so "Tried to allocate 20.00 MiB (GPU 0 ...)" and "Tried to allocate 1.5 GiB (GPU 3 ...)" meet.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# (placeholder, what the reader is told was ignored, pattern); order matters: wide shapes first.
RULES: list[tuple[str, str, re.Pattern]] = [
    ("_url_", "url", re.compile(r"https?://\S+")),
    ("_hex_", "address", re.compile(r"\b0x[0-9a-fA-F]+\b")),
    ("_shape_", "shape", re.compile(r"torch\.Size\(\[[\d,\s]*\]\)")),
    ("_size_", "size", re.compile(r"\b\d+(?:\.\d+)?\s?(?:[KMGT]i?B|bytes|B)\b")),
    ("_path_", "path", re.compile(r"(?:[A-Za-z]:\\|\\\\)[^\s\"'<>|:]+|(?<![\w.:/])(?:~|\.{1,2})?(?:/[\w.\-+@~]+){2,}/?")),
    ("_shape_", "shape", re.compile(r"\[\s*-?\d+(?:\s*,\s*-?\d+)+\s*,?\s*\]|\(\s*\d+(?:\s*,\s*\d+)+\s*,?\s*\)|\b\d+(?:x\d+)+\b")),
    ("_arch_", "GPU arch", re.compile(r"\bsm_\d+a?\b|\bcompute_\d+\b")),
    ("_gpu_", "GPU name", re.compile(r"\b(?:NVIDIA\s+)?(?:GeForce|Tesla|Quadro|TITAN|RTX|GTX|A\d{2,3}|H\d{3}|L\d{1,2}|V100|T4|P100|K\d{2})\b[\w\- ]*?(?=\s+(?:with|which|GPU|is|has)\b|\s*[,;)]|$)")),
    ("_q_", "quoted name", re.compile(r"(?<![A-Za-z])'([^'\n]{1,200})'(?![A-Za-z])|\"([^\"\n]{1,200})\"")),
    ("_num_", "number", re.compile(r"(?<=\bGPU)\d+\b|(?<![\w.])[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?!\w)", re.I)),
]
WORD = re.compile(r"[a-z0-9_]+")

# Lines that carry the error: `ExcType: message` anywhere (after timestamps or `file.py:12:`),
# CUDA kernel assertions, NCCL/CUDA error lines, and bare exception names.
EXC_LINE = re.compile(r"(?:^|[\s:\[(>])((?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Warning|Interrupt|Failure))(?::\s*(.*))?$")
SIGNAL_LINE = re.compile(r"Assertion `|CUDA error|CUDNN_STATUS|CUBLAS_STATUS|NCCL (?:error|WARN)|Watchdog caught|"
                         r"killed by signal|bus error|Segmentation fault|core dumped|out of memory|is deprecated|"
                         r"Error\(s\) in|Missing key|Unexpected key|size mismatch for", re.I)
FRAME = re.compile(r"^\s*(?:File \"|File '|at \S+\(|\^+\s*$|~+\^*~*\s*$|-+>\s*\d+|\d+\s+\w|Cell In\[|Input In \[|<ipython-input-)")
CONTINUATION = re.compile(r"^\s+\S|^\t")


@dataclass
class Normalized:
    """A line with volatile parts replaced, its tokens, and what was set aside."""

    text: str
    tokens: list[str]
    aux: list[str]  # low-weight tokens: what was inside quotes
    ignored: Counter = field(default_factory=Counter)


def clean(text: str) -> str:
    """Drop NULs, ANSI colours and progress-bar overwrites; unify newlines."""
    text = text.replace("\x00", "").replace("\r\n", "\n")
    text = ANSI.sub("", text)
    # a progress bar rewrites its line with \r: keep what was printed last
    return "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))


def normalize(line: str) -> Normalized:
    """Replace numbers, sizes, shapes, paths, addresses, GPU names and quoted names by placeholders."""
    ignored: Counter = Counter()
    aux: list[str] = []
    out = line.strip()
    for placeholder, label, pattern in RULES:
        def _sub(m: re.Match, placeholder=placeholder, label=label) -> str:
            ignored[label] += 1
            if placeholder == "_q_":
                aux.extend(WORD.findall((m.group(1) or m.group(2) or "").lower()))
            return f" {placeholder} "
        out = pattern.sub(_sub, out)
    out = re.sub(r"\s+", " ", out).strip()
    tokens = [t for t in WORD.findall(out.lower()) if not t.isdigit()]
    return Normalized(out, tokens, aux, ignored)


@dataclass
class Extracted:
    """The lines of a paste worth matching, best first, with a weight each."""

    lines: list[tuple[str, float]]
    free_text: str
    frames: int = 0


def extract(text: str, *, max_lines: int = 10) -> Extracted:
    """Find the lines that carry the error in a paste: a one-liner, a traceback, a log."""
    lines = [ln for ln in clean(text).split("\n")]
    frames = sum(1 for ln in lines if FRAME.match(ln))
    found: list[tuple[int, str, float]] = []  # (position, text, weight)
    last_exc = None
    for i, ln in enumerate(lines):
        s = ln.strip()
        if not s or len(s) > 2000 or FRAME.match(ln):
            continue
        m = EXC_LINE.search(s)
        if m and (m.group(2) is not None or i == len(lines) - 1 or s == m.group(1)):
            start = s.find(m.group(1))
            found.append((i, s[start:], 1.0))
            last_exc = len(found) - 1
        elif SIGNAL_LINE.search(s):
            found.append((i, s, 0.9))
    if last_exc is not None:
        # the final exception's message often goes on over indented lines (state_dict errors)
        i = found[last_exc][0]
        for ln in lines[i + 1:i + 6]:
            if ln.strip() and CONTINUATION.match(ln) and not FRAME.match(ln):
                found.append((i + 0.5, ln.strip(), 0.95))
        pos, s, _ = found[last_exc]
        found[last_exc] = (pos, s, 1.0)
    # prefer the final exception, then later lines over earlier ones (chained causes come first)
    found.sort(key=lambda f: (f[2] < 1.0, -f[0]))
    seen: set[str] = set()
    picked: list[tuple[str, float]] = []
    for pos, s, w in found:
        if s not in seen:
            seen.add(s)
            # earlier exceptions in a chain weigh a little less than the last one
            picked.append((s, w if pos == (found[0][0] if found else pos) else min(w, 0.95)))
        if len(picked) >= max_lines:
            break
    free = " ".join(ln.strip() for ln in lines if ln.strip() and not FRAME.match(ln))[:2000]
    return Extracted(picked, free, frames)
