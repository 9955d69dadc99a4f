"""A warm pool of single-use sandbox processes (issue 3; DESIGN.md "Reproduce").

    pool = Pool(size=2, spare=2, limits=Limits(timeout_s=10))
    outcome = pool.run({"code": "...", "expect": {...}, "check": None, "requires": {},
                        "fresh_process": False, "limits": {}})
    pool.close()

Shape, after the Go playground's pre-started sandboxes:
- a fork server (`forkserver.py`, started with a clean exec) imports torch once and forks;
- `spare` children are forked ahead of demand, join their own cgroup and network namespace, warm
  themselves up (thread pools; CUDA context and cuBLAS/cuDNN handles on a GPU) and wait on a
  socket for ONE job; a run hands a job over, collects the outcome, and the child dies; a
  background thread forks the replacement. A burst beyond the spares forks children on demand.
- `fresh_process` jobs get a cold `python -m app.sandbox.execute` child from the same server.
- this module never imports torch: the caller may be any process.
"""

from __future__ import annotations

import collections
import itertools
import os
import queue
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from . import wire
from .capture import Capture
from .cgroups import Cgroup, CgroupManager
from .execute import finish
from .limits import Limits
from .requirements import unmet

__all__ = ["Limits", "Pool", "PoolClosed", "PoolFull"]

_REPO_ROOT = str(Path(__file__).resolve().parents[2])


class PoolFull(RuntimeError):
    """The run queue is full: try again later (HTTP 429/503 with Retry-After)."""


class PoolClosed(RuntimeError):
    """The pool was closed."""


class _Child:
    def __init__(self, pid: int, sock: socket.socket, cgroup: Cgroup | None, warm: str):
        self.pid, self.sock, self.cgroup, self.warm = pid, sock, cgroup, warm
        self.reader = wire.Reader(sock)
        self.error: str | None = None
        self.ready_info: dict | None = None
        self.status: dict | None = None  # from the fork server: {"code"} or {"signal"}
        self.exited = threading.Event()

    def kill(self) -> None:
        """SIGKILL the child's process group and cgroup; close our end."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            pass
        if self.cgroup:
            self.cgroup.kill()


class Pool:
    """Runs snippets in warm, isolated, single-use processes. Thread-safe; `size` runs at once."""

    def __init__(self, size: int = 2, spare: int = 2, limits: Limits | None = None, *,
                 queue_limit: int | None = None, cgroups: bool = True, python: str | None = None):
        self.size, self.spare = max(1, size), max(0, spare)
        self.limits = limits or Limits()
        self.queue_limit = queue_limit
        self.python = python or sys.executable
        self._cg = CgroupManager(enable=cgroups)
        self._slots = threading.BoundedSemaphore(self.size)
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._ready: collections.deque[_Child] = collections.deque()
        self._warming = 0
        self._waiting = 0
        self._children: dict[int, _Child] = {}
        self._early_exits: dict[int, dict] = {}  # exit reported before the child was registered
        self._pending: dict[int, list] = {}
        self._ids = itertools.count(1)
        self._server: subprocess.Popen | None = None
        self._ctl: socket.socket | None = None
        self._ctl_lock = threading.Lock()
        self._hello: dict = {}
        self._device: str | None = None
        self._network: tuple[bool, str] | None = None
        self._closed = False
        self._threads: list[threading.Thread] = []
        self._cleanup: queue.SimpleQueue = queue.SimpleQueue()
        self._started = False

    # ---------------------------------------------------------------- lifecycle
    def start(self, *, wait: bool = True, timeout: float = 180) -> "Pool":
        """Start the fork server and the spare children; with `wait`, until the spares are warm."""
        with self._lock:
            if self._closed:
                raise PoolClosed("pool is closed")
            self._ensure_server()
            if not self._started:
                self._started = True
                self._spawn_thread(self._cleaner, "pitfalls-pool-cleanup")
                for i in range(min(self.spare, 2)):
                    self._spawn_thread(self._replenish, f"pitfalls-pool-spare-{i}")
        if wait:
            self.wait_ready(timeout=timeout)
        return self

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
            child.kill()
            child.sock.close()
        if self._ctl is not None:
            try:  # wakes our listener; the server kills what it started and exits on EOF
                self._ctl.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._ctl.close()
        if self._server is not None:
            try:
                self._server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._server.kill()
                self._server.wait()
        self._cleanup.put(None)
        for t in self._threads:
            t.join(timeout=10)
        while True:  # what runs queued after the cleaner stopped
            try:
                task = self._cleanup.get_nowait()
            except queue.Empty:
                break
            if task is not None:
                try:
                    task()
                except Exception:
                    pass
        self._cg.close()

    def __enter__(self) -> "Pool":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def _spawn_thread(self, target, name: str) -> None:
        t = threading.Thread(target=target, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    # ---------------------------------------------------------------- fork server
    def _ensure_server(self) -> None:
        """(Re)start the fork server if it is not running. Caller holds `_lock`."""
        if self._server is not None and self._server.poll() is None and self._ctl is not None:
            return
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [_REPO_ROOT, os.environ.get("PYTHONPATH")])),
               "PYTORCH_NVML_BASED_CUDA_CHECK": "1", "CUDA_LAUNCH_BLOCKING": "1"}
        self._server = subprocess.Popen(
            [self.python, "-m", "app.sandbox.forkserver", str(theirs.fileno())],
            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, cwd=tempfile.gettempdir(), env=env)
        theirs.close()
        ours.settimeout(180)
        reader = wire.Reader(ours)
        got = reader.recv()
        ours.settimeout(None)
        if got is None or got[0].get("op") != "hello":
            self._server.kill()
            raise RuntimeError("the sandbox fork server failed to start (see its stderr)")
        self._hello = got[0]
        self._ctl = ours
        self._spawn_thread(lambda: self._listen(ours, reader, self._server), "pitfalls-pool-server")

    def _listen(self, ctl: socket.socket, reader: wire.Reader, server: subprocess.Popen) -> None:
        """Replies and exit statuses from one fork server, until it goes away."""
        while True:
            try:
                got = reader.recv()
            except (OSError, ValueError):
                got = None
            if got is None:
                break
            msg, _fds = got
            if msg.get("op") == "forked":
                with self._lock:
                    slot = self._pending.pop(msg["id"], None)
                if slot is not None:
                    slot[1] = msg
                    slot[0].set()
            elif msg.get("op") == "exit":
                status = {"code": msg.get("code"), "signal": msg.get("signal")}
                with self._lock:
                    child = self._children.pop(msg["pid"], None)
                    if child is None:
                        self._early_exits[msg["pid"]] = status
                if child is not None:
                    child.status = status
                    child.exited.set()
        # The server died (or the pool closed): its children can no longer be reaped or reported.
        with self._cond:
            if self._ctl is ctl:
                self._ctl = None
            orphans = list(self._children.values())
            self._children.clear()
            for slot in self._pending.values():
                slot[0].set()
            self._pending.clear()
            spares = [c for c in self._ready if c in orphans]
            for c in spares:
                self._ready.remove(c)
            self._cond.notify_all()
        for child in orphans:
            child.exited.set()  # status stays None: "unknown"
        for child in spares:
            child.kill()
            child.sock.close()

    def _request(self, msg: dict, fds: list[int]) -> dict:
        """Send a fork/spawn request; return the server's reply ({"pid"} or {"error"})."""
        with self._lock:
            if self._closed:
                raise PoolClosed("pool is closed")
            self._ensure_server()
            ctl = self._ctl
            rid = next(self._ids)
            slot = [threading.Event(), None]
            self._pending[rid] = slot
        try:
            with self._ctl_lock:
                wire.send(ctl, {**msg, "id": rid}, fds)
        except OSError as exc:
            with self._lock:
                self._pending.pop(rid, None)
            return {"error": f"fork server unreachable: {exc}"}
        if not slot[0].wait(60) or slot[1] is None:
            return {"error": "fork server did not answer"}
        return slot[1]

    def _fork(self, warm: str, limits: Limits) -> _Child | None:
        """A new single-use child; it warms up on its own (`ready` arrives on its socket)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        cgroup = self._new_cgroup(limits)
        req = {"op": "fork", "warm": warm, "network": limits.network,
               "gpu_memory_fraction": limits.gpu_memory_fraction,
               "cgroup": cgroup.procs_files if cgroup else []}
        try:
            reply = self._request(req, [theirs.fileno()])
        finally:
            theirs.close()
        if "pid" not in reply:
            ours.close()
            if cgroup:
                self._cleanup.put(cgroup.remove)
            return None
        child = _Child(reply["pid"], ours, cgroup, warm)
        self._register(child)
        return child

    def _register(self, child: _Child) -> None:
        with self._lock:
            status = self._early_exits.pop(child.pid, None)
            if status is None and self._ctl is not None:
                self._children[child.pid] = child
                return
        child.status = status
        child.exited.set()

    def _new_cgroup(self, limits: Limits) -> Cgroup | None:
        try:
            return self._cg.create(limits.memory_mb, limits.max_procs)
        except OSError:
            return None

    # ---------------------------------------------------------------- spares
    def _replenish(self) -> None:
        """Keep `spare` warmed children waiting; replace each one as soon as it is taken."""
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
                    self._retire(child)
                    child = None
            except PoolClosed:
                return
            except Exception:  # never let the replenisher die; back off and retry
                child = None
            finally:
                with self._cond:
                    self._warming -= 1
                    if child is not None and not self._closed:
                        self._ready.append(child)
                    elif child is not None:
                        self._retire(child)
                    self._cond.notify_all()
            if child is None:
                time.sleep(0.5)

    def _await_ready(self, child: _Child, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while child.ready_info is None:
            left = deadline - time.monotonic()
            if left <= 0 or child.reader.eof:
                return False
            r, _, _ = select.select([child.sock], [], [], left)
            if r:
                for msg, fds in child.reader.feed():
                    self._on_child_message(child, msg, fds)
        return True

    def _on_child_message(self, child: _Child, msg: dict, fds: list[int]) -> dict | None:
        for fd in fds:
            os.close(fd)
        if msg.get("op") == "ready":
            child.ready_info = msg
            with self._lock:
                self._device = msg.get("device")
                self._network = (msg.get("network"), msg.get("network_how"))
        elif msg.get("op") == "result":
            return msg["result"]
        elif msg.get("op") == "error":
            child.ready_info = None
            child.error = msg.get("error")
        return None

    def _retire(self, child: _Child) -> None:
        child.kill()
        child.sock.close()
        if child.cgroup:
            self._cleanup.put(child.cgroup.remove)

    def _take(self, limits: Limits) -> _Child:
        """A warmed spare if one is waiting, else a child forked now."""
        if not self._started:
            self.start(wait=False)
        with self._cond:
            while self._ready:
                child = self._ready.popleft()
                if not child.exited.is_set() and not child.reader.eof:
                    self._cond.notify_all()  # the replenisher forks a replacement
                    break
                self._cleanup.put(lambda c=child: self._retire(c))
            else:
                child = None
        if child is None:
            child = self._fork("light", limits)
            if child is None:
                raise RuntimeError("could not fork a sandbox child")
        if child.cgroup:
            child.cgroup.set_limits(limits.memory_mb, limits.max_procs)
        return child

    # ---------------------------------------------------------------- runs
    def run(self, job: dict, *, cancel: threading.Event | None = None) -> dict:
        """Run one job; block until its OUTCOME (DESIGN.md run contract). Thread-safe."""
        limits, notes = self.limits.clamp(job.get("limits"))
        requires = job.get("requires") or {}
        why = unmet(requires, gpus=self.gpus if (requires.get("cuda") or requires.get("gpus")) else 0)
        if why:
            raw = self._blank("skipped", why)
            return self._finish(raw, job, limits, notes, Capture.empty())
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
            try:
                if job.get("fresh_process"):
                    raw, cap = self._run_cold(job, limits, cancel)
                else:
                    raw, cap = self._run_warm(job, limits, cancel)
            finally:
                self._slots.release()
        finally:
            with self._cond:
                self._waiting -= 1
        return self._finish(raw, job, limits, notes, cap)

    def _finish(self, raw: dict, job: dict, limits: Limits, notes: list[str], cap: Capture) -> dict:
        raw["limits"] = limits.as_dict()
        if notes:
            raw["limit_notes"] = notes
        raw.setdefault("device", self._device or "cpu")
        raw.setdefault("torch_version", self._hello.get("torch_version"))
        stdout, stderr = cap.text()
        if cap.truncated:
            raw["dropped_bytes"] = cap.dropped_bytes()
        return finish(raw, stdout=stdout, stderr=stderr, truncated=cap.truncated or bool(raw.pop("truncated", False)),
                      check=job.get("check"), expect=job.get("expect"))

    def _blank(self, outcome: str, reason: str, **extra) -> dict:
        return {"outcome": outcome, "exc_type": None, "exc_names": [], "message": None, "traceback": None,
                "warnings": [], "reason": reason, "duration_ms": 0.0, **extra}

    def _run_warm(self, job: dict, limits: Limits, cancel: threading.Event | None) -> tuple[dict, Capture]:
        for _attempt in range(3):  # a spare that died while idle: take another
            child = self._take(limits)
            workdir = tempfile.mkdtemp(prefix="pitfalls-run-")
            cap = Capture(limits.max_output_bytes)
            out_w, err_w = cap.writers()
            msg = {"op": "job", "code": job["code"], "workdir": workdir, "limits": limits.as_dict()}
            start = time.perf_counter()
            try:
                wire.send(child.sock, msg, [out_w, err_w])
            except OSError:
                cap.close()
                self._cleanup.put(lambda c=child, w=workdir: (self._retire(c), shutil.rmtree(w, True)))
                continue
            finally:
                os.close(out_w)
                os.close(err_w)
            try:
                raw = self._collect(child, cap, limits, start, cancel)
            finally:
                self._cleanup.put(lambda c=child, w=workdir: (self._retire(c), shutil.rmtree(w, True)))
                cap.close()
            return raw, cap
        raise RuntimeError("no sandbox child would take the job")

    def _collect(self, child: _Child, cap: Capture, limits: Limits, start: float,
                 cancel: threading.Event | None) -> dict:
        """Stream output and wait for the result, the child's death, the deadline or `cancel`."""
        deadline = time.monotonic() + limits.timeout_s
        result = None
        stop = None  # why we stopped waiting for the snippet: timeout / cancelled
        grace = None
        while True:
            now = time.monotonic()
            finished = result is not None or (child.reader.eof and child.exited.is_set())
            if finished:
                if cap.done:
                    break
                if grace is None:  # leftovers of the snippet still hold the output pipes
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
            waits = cap.open_fds()
            if result is None and not child.reader.eof:
                waits.append(child.sock)
            poll = deadline - now
            if cancel is not None or finished or child.reader.eof:
                poll = min(poll, 0.02)  # child.exited / cancel are events, not descriptors
            if not waits:
                time.sleep(max(0.0, poll))
                continue
            ready, _, _ = select.select(waits, [], [], max(0.0, poll))
            for fd in ready:
                if fd is child.sock:
                    for msg, fds in child.reader.feed():
                        got = self._on_child_message(child, msg, fds)
                        if got is not None:
                            result = got
                else:
                    cap.read(fd)
        wall_ms = round((time.perf_counter() - start) * 1000, 2)
        if stop is not None:
            child.kill()
            cap.drain(0.3)
        if result is not None:
            result["wall_ms"] = wall_ms
            return result
        if stop == "timeout":
            return self._blank("timeout", f"wall-clock limit of {limits.timeout_s:g}s exceeded; "
                                          "the process group was killed", duration_ms=wall_ms, wall_ms=wall_ms)
        if stop == "cancelled":
            return self._blank("crashed", "cancelled", duration_ms=wall_ms, wall_ms=wall_ms)
        child.exited.wait(2)
        return self._died(child, limits, wall_ms)

    def _died(self, child: _Child, limits: Limits, wall_ms: float, *, cold: bool = False) -> dict:
        """The process ended without a result: say how (signal, exit code, memory, CPU time)."""
        status = child.status or {}
        sig, code = status.get("signal"), status.get("code")
        oom = child.cgroup.oom_kills() if child.cgroup else 0
        extra = {"duration_ms": wall_ms, "wall_ms": wall_ms, "signal": None, "exit_code": code}
        if sig:
            extra["signal"] = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else sig
        if sig == signal.SIGKILL and oom:
            return self._blank("crashed", f"killed for memory: over the {limits.memory_mb} MB limit "
                                          "(cgroup OOM kill)", killed_for_memory=True, **extra)
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and self._cpu_exhausted(wall_ms, limits)):
            return self._blank("timeout", f"CPU time limit of {limits.cpu_s:g}s exceeded ({extra['signal']})",
                               **extra)
        if sig:
            what = {signal.SIGSEGV: " (segmentation fault)", signal.SIGABRT: " (abort)",
                    signal.SIGBUS: " (bus error)", signal.SIGKILL: "", signal.SIGXFSZ: " (file size limit)"}
            return self._blank("crashed", f"killed by signal {extra['signal']}{what.get(sig, '')}", **extra)
        if code == 121 and not cold:
            return self._blank("crashed", "the snippet closed the sandbox's result channel", **extra)
        if code is not None:
            return self._blank("crashed", f"exit code {code}", **extra)
        return self._blank("crashed", "the sandbox process ended without a result (exit status unknown)", **extra)

    @staticmethod
    def _cpu_exhausted(wall_ms: float, limits: Limits) -> bool:
        return wall_ms / 1000 >= limits.cpu_s  # SIGKILL at the hard RLIMIT_CPU, after SIGXCPU

    def _run_cold(self, job: dict, limits: Limits, cancel: threading.Event | None) -> tuple[dict, Capture]:
        """`fresh_process`: a cold `python -m app.sandbox.execute` child, same limits but GPU memory."""
        import json

        if not self._started:
            self.start(wait=False)
        workdir = tempfile.mkdtemp(prefix="pitfalls-run-")
        jobfile, resfile = os.path.join(workdir, ".job.json"), os.path.join(workdir, ".result.json")
        with open(jobfile, "w") as fh:
            json.dump({"code": job["code"], "workdir": workdir}, fh)
        cap = Capture(limits.max_output_bytes)
        out_w, err_w = cap.writers()
        cgroup = self._new_cgroup(limits)
        req = {"op": "spawn", "args": ["-m", "app.sandbox.execute", jobfile, resfile], "cwd": workdir,
               "env": {"TMPDIR": workdir}, "network": limits.network, "cpu_s": limits.cpu_s + limits.cold_start_s,
               "max_file_mb": limits.max_file_mb, "cgroup": cgroup.procs_files if cgroup else []}
        start = time.perf_counter()
        try:
            reply = self._request(req, [out_w, err_w])
        finally:
            os.close(out_w)
            os.close(err_w)
        if "pid" not in reply:
            cap.close()
            return self._blank("crashed", reply.get("error", "could not start a process")), cap
        dummy = socket.socketpair()[0]  # a cold child has no channel: only its exit tells
        child = _Child(reply["pid"], dummy, cgroup, "cold")
        child.reader.eof = True
        self._register(child)
        try:
            stretched = Limits(**{**limits.as_dict(), "timeout_s": limits.timeout_s + limits.cold_start_s})
            raw = self._collect(child, cap, stretched, start, cancel)
            if raw.get("outcome") == "crashed" and raw.get("exit_code") == 0 and os.path.exists(resfile):
                with open(resfile) as fh:
                    raw = {**json.load(fh), "wall_ms": raw["wall_ms"]}
        finally:
            cap.close()
            dummy.close()
            self._cleanup.put(lambda: (child.kill(), cgroup and cgroup.remove(), shutil.rmtree(workdir, True)))
        return raw, cap

    # ---------------------------------------------------------------- facts
    @property
    def gpus(self) -> int:
        if not self._hello:
            with self._lock:
                self._ensure_server()
        return int(self._hello.get("gpus") or 0)

    def info(self, timeout: float = 120) -> dict:
        """Device, torch version, GPUs and which limits this host actually enforces."""
        if not self._started:
            self.start(wait=False)
        if self._device is None:  # no child has reported yet: ask a short-lived one
            child = self._fork("light", self.limits)
            if child is not None:
                self._await_ready(child, timeout)
                self._retire(child)
        net = self._network or (False, "unknown: no child reported")
        gpus = self.gpus
        enforced = {
            "timeout": {"enforced": True, "how": "wall clock; SIGKILL to the process group and its cgroup"},
            "cpu": {"enforced": True, "how": "RLIMIT_CPU (SIGXCPU, SIGKILL 2 s later)"},
            **self._cg.enforced(),
            "output": {"enforced": True, "how": "captured at the fd level, capped while streaming"},
            "file_size": {"enforced": True, "how": "RLIMIT_FSIZE (writes past it fail with EFBIG)"},
            "gpu_memory": {"enforced": bool(gpus), "how": (
                "torch.cuda.set_per_process_memory_fraction in each warm child (torch's caching "
                "allocator only; not for fresh_process jobs)" if gpus else "no GPU")},
            "network": {"enforced": bool(net[0]) and not self.limits.network,
                        "how": "network allowed by the pool's limits" if self.limits.network else net[1]},
        }
        return {"device": self._device or "cpu", "torch_version": self._hello.get("torch_version"),
                "gpus": gpus, "python": self._hello.get("python"), "size": self.size, "spare": self.spare,
                "limits": self.limits.as_dict(), "limits_enforced": enforced}

    def _cleaner(self) -> None:
        """Kill leftovers, remove cgroups and work directories off the runs' critical path."""
        while True:
            task = self._cleanup.get()
            if task is None:
                return
            try:
                task()
            except Exception:
                pass
