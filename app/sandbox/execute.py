"""Execute one snippet in *this* process and describe what happened.

Called inside a disposable child (pool or `check`): the child runs exactly one snippet and exits.
stdout/stderr are captured at the file-descriptor level by the caller, so output from C code and
subprocesses is caught too; this module reports the exception, warnings and device facts.
"""

from __future__ import annotations

import os
import runpy
import sys
import tempfile
import time
import traceback
import warnings
from typing import TypedDict

from .contracts import MESSAGE_MAX, WARNING_MAX, Expect, Outcome, Warning_, judge

SNIPPET_NAME = "snippet.py"


def _capped(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more characters dropped]"


def _names(cls: type) -> list[str]:
    """Every name an expectation may use for an exception or warning class."""
    out: list[str] = []
    for base in cls.__mro__:
        if base is object:
            continue
        out.append(base.__name__)
        out.append(f"{base.__module__}.{base.__qualname__}")
    return out


def _trim_traceback(exc: BaseException, path: str) -> str:
    """Keep only the frames from the snippet itself, plus the final exception lines."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == path]
    for f in frames:
        f.filename = SNIPPET_NAME
    lines = ["Traceback (most recent call last):\n"] if frames else []
    lines += traceback.format_list(frames)
    lines += traceback.format_exception_only(type(exc), exc)
    return "".join(lines)


class DeviceFacts(TypedDict):
    device: str
    torch_version: str | None


def device_facts() -> DeviceFacts:
    """Device name and torch version, without initialising CUDA unless it is already in use."""
    facts: DeviceFacts = {"device": "cpu", "torch_version": None}
    torch = sys.modules.get("torch")
    if torch is None:
        return facts
    facts["torch_version"] = torch.__version__
    try:
        if torch.cuda.is_initialized():
            facts["device"] = torch.cuda.get_device_name(torch.cuda.current_device())
    except Exception:  # noqa: BLE001, S110 - a dead CUDA context must not hide the snippet's own result
        pass
    return facts


def cuda_poisoned() -> str | None:
    """After the snippet: is the CUDA context dead (device-side assert, illegal access)?

    Such errors are sticky: every later CUDA call in this process fails, yet the process would
    exit 0. Sandbox children are single-use, so a poisoned process never runs anything else.
    """
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return None
    try:
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - sticky errors surface here even when the snippet exited cleanly
        return f"{type(exc).__name__}: {exc}"
    return None


def run_code(code: str, *, workdir: str | None = None) -> Outcome:
    """Run `code` as __main__ in this process; return the outcome (without stdout/stderr)."""
    workdir = workdir or tempfile.mkdtemp(prefix="pitfalls-")
    path = os.path.join(workdir, SNIPPET_NAME)
    with open(path, "w") as fh:
        fh.write(code)
    result: Outcome = {
        "outcome": "ok",
        "exc_type": None,
        "exc_names": [],
        "message": None,
        "traceback": None,
        "warnings": [],
        "reason": None,
    }
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        # What `python snippet.py` shows, each time: Python's default filters hide a deprecation a
        # library raises (on 3.12, os.fork's "multi-threaded" one at each DataLoader worker start),
        # pending deprecations, ImportWarning and ResourceWarning; the snippet's own deprecations show.
        warnings.simplefilter("always")
        for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.filterwarnings("ignore", category=category)
        warnings.filterwarnings("always", category=DeprecationWarning, module="__main__")
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as exc:
            if exc.code not in (None, 0):
                result.update(
                    {
                        "outcome": "crashed",
                        "exc_type": "SystemExit",
                        "exc_names": ["SystemExit"],
                        "message": _capped(str(exc.code), MESSAGE_MAX),
                        "reason": f"sys.exit({exc.code!r})",
                    }
                )
        except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt included: the snippet raised it
            result.update(
                {
                    "outcome": "raised",
                    "exc_type": type(exc).__name__,
                    "exc_names": _names(type(exc)),
                    "message": _capped(str(exc), MESSAGE_MAX),
                    "traceback": _capped(_trim_traceback(exc, path), MESSAGE_MAX),
                }
            )
        poisoned = cuda_poisoned()
    result["duration_ms"] = round((time.perf_counter() - start) * 1000, 2)
    warned: list[Warning_] = [
        {
            "category": w.category.__name__,
            "names": _names(w.category),
            "message": _capped(str(w.message), WARNING_MAX),
            "line": w.lineno if w.filename == path else None,
        }
        for w in caught
    ]
    result["warnings"] = warned[:50]
    if poisoned:
        result["cuda_poisoned"] = True
        if result["outcome"] in ("ok", "wrong"):
            result.update(
                {
                    "outcome": "raised",
                    "exc_type": poisoned.split(":")[0],
                    "message": poisoned,
                    "exc_names": [poisoned.split(":")[0]],
                }
            )
    elif result["outcome"] == "ok" and result["warnings"]:
        result["outcome"] = "warned"
    facts = device_facts()
    result["device"], result["torch_version"] = facts["device"], facts["torch_version"]
    return result


_cuda_poisoned = cuda_poisoned  # the earlier private name


def finish(
    result: Outcome, *, stdout: str, stderr: str, truncated: bool, check: str | None, expect: Expect | None
) -> Outcome:
    """Attach captured output, apply the stdout `check`, and judge against the expectation."""
    import re

    result.update({"stdout": stdout, "stderr": stderr, "truncated": truncated})
    if check and result["outcome"] in ("ok", "warned") and not re.search(check, stdout, re.DOTALL):
        result.update({"outcome": "wrong", "reason": f"stdout does not match /{check}/"})
    result["expected"], why = judge(result, expect)
    if result.get("reason") is None:
        result["reason"] = why
    elif result["expected"] is not None:
        result["reason"] = f"{result['reason']}; {why}"
    return result


def main(argv: list[str]) -> int:
    """`python -m app.sandbox.execute JOB.json RESULT.json`: a cold, one-shot child."""
    import json

    with open(argv[0]) as fh:
        job = json.load(fh)
    with warnings.catch_warnings():  # the pool imports torch before any snippet: do the same
        warnings.simplefilter("ignore")
        import torch  # noqa: F401
    result = run_code(job["code"], workdir=job.get("workdir"))
    with open(argv[1], "w") as fh:
        json.dump(result, fh)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001, S110 - the snippet may have closed or replaced it
            pass
    os._exit(0)  # skip interpreter teardown: a snippet's leftover threads must not hang the exit


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
