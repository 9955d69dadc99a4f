"""Watch one run: stream its output, wait for its result, its death, the deadline or a cancel,
and say what happened in the run contract's terms (DESIGN.md: OUTCOME)."""

from __future__ import annotations

import select
import signal
import socket
import threading
import time
from typing import TypedDict

from .capture import Capture
from .contracts import Limits, Outcome, blank
from .forkserver_client import ChildHandle

_SIGNAL_WORDS: dict[int, str] = {
    signal.SIGSEGV: " (segmentation fault)",
    signal.SIGABRT: " (abort)",
    signal.SIGBUS: " (bus error)",
    signal.SIGFPE: " (arithmetic fault)",
    signal.SIGILL: " (illegal instruction)",
}
CHANNEL_CLOSED = 121  # the child's exit code when the snippet closed its result channel


def collect(
    child: ChildHandle,
    cap: Capture,
    limits: Limits,
    *,
    start: float,
    cancel: threading.Event | None = None,
    timeout_s: float | None = None,
) -> Outcome:
    """Block until the run is over; return its raw outcome (before judging)."""
    timeout_s = limits.timeout_s if timeout_s is None else timeout_s
    deadline = time.monotonic() + timeout_s
    result: Outcome | None = None
    stop: str | None = None  # why we stopped waiting: "timeout", "cancelled" or "channel"
    broken = ""  # with stop == "channel": what was wrong with what came on the result channel
    grace: float | None = None
    while True:
        now = time.monotonic()
        finished = result is not None or (child.reader.eof and child.ended)
        if finished:
            if cap.done:
                break
            if grace is None:  # leftovers of the snippet still hold the output pipes: kill, then drain
                child.kill()
                grace = now + 0.3
            elif now > grace:
                break
        elif now >= deadline:
            stop = "timeout"
            break
        elif cancel is not None and cancel.is_set():
            stop = "cancelled"
            break
        waits: list[int | socket.socket] = [*cap.open_fds()]
        if result is None and not child.reader.eof:
            waits.append(child.sock)
        if not child.ended:
            waits.append(child.status_fd)  # its end comes on its own pipe: no polling for it
        poll = deadline - now
        if cancel is not None or finished:
            poll = min(poll, 0.02)  # `cancel` is an event, not a descriptor; `finished`: the grace
        if not waits:
            time.sleep(max(0.0, poll))
            continue
        ready, _, _ = select.select(waits, [], [], max(0.0, poll))
        for fd in ready:
            if isinstance(fd, socket.socket):  # the child's socket: the only one waited on
                try:
                    for msg, fds in child.reader.feed():
                        got = child.handle(msg, fds)
                        if got is not None:
                            result = got
                except ValueError as exc:  # the snippet wrote on the result channel itself
                    stop, broken = "channel", str(exc)
                    break
            elif fd == child.status_fd:
                child.read_status()
            else:
                cap.read(fd)
        if stop == "channel":
            break
    wall_ms = round((time.perf_counter() - start) * 1000, 2)
    if stop is not None:
        child.kill()
        cap.drain(0.3)
    if result is not None:
        result["wall_ms"] = wall_ms
        return result
    if stop == "timeout":
        return blank(
            "timeout",
            f"wall-clock limit of {timeout_s:g}s exceeded; the process group was killed",
            duration_ms=wall_ms,
            wall_ms=wall_ms,
        )
    if stop == "cancelled":
        return blank("crashed", "cancelled", duration_ms=wall_ms, wall_ms=wall_ms)
    if stop == "channel":
        return blank(
            "crashed",
            f"the snippet wrote on the sandbox's result channel: {broken}",
            duration_ms=wall_ms,
            wall_ms=wall_ms,
        )
    child.wait_ended(2)
    return died(child, limits, wall_ms)


class _EndFacts(TypedDict):
    """What every outcome of a run that ended without a result says about its end."""

    duration_ms: float
    wall_ms: float
    signal: str | None
    exit_code: int | None


def died(child: ChildHandle, limits: Limits, wall_ms: float) -> Outcome:
    """The process ended without a result: say how (memory, CPU time, signal, exit code)."""
    status = child.status
    sig, code = (status["signal"], status["code"]) if status else (None, None)
    name: str | None = None
    if sig:
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
    extra: _EndFacts = {"duration_ms": wall_ms, "wall_ms": wall_ms, "signal": name, "exit_code": code}
    if sig == signal.SIGKILL and child.cgroup and child.cgroup.oom_kills():
        return blank(
            "crashed",
            f"killed for memory: over the {limits.memory_mb} MB limit (cgroup OOM kill)",
            killed_for_memory=True,
            **extra,
        )
    if sig == signal.SIGXCPU:
        return blank("timeout", f"CPU time limit of {limits.cpu_s:g}s exceeded (SIGXCPU)", **extra)
    if sig:
        return blank("crashed", f"killed by signal {name}{_SIGNAL_WORDS.get(sig, '')}", **extra)
    if code == CHANNEL_CLOSED and child.kind != "cold":
        return blank("crashed", "the snippet closed the sandbox's result channel", **extra)
    if child.error:  # our own code failed in the child (warm-up, cgroup join): say so, not "exit code 70"
        last = child.error.strip().splitlines()[-1] if child.error.strip() else "unknown error"
        return blank(
            "crashed",
            f"the sandbox process failed before the snippet ran: {last}",
            sandbox_error=child.error[-4000:],
            **extra,
        )
    if code is not None:
        return blank("crashed", f"exit code {code}", **extra)
    return blank("crashed", "the sandbox process ended without a result (exit status unknown)", **extra)
