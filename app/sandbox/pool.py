"""A warm pool of single-use sandbox processes (issue 3; DESIGN.md "Reproduce").

    pool = Pool(size=2, spare=2, limits=Limits(timeout_s=10))
    outcome = pool.run({"code": "...", "expect": {...}, "check": None, "requires": {},
                        "fresh_process": False, "limits": {}})
    pool.close()

Shape, after the Go playground's sandboxes started ahead of demand:
- a fork server (`forkserver.py`, started with a clean exec) imports torch once and forks;
- `spare` children are forked ahead of time; each joins its own cgroup and network namespace,
  warms itself up (thread pools; CUDA context and cuBLAS/cuDNN handles on a GPU) and waits on a
  socket for ONE job. A run hands the job over, collects the outcome, and the child dies; a
  background thread forks its replacement. A burst beyond the spares forks children on demand.
- `fresh_process` jobs get a cold `python -m app.sandbox.execute` child from the same server.
- at most `size` runs at once; `queue_limit` bounds how many may wait (beyond: `PoolFull`).
This module never imports torch: the caller can be any process.
"""

from __future__ import annotations

import atexit
import collections
import json
import logging
import os
import queue
import re
import select
import shutil
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from typing import TypedDict

from . import wire
from .capture import Capture
from .cgroups import Cgroup, CgroupManager
from .collect import collect
from .contracts import Job, Limits, LimitValues, Outcome, Protection, as_outcome, blank
from .execute import finish
from .forkserver_client import ChildHandle, ForkServerClient
from .requirements import unmet

__all__ = ["Limits", "Pool", "PoolClosed", "PoolFull"]

log = logging.getLogger("pitfalls.sandbox")


_WORKDIR_PREFIX = "pitfalls-run-"


def _sweep_workdirs() -> None:
    """Remove run directories left by pools whose process died without cleaning up."""
    tmp = tempfile.gettempdir()
    for name in os.listdir(tmp):
        m = re.fullmatch(rf"{_WORKDIR_PREFIX}(\d+)-\w+", name)
        if m:
            try:
                os.kill(int(m.group(1)), 0)
            except ProcessLookupError:
                shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)
            except OSError:
                pass


def _close_at_exit(ref: weakref.ref[Pool]) -> None:
    pool = ref()
    if pool is not None:
        pool.close()


def _not_ready(child: ChildHandle, timeout: float) -> str:
    """Why a child never said ready, when it sent no error of its own."""
    if child.reader.eof:
        return "the child exited before it was ready (killed, or crashed while importing torch)"
    return f"no ready message within {timeout:g} s"


class PoolFull(RuntimeError):
    """The run queue is full: try again later (HTTP 429/503 with Retry-After)."""


class PoolClosed(RuntimeError):
    """The pool was closed."""


class PoolInfo(TypedDict):
    """What `Pool.info` reports (`pitfalls doctor`, the agent's worker facts)."""

    device: str
    torch_version: str | None
    gpus: int
    python: str | None
    size: int
    spare: int
    limits: LimitValues
    limits_enforced: dict[str, Protection]


class Pool:
    """Runs snippets in warm, isolated, single-use processes. Thread-safe; `size` runs at once."""

    def __init__(
        self,
        size: int = 2,
        spare: int = 2,
        limits: Limits | None = None,
        *,
        queue_limit: int | None = None,
        cgroups: bool = True,
        python: str | None = None,
    ):
        self.size, self.spare = max(1, size), max(0, spare)
        self.limits = limits or Limits()
        self.queue_limit = queue_limit
        self._server = ForkServerClient(python or sys.executable)
        self._cg = CgroupManager(enable=cgroups)
        self._slots = threading.BoundedSemaphore(self.size)
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._ready: collections.deque[ChildHandle] = collections.deque()
        self._warming = 0
        self._waiting = 0
        self._device: str | None = None
        self._network: tuple[bool, str] | None = None
        self._warm_error: str | None = None  # the last reason a spare failed to warm up
        self._closed = False
        self._started = False
        self._threads: list[threading.Thread] = []
        # work for the cleaner thread; None stops it
        self._cleanup: queue.SimpleQueue[Callable[[], object] | None] = queue.SimpleQueue()

    # ---------------------------------------------------------------- lifecycle
    def start(self, *, wait: bool = True, timeout: float = 180) -> Pool:
        """Start the fork server and the spare children; with `wait`, until the spares are warm."""
        with self._lock:
            if self._closed:
                raise PoolClosed("pool is closed")
            self._server.ensure()
            if not self._started:
                self._started = True
                self._cleanup.put(_sweep_workdirs)
                atexit.register(_close_at_exit, weakref.ref(self))  # cgroups and run dirs go too
                self._thread(self._cleaner, "pitfalls-pool-cleanup")
                self._add_replenishers()
        if wait:
            self.wait_ready(timeout=timeout)
        return self

    def _add_replenishers(self) -> None:
        running = sum(t.name.startswith("pitfalls-pool-spare") and t.is_alive() for t in self._threads)
        for i in range(running, min(self.spare, 2)):  # two warm in parallel at most: they compete for CPU
            self._thread(self._replenish, f"pitfalls-pool-spare-{i}")

    def set_spare(self, spare: int) -> None:
        """Change how many warmed children are kept waiting (extra ones are retired)."""
        with self._cond:
            self.spare = max(0, spare)
            extra = [self._ready.pop() for _ in range(max(0, len(self._ready) - self.spare))]
            if self._started:
                self._add_replenishers()
            self._cond.notify_all()
        for child in extra:
            child.retire()

    def wait_ready(self, n: int | None = None, timeout: float = 60) -> bool:
        """Block until `n` (default: `spare`) warmed children are waiting for a job."""
        n = self.spare if n is None else n
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self._ready) < n and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self) -> None:
        """Kill every child, stop the fork server, remove cgroups and work directories."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            spares = list(self._ready)
            self._ready.clear()
            self._cond.notify_all()
        for child in spares:
            child.retire()
        self._server.close()
        self._cleanup.put(None)
        for t in self._threads:
            t.join(timeout=10)
        self._run_cleanup(block=False)  # whatever was queued after the cleaner stopped
        self._cg.close()

    def __enter__(self) -> Pool:  # noqa: PYI034
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _thread(self, target: Callable[[], object], name: str) -> None:
        t = threading.Thread(target=target, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    # ---------------------------------------------------------------- children
    def _new_cgroup(self, limits: Limits) -> Cgroup | None:
        try:
            return self._cg.create(limits.memory_mb, limits.max_procs)
        except OSError:
            return None

    def _fork(self, warm: str, limits: Limits) -> ChildHandle | None:
        """A new single-use child; it warms up on its own and says `ready` on its socket."""
        import socket

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        cgroup = self._new_cgroup(limits)
        # made here, before the fork: the child binds it into its private /tmp, the pool cleans it up
        workdir = tempfile.mkdtemp(prefix=f"{_WORKDIR_PREFIX}{os.getpid()}-")
        msg = {
            "op": "fork",
            "warm": warm,
            "network": limits.network,
            "gpu_memory_fraction": limits.gpu_memory_fraction,
            "workdir": workdir,
            "tmp_mb": limits.memory_mb,  # tmpfs pages are charged to the run's memory cgroup too
        }
        child: ChildHandle | None = None
        try:
            child = self._server.start_child(msg, [theirs.fileno()], sock=ours, cgroup=cgroup, kind=warm)
        finally:  # also when the request fails (the fork server gone as the pool closes)
            theirs.close()
            if child is None:
                ours.close()
                shutil.rmtree(workdir, ignore_errors=True)
                if cgroup:
                    self._cleanup.put(cgroup.remove)
        if child is not None:
            child.workdir = workdir
        return child

    def _await_ready(self, child: ChildHandle, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while child.ready_info is None:
            left = deadline - time.monotonic()
            if left <= 0 or child.reader.eof:
                return False
            if select.select([child.sock], [], [], left)[0]:
                for msg, fds in child.reader.feed():
                    child.handle(msg, fds)
        self._note(child)
        return True

    def _note(self, child: ChildHandle) -> None:
        info = child.ready_info
        if info:
            self._device = info.get("device")
            self._network = (bool(info.get("network")), str(info.get("network_how")))

    def _replenish(self) -> None:
        """Keep `spare` warmed children waiting; replace each one as soon as it is taken."""
        failures = 0
        while True:
            with self._cond:
                while not self._closed and len(self._ready) + self._warming >= self.spare:
                    self._cond.wait()
                if self._closed:
                    return
                self._warming += 1
            child = None
            try:
                child = self._fork("full", self.limits)
                if child is not None and not self._await_ready(child, timeout=120):
                    if not self._closed:  # close() kills a spare mid warm-up: not a failure
                        self._warm_failed(child.error or _not_ready(child, 120))
                    child.retire()
                    child = None
            except Exception:  # noqa: BLE001 - never let the replenisher die; back off and retry
                log.exception("could not fork a spare sandbox child; retrying in 0.5 s")
                if child is not None:  # forked, then failed warming up: free its socket and folder
                    child.retire()
                child = None
            finally:
                with self._cond:
                    self._warming -= 1
                    keep = False
                    if child is not None and not self._closed:
                        self._ready.append(child)
                        keep = True
                    self._cond.notify_all()
                if child is not None and not keep:
                    child.retire()
            if child is None:
                failures += 1  # back off: a child that cannot warm up now will not in 0.5 s either
                with self._cond:  # close() wakes us
                    self._cond.wait_for(
                        lambda: self._closed, timeout=min(30.0, 0.5 * 2 ** min(failures - 1, 6))
                    )
            else:
                failures = 0
                with self._lock:  # (as _warm_failed sets it)
                    self._warm_error = None

    def _warm_failed(self, error: str) -> None:
        """Say why a spare could not warm up (CUDA broken in a confined child, a bad setting), once
        per distinct reason: retrying in silence left a GPU pool that never became ready."""
        reason = (error.strip().splitlines() or ["?"])[-1]
        with self._lock:
            new, self._warm_error = reason != self._warm_error, reason
        if new:
            log.warning("a sandbox child failed to warm up; retrying with back-off:\n%s", error.strip())

    def _take(self, limits: Limits) -> ChildHandle:
        """A warmed spare if one is waiting, else a child forked now (warm-up on the run's clock)."""
        if not self._started:
            self.start(wait=False)
        child = None
        with self._cond:
            # a spare was confined with the pool's network setting; a job without network in a pool
            # with it needs a child of its own (the namespace is made before privileges are dropped)
            while self._ready and child is None and limits.network == self.limits.network:
                c = self._ready.popleft()
                if c.ended or c.reader.eof:  # died while idle (its fork server too, maybe)
                    self._cleanup.put(c.retire)
                else:
                    child = c
            self._cond.notify_all()  # the replenisher forks a replacement
        if child is None:
            child = self._fork("light", limits)
            if child is None:
                raise RuntimeError("could not fork a sandbox child")
        if child.cgroup:
            child.cgroup.set_limits(limits.memory_mb, limits.max_procs)
        return child

    # ---------------------------------------------------------------- runs
    def run(self, job: Job, *, cancel: threading.Event | None = None) -> Outcome:
        """Run one job; block until its OUTCOME (DESIGN.md run contract). Thread-safe.

        `cancel` (optional): set it to kill the run (outcome `crashed`, reason "cancelled").
        Raises PoolFull when `queue_limit` runs are already waiting, PoolClosed after close().
        """
        limits, notes = self.limits.clamp(job.get("limits"))
        requires = job.get("requires") or {}
        why = unmet(requires, gpus=self.gpus if (requires.get("cuda") or requires.get("gpus")) else 0)
        if why:
            return self._finish(blank("skipped", why), job, limits, notes, Capture.empty())
        with self._cond:
            if self._closed:
                raise PoolClosed("pool is closed")
            if self.queue_limit is not None and self._waiting >= self.size + self.queue_limit:
                raise PoolFull(f"{self._waiting} runs waiting or running (queue limit {self.queue_limit})")
            self._waiting += 1
        try:
            while not self._slots.acquire(timeout=0.5):
                if self._closed:
                    raise PoolClosed("pool is closed")
            slot_start = time.perf_counter()
            try:
                run = self._run_cold if job.get("fresh_process") else self._run_warm
                raw, cap = run(job, limits, cancel)
                # from getting a slot to the outcome: the run's latency without queueing
                raw["slot_ms"] = round((time.perf_counter() - slot_start) * 1000, 2)
            finally:
                self._slots.release()
        finally:
            with self._cond:
                self._waiting -= 1
        return self._finish(raw, job, limits, notes, cap)

    def _finish(self, raw: Outcome, job: Job, limits: Limits, notes: list[str], cap: Capture) -> Outcome:
        raw["limits"] = limits.as_dict()
        if notes:
            raw["limit_notes"] = notes
        raw.setdefault("device", self._device or "cpu")
        raw.setdefault("torch_version", self._server.hello.get("torch_version"))
        stdout, stderr = cap.text()
        if cap.truncated:
            raw["dropped_bytes"] = cap.dropped_bytes()
        truncated = cap.truncated or bool(raw.pop("truncated", False))
        return finish(
            raw,
            stdout=stdout,
            stderr=stderr,
            truncated=truncated,
            check=job.get("check"),
            expect=job.get("expect"),
        )

    def _run_warm(self, job: Job, limits: Limits, cancel: threading.Event | None) -> tuple[Outcome, Capture]:
        for _attempt in range(3):  # a spare that died while idle: take another
            child = self._take(limits)
            workdir = child.workdir
            cap = Capture(limits.max_output_bytes)
            out_w, err_w = cap.writers()
            msg = {"op": "job", "code": job["code"], "workdir": workdir, "limits": limits.as_dict()}
            start = time.perf_counter()
            try:
                wire.send(child.sock, msg, [out_w, err_w])
            except OSError:
                cap.close()
                self._cleanup.put(child.retire)
                continue
            finally:
                os.close(out_w)
                os.close(err_w)
            try:
                raw = collect(child, cap, limits, start=start, cancel=cancel)
                raw["sandbox_pid"] = child.pid
                self._note(child)
            finally:
                cap.close()
                self._cleanup.put(child.retire)
            return raw, cap
        raise RuntimeError("no sandbox child would take the job")

    def _run_cold(self, job: Job, limits: Limits, cancel: threading.Event | None) -> tuple[Outcome, Capture]:
        """`fresh_process`: a cold `python -m app.sandbox.execute` child; same limits but GPU memory."""
        if not self._started:
            self.start(wait=False)
        workdir = tempfile.mkdtemp(prefix=f"{_WORKDIR_PREFIX}{os.getpid()}-")
        jobfile, resfile = os.path.join(workdir, ".job.json"), os.path.join(workdir, ".result.json")
        with open(jobfile, "w") as fh:
            json.dump({"code": job["code"], "workdir": workdir}, fh)
        cap = Capture(limits.max_output_bytes)
        out_w, err_w = cap.writers()
        cgroup = self._new_cgroup(limits)
        msg = {
            "op": "spawn",
            "args": ["-m", "app.sandbox.execute", jobfile, resfile],
            "cwd": workdir,
            "env": {"TMPDIR": workdir, "HOME": workdir},
            "network": limits.network,
            "tmp_mb": limits.memory_mb,
            "cpu_s": limits.cpu_s + limits.cold_start_s,
            "max_file_mb": limits.max_file_mb,
        }
        start = time.perf_counter()
        try:
            child = self._server.start_child(msg, [out_w, err_w], sock=None, cgroup=cgroup, kind="cold")
        finally:
            os.close(out_w)
            os.close(err_w)
        if child is None:
            cap.close()
            shutil.rmtree(workdir, ignore_errors=True)
            return blank("crashed", "could not start a process"), cap
        try:
            raw = collect(
                child,
                cap,
                limits,
                start=start,
                cancel=cancel,
                timeout_s=limits.timeout_s + limits.cold_start_s,
            )
            if raw.get("exit_code") == 0 and os.path.exists(resfile):
                try:
                    with open(resfile) as fh:
                        done = as_outcome(json.load(fh))
                except ValueError as exc:  # the snippet wrote over its result file (JSON errors too)
                    raw["reason"] = f"the run's result file is malformed: {exc}"
                else:
                    done["wall_ms"] = raw["wall_ms"]
                    raw = done
            raw.update({"sandbox_pid": child.pid, "fresh_process": True})
        finally:
            cap.close()
            child.workdir = workdir
            self._cleanup.put(child.retire)
        return raw, cap

    # ---------------------------------------------------------------- facts
    @property
    def gpus(self) -> int:
        """CUDA devices visible to the fork server (NVML count: CUDA stays uninitialised there)."""
        if not self._server.hello:
            self._server.ensure()
        return int(self._server.hello.get("gpus") or 0)

    def info(self, timeout: float = 120) -> PoolInfo:
        """Device, torch version, GPUs and which limits this host actually enforces."""
        if not self._started:
            self.start(wait=False)
        if self._device is None:  # no child has reported yet: ask a short-lived one
            child = self._fork("light", self.limits)
            if child is not None:
                if not self._await_ready(child, timeout):
                    self._warm_failed(child.error or _not_ready(child, timeout))
                self._cleanup.put(child.retire)
        net = self._network or (False, "unknown: no child reported")
        gpus = self.gpus
        enforced: dict[str, Protection] = {
            "timeout": {"enforced": True, "how": "wall clock; SIGKILL to the process group and its cgroup"},
            "cpu": {"enforced": True, "how": "RLIMIT_CPU per run (SIGXCPU)"},
            **self._cg.enforced(),
            "output": {"enforced": True, "how": "captured at the fd level, capped while streaming"},
            "file_size": {"enforced": True, "how": "RLIMIT_FSIZE (writes past it fail with EFBIG)"},
            "gpu_memory": {
                "enforced": bool(gpus),
                "how": (
                    "torch.cuda.set_per_process_memory_fraction in each warm child (torch's caching allocator "
                    "only; not for fresh_process jobs)"
                    if gpus
                    else "no GPU"
                ),
            },
            "network": {
                "enforced": bool(net[0]) and not self.limits.network,
                "how": "allowed by the pool's limits" if self.limits.network else net[1],
            },
        }
        # a child that cannot warm up is no CPU device: say so where workers and `doctor` show it
        failed = (
            f"none: sandbox children fail to warm up ({self._warm_error[:200]})" if self._warm_error else None
        )
        return {
            "device": self._device or failed or "cpu",
            "torch_version": self._server.hello.get("torch_version"),
            "gpus": gpus,
            "python": self._server.hello.get("python"),
            "size": self.size,
            "spare": self.spare,
            "limits": self.limits.as_dict(),
            "limits_enforced": enforced,
        }

    # ---------------------------------------------------------------- cleanup
    def _cleaner(self) -> None:
        """Kill leftovers, remove cgroups and work directories off the runs' critical path."""
        self._run_cleanup(block=True)

    def _run_cleanup(self, *, block: bool) -> None:
        while True:
            try:
                task = self._cleanup.get(block=block)
            except queue.Empty:
                return
            if task is None:
                return
            try:
                task()
            except Exception:  # noqa: BLE001 - cleanup is best effort; the next close() retries cgroups
                log.exception("sandbox cleanup failed")
