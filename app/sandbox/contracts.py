"""The sandbox's contracts, in one place: what a job is, the limits it runs under, what comes back
(DESIGN.md "Contracts": OUTCOME), and how an outcome is judged. Standard library only.

Every default lives here once: `app/config.py` takes the server's per-snippet limits and the local
workers' sizes from `Limits()` and `WORKER_CONCURRENCY`/`WORKER_SPARE`; the pool, the agent,
`pitfalls verify` and the server build jobs with `make_job` and outcomes with `blank`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict, Unpack, cast

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
    limits: dict[str, Any]  # requests (JSON from the server), clamped to the worker's `Limits`


class LimitValues(TypedDict):
    """`Limits` as JSON: what a job message carries to the child and an outcome reports."""

    timeout_s: float
    cpu_s: float
    memory_mb: int
    gpu_memory_fraction: float
    max_procs: int
    max_output_bytes: int
    max_file_mb: int
    network: bool
    cold_start_s: float


class Protection(TypedDict):
    """Whether this host enforces one limit or protection, and the evidence (`pitfalls doctor`)."""

    enforced: bool
    how: str


class Warning_(TypedDict, total=False):
    category: str
    names: list[str]
    message: str
    line: int | None


class OutcomeFields(TypedDict, total=False):
    """An OUTCOME's fields but its name and reason (the keyword arguments `blank` takes)."""

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
    # facts the child, the collector and the pool add (the server keeps them; nothing judges them)
    cuda_poisoned: bool  # the snippet left the CUDA context dead
    wall_ms: float  # from handing the job over to the outcome
    slot_ms: float  # from getting a pool slot to the outcome (no queueing)
    sandbox_pid: int
    fresh_process: bool
    limits: LimitValues  # the limits the run had, after clamping
    limit_notes: list[str]  # what clamping changed
    dropped_bytes: int  # output past the cap
    signal: str | None  # a run that ended without a result: how
    exit_code: int | None
    killed_for_memory: bool
    sandbox_error: str  # our own code failed in the child (its traceback)


class Outcome(OutcomeFields, total=False):
    """What one run did (DESIGN.md OUTCOME): its name, why, and the fields of `OutcomeFields`.

    Every field is optional to the type (a run that never started carries few of them); the wire
    format is this dict as JSON.
    """

    outcome: OutcomeName
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


def blank(outcome: OutcomeName, reason: str, **extra: Unpack[OutcomeFields]) -> Outcome:
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


def _text_or_none(value: object) -> bool:
    return value is None or isinstance(value, str)


def _texts(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def as_outcome(obj: object) -> Outcome:
    """A result from a sandbox child, checked before anything reads it; ValueError if malformed.

    The snippet runs in the process that reports its result, so it can write on the result channel
    (or over a cold child's result file) itself: a forged result must become a crashed run, not an
    exception in the judging code. Checked: the fields `judge`, `finish` and the pool read.
    """
    if not isinstance(obj, dict):
        raise ValueError(f"a result that is not a JSON object: {type(obj).__name__}")
    if obj.get("outcome") not in OUTCOMES:
        raise ValueError(f"a result with no known outcome: {str(obj.get('outcome'))[:100]!r}")
    for key in ("exc_type", "message", "traceback", "reason", "device", "torch_version"):
        if not _text_or_none(obj.get(key)):
            raise ValueError(f"a result whose {key} is not text")
    if not _texts(obj.get("exc_names", [])):
        raise ValueError("a result whose exc_names is not a list of names")
    warnings = obj.get("warnings", [])
    if not isinstance(warnings, list) or not all(
        isinstance(w, dict)
        and isinstance(w.get("category", ""), str)
        and isinstance(w.get("message", ""), str)
        and _texts(w.get("names", []))
        for w in warnings
    ):
        raise ValueError("a result whose warnings are not a list of warnings")
    return cast(Outcome, obj)  # checked above, field by field


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

    def clamp(self, requested: Mapping[str, Any] | None) -> tuple[Limits, list[str]]:
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

    def as_dict(self) -> LimitValues:
        return {
            "timeout_s": self.timeout_s,
            "cpu_s": self.cpu_s,
            "memory_mb": self.memory_mb,
            "gpu_memory_fraction": self.gpu_memory_fraction,
            "max_procs": self.max_procs,
            "max_output_bytes": self.max_output_bytes,
            "max_file_mb": self.max_file_mb,
            "network": self.network,
            "cold_start_s": self.cold_start_s,
        }


def judge(outcome: Outcome, expect: Expect | None) -> tuple[bool | None, str]:
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
        exc_names: Sequence[str | None] = outcome.get("exc_names") or [outcome.get("exc_type")]
        if expect.get("exc_type") and expect["exc_type"] not in exc_names:
            return False, f"expected {expect['exc_type']}, got {outcome.get('exc_type')}"
        if pattern and not re.search(pattern, outcome.get("message") or "", re.DOTALL):
            return False, f"message does not match /{pattern}/: {(outcome.get('message') or '')[:300]}"
        return True, f"raised {outcome.get('exc_type')} as expected"
    if want == "warned":
        for w in outcome.get("warnings", []):
            warning_names: Sequence[str | None] = w.get("names") or [w.get("category")]
            if expect.get("warning") and expect["warning"] not in warning_names:
                continue
            if pattern and not re.search(pattern, w.get("message") or "", re.DOTALL):
                continue
            return True, f"warned {w.get('category')} as expected"
        return False, f"no {expect.get('warning') or 'warning'} matching /{pattern or ''}/"
    return True, f"{got} as expected"


# torch.multiprocessing's ProcessExitedException ("process 1 terminated with signal SIGABRT"), and a
# DataLoader's ("DataLoader worker (pid 18362) is killed by signal: Segmentation fault."), which its
# SIGCHLD handler can raise after the snippet, in the sandbox's own code
_PROCESS_KILLED = re.compile(
    r"process \d+ terminated with signal \w+|DataLoader worker \(pid(?:\(s\))? [\d, ]+\) is killed by signal: [\w ]+"
)


def ran_out_of_time(o: Outcome) -> str | None:
    """Why a run that should have finished was killed at the wall-clock limit: on a loaded machine a
    multi-process snippet's rendezvous (gloo's store, a free port taken between probe and bind) can
    stall past it once. None for every other outcome, and for an entry that expects the timeout."""
    if o.get("expected") is not False or o.get("outcome") != "timeout":
        return None
    return str(o.get("reason") or "timed out")


def died_by_signal(o: Outcome) -> str | None:
    """How a run that did not do what it should died, when a signal killed one of its processes:
    a multi-process snippet can lose a teardown race (gloo aborting while a peer closes its socket,
    a DataLoader's SIGCHLD handler raising outside the snippet) that says nothing about the entry.
    None for every other outcome."""
    if o.get("expected") is not False:
        return None
    if o.get("signal"):
        return f"killed by {o['signal']}"
    said = (str(o.get(k) or "") for k in ("message", "traceback", "reason"))
    found = _PROCESS_KILLED.search("\n".join(said))
    return found.group(0) if found else None


def verdict(broken: Outcome, fixed: Outcome) -> tuple[str, str]:
    """An entry's status from its two outcomes: pass, fail or skipped (never skipped as passed)."""
    failed = [(part, o) for part, o in (("broken", broken), ("fixed", fixed)) if o.get("expected") is False]
    if failed:
        return "fail", "; ".join(f"{part}: {o.get('reason')}" for part, o in failed)
    if broken.get("expected") is None:
        return "skipped", broken.get("reason") or "skipped"
    return "pass", "broken and fixed behaved as declared"
