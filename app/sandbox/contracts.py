"""The sandbox's contracts, in one place: what a job is, the limits it runs under, what comes back
(DESIGN.md "Contracts": OUTCOME), and how an outcome is judged. Standard library only.

Every default lives here once: `app/config.py` takes the server's per-snippet limits and the local
workers' sizes from `Limits()` and `WORKER_CONCURRENCY`/`WORKER_SPARE`; the pool, the agent,
`pitfalls verify` and the server build jobs with `make_job` and outcomes with `blank`.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

OUTCOMES = ("raised", "warned", "ok", "wrong", "timeout", "crashed", "skipped")
OutcomeName = Literal["raised", "warned", "ok", "wrong", "timeout", "crashed", "skipped"]
WORKER_CONCURRENCY = 2  # snippets one worker runs at once (its pool's size)
# A snippet's own text can be huge (a 100 MB warning): what goes on the wire is capped in the child;
# the server validates again against the same numbers.
MESSAGE_MAX = 64 * 1024  # an exception's message or traceback, in characters
WARNING_MAX = 8 * 1024  # one warning's message
WORKER_SPARE = 2  # warmed children each worker keeps ready


class Expect(TypedDict, total=False):
    """What an entry's snippet must do."""

    outcome: OutcomeName
    exc_type: str  # for "raised": a name in the exception's MRO (plain or module-qualified)
    warning: str  # for "warned": the warning category, likewise
    match: str  # a regular expression the message must match


class Requires(TypedDict, total=False):
    cuda: bool
    gpus: int
    packages: list[str]
    fresh_process: bool
    reproducible: bool


class Job(TypedDict):
    """One snippet to run: what the server leases to a worker and what `Pool.run` takes."""

    code: str
    expect: Expect | None
    check: str | None  # a regular expression stdout must match (outcome "wrong" otherwise)
    requires: Requires
    fresh_process: bool  # a cold interpreter instead of a warm child
    limits: dict[str, Any]  # requests, clamped to the worker's `Limits`


class Warning_(TypedDict, total=False):
    category: str
    names: list[str]
    message: str
    line: int | None


class Outcome(TypedDict, total=False):
    """What one run did (DESIGN.md OUTCOME); extra fields are allowed, these are the ones read."""

    outcome: OutcomeName
    exc_type: str | None
    exc_names: list[str]
    message: str | None
    traceback: str | None
    warnings: list[Warning_]
    stdout: str
    stderr: str
    truncated: bool
    duration_ms: float
    device: str | None
    torch_version: str | None
    expected: bool | None  # it did what the entry says (None: nothing to judge)
    reason: str | None


def make_job(
    code: str,
    *,
    expect: Expect | None = None,
    check: str | None = None,
    requires: Requires | None = None,
    fresh_process: bool = False,
    limits: dict[str, Any] | None = None,
) -> Job:
    return {
        "code": code,
        "expect": expect,
        "check": check,
        "requires": requires or {},
        "fresh_process": fresh_process,
        "limits": limits or {},
    }


def blank(outcome: str, reason: str, **extra: Any) -> dict:
    """An OUTCOME for a run that produced no result of its own (timeout, crash, skip)."""
    return {
        "outcome": outcome,
        "exc_type": None,
        "exc_names": [],
        "message": None,
        "traceback": None,
        "warnings": [],
        "reason": reason,
        "duration_ms": 0.0,
        **extra,
    }


@dataclass(frozen=True)
class Limits:
    """Limits for one snippet run. A pool's `Limits` are maxima: jobs may ask for less, never more."""

    timeout_s: float = 30.0  # wall clock, from handing the job over to the result; kills the group
    cpu_s: float = 60.0  # RLIMIT_CPU on the snippet's process (all its threads)
    memory_mb: int = 4096  # cgroup memory.max for the run (where the host lets us)
    gpu_memory_fraction: float = 0.45  # torch.cuda.set_per_process_memory_fraction, in the child
    max_procs: int = 512  # cgroup pids.max: counts threads too (torch starts one per core)
    max_output_bytes: int = 64 * 1024  # per stream; the rest is drained, dropped, marked truncated
    max_file_mb: int = 64  # RLIMIT_FSIZE: the largest file the snippet may write
    network: bool = False  # False: a fresh network namespace (loopback only) where the OS allows
    cold_start_s: float = 60.0  # extra wall/CPU time for `fresh_process` jobs (a cold `import torch`)

    def clamp(self, requested: dict | None) -> tuple[Limits, list[str]]:
        """Apply a job's overrides, never above these maxima; return (limits, notes on what changed)."""
        notes: list[str] = []
        values = dataclasses.asdict(self)
        kinds = {
            f.name: {"float": float, "int": int}.get(str(f.type), float) for f in dataclasses.fields(self)
        }
        for key, want in (requested or {}).items():
            if key not in values:
                notes.append(f"unknown limit {key!r} ignored")
                continue
            top = values[key]
            if key == "network":
                got = bool(want) and top
                if bool(want) and not top:
                    notes.append("network requested, but this pool runs snippets without network")
            else:
                try:
                    want = kinds[key](want)
                except (TypeError, ValueError):
                    notes.append(f"limit {key}={want!r} is not a number; kept {top}")
                    continue
                got = min(want, top) if want > 0 else top
                if want > top:
                    notes.append(f"{key}={want} clamped to this pool's maximum {top}")
            values[key] = got
        return Limits(**values), notes

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def judge(outcome: dict, expect: dict | None) -> tuple[bool | None, str]:
    """Return (expected, reason). `expected` is None when there is nothing to judge (skipped)."""
    got = outcome.get("outcome")
    if got == "skipped":
        return None, outcome.get("reason") or "skipped"
    if not expect:
        return True, "no expectation declared"
    want = expect.get("outcome", "ok")
    if got != want:
        detail = ""
        if got == "raised":
            detail = f": {outcome.get('exc_type')}: {(outcome.get('message') or '')[:300]}"
        elif got == "warned":
            detail = ": " + "; ".join(
                f"{w.get('category')}: {w.get('message', '')[:200]}" for w in outcome.get("warnings", [])[:3]
            )
        elif got in ("timeout", "crashed", "wrong"):
            detail = f": {outcome.get('reason') or ''}"
        return False, f"expected {want}, got {got}{detail}"
    pattern = expect.get("match")
    if want == "raised":
        names = outcome.get("exc_names") or [outcome.get("exc_type")]
        if expect.get("exc_type") and expect["exc_type"] not in names:
            return False, f"expected {expect['exc_type']}, got {outcome.get('exc_type')}"
        if pattern and not re.search(pattern, outcome.get("message") or "", re.DOTALL):
            return False, f"message does not match /{pattern}/: {(outcome.get('message') or '')[:300]}"
        return True, f"raised {outcome.get('exc_type')} as expected"
    if want == "warned":
        for w in outcome.get("warnings", []):
            names = w.get("names") or [w.get("category")]
            if expect.get("warning") and expect["warning"] not in names:
                continue
            if pattern and not re.search(pattern, w.get("message") or "", re.DOTALL):
                continue
            return True, f"warned {w.get('category')} as expected"
        return False, f"no {expect.get('warning') or 'warning'} matching /{pattern or ''}/"
    return True, f"{got} as expected"


def verdict(broken: dict, fixed: dict) -> tuple[str, str]:
    """An entry's status from its two outcomes: pass, fail or skipped (never skipped as passed)."""
    failed = [(part, o) for part, o in (("broken", broken), ("fixed", fixed)) if o.get("expected") is False]
    if failed:
        return "fail", "; ".join(f"{part}: {o.get('reason')}" for part, o in failed)
    if broken.get("expected") is None:
        return "skipped", broken.get("reason") or "skipped"
    return "pass", "broken and fixed behaved as declared"
