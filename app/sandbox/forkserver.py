"""The fork server: a clean, single-threaded process that imported torch and forks sandbox children.

`python -m app.sandbox.forkserver FD` — FD is a Unix socket to the pool (see `pool.py`).

Why a separate process (DESIGN.md, issue 3): the pool lives in a caller with threads, and forking
a threaded process is unsafe; here nothing runs but this loop. This process imports torch (and
torch._dynamo, slow to import) but never runs a tensor op and never initialises CUDA: after one
parallel op a forked child's first matmul hangs, and `is_available`/`get_device_name`/`cuda.init`
here would break CUDA in every child. `device_count` (NVML) is safe.

Requests (wire.py messages): `fork` (a warm single-use child, given its socket) and `spawn` (a
cold `python -m app.sandbox.execute` child for `fresh_process` jobs, given its stdout/stderr); the
last descriptor of each is the write end of the child's status pipe. Reply: `forked` {id, pid}.
When a child is reaped, {"code", "signal"} is written on its status pipe, which is then closed;
if this process dies, every status pipe reads EOF ("exit status unknown"). The child's own code
is in `child.py`.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
import time
import traceback
import warnings

from . import child, wire


class Server:
    """The loop: fork on request, reap, and write each child's end onto its own status pipe."""

    def __init__(self, ctl: socket.socket, gpus: int):
        self.ctl, self.gpus = ctl, gpus
        self.reader = wire.Reader(ctl)
        self.status: dict[int, int] = {}  # child pid -> write end of its status pipe (the pool reads)
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)

    def serve(self) -> None:
        waits: list[socket.socket | int] = [self.ctl, self.wake_r]
        while True:
            try:
                ready, _, _ = select.select(waits, [], [], 1.0)
            except InterruptedError:
                ready = []
            if self.wake_r in ready:
                try:
                    os.read(self.wake_r, 4096)
                except BlockingIOError:
                    pass
            self.reap()
            if self.ctl in ready:
                msgs = self.reader.feed()
                for i, (msg, fds) in enumerate(msgs):
                    # descriptors meant for *other* children must not leak into this one, or
                    # their sockets would not report EOF when their owner dies
                    others = [fd for _m, f in msgs[i + 1 :] for fd in f] + self.reader.fds
                    self.handle(msg, fds, others)
                if self.reader.eof:
                    return self.shutdown()

    def reap(self) -> None:
        """Report every child's end; kill what its snippet left behind (orphans come to us: we are
        their subreaper), so no daemon outlives its run even where there are no cgroups."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            self.ended(pid, status)
        self.kill_orphans()

    def ended(self, pid: int, status: int) -> None:
        """One child is gone: its status goes on its own pipe, which then closes (the pool's one
        exit channel per child, as in CPython's multiprocessing.forkserver)."""
        fd = self.status.pop(pid, None)
        if fd is None:  # an orphan of a finished run, reaped
            return
        if os.WIFSIGNALED(status):
            event = {"code": None, "signal": os.WTERMSIG(status)}
        else:
            event = {"code": os.waitstatus_to_exitcode(status), "signal": None}
        try:
            os.write(fd, json.dumps(event).encode())  # a few bytes: one atomic pipe write
        except OSError:  # the pool closed its end: nobody is listening any more
            pass
        os.close(fd)

    def kill_orphans(self) -> None:
        for pid in _own_children():
            if pid not in self.status:
                try:
                    os.kill(pid, signal.SIGKILL)  # its own children come to us in turn
                except OSError:
                    pass

    def handle(self, msg: wire.Message, fds: list[int], others: list[int]) -> None:
        op = msg.get("op")
        if op not in ("fork", "spawn") or not fds:
            for fd in fds:
                os.close(fd)
            return
        *fds, status_w = fds  # the last descriptor is the child's status pipe: ours, not the child's
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                inherited = (self.wake_r, self.wake_w, status_w, *self.status.values(), *others)
                child.reset(self.ctl.fileno(), inherited)
                if op == "fork":
                    sock = socket.socket(fileno=fds[0])
                    child.warm_child(sock, msg, self.gpus)
                else:
                    child.spawn_child(msg, fds)
            except BaseException:  # noqa: BLE001
                try:
                    os.write(2, traceback.format_exc().encode())
                    if op == "fork":
                        wire.send(
                            socket.socket(fileno=fds[0]), {"op": "error", "error": traceback.format_exc()}
                        )
                except BaseException:  # noqa: BLE001, S110
                    pass
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
        self.status[pid] = status_w
        self.tell({"op": "forked", "id": msg.get("id"), "pid": pid})

    def tell(self, msg: wire.Message) -> None:
        try:
            wire.send(self.ctl, msg)
        except OSError:  # the pool is gone; serve() sees EOF next and shuts down
            pass

    def shutdown(self) -> None:
        """The pool went away: nothing we started may outlive us, nor what they started."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            live = set(_own_children()) | set(self.status)
            if not live:
                break
            for pid in live:
                for kill in (os.killpg, os.kill):
                    try:
                        kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
            while True:  # reap what died; orphans of the killed come to us and go round again
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    pid = 0
                if pid == 0:
                    break
                self.ended(pid, status)
            time.sleep(0.005)


def _own_children() -> list[int]:
    """Our live children (orphans adopted as subreaper included), from /proc."""
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as fh:
            return [int(p) for p in fh.read().split()]
    except OSError:  # no CONFIG_PROC_CHILDREN: scan every process's parent
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as fh:
                        if int(fh.read().rsplit(")", 1)[1].split()[1]) == me:
                            found.append(int(entry))
                except (OSError, IndexError, ValueError):
                    pass
        return found


def _thread_names() -> list[str]:
    names = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as fh:
                names.append(fh.read().strip())
        except OSError:
            pass
    return names


def main(argv: list[str]) -> int:
    ctl = socket.socket(fileno=int(argv[0]))
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    os.environ.setdefault("CUDA_LAUNCH_BLOCKING", "1")  # tracebacks point at the failing line
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torch
        import torch._dynamo
        import torch.nn.functional

        from . import execute, isolate  # noqa: F401  (children must not pay for these imports)
        from .requirements import gpu_count
    gpus = gpu_count()
    import ctypes

    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: a snippet's daemons come to us
    # torch's import starts OpenBLAS's thread pool (one per core); its fork handler shuts the pool
    # down, so one throwaway fork leaves this process single-threaded for every real fork.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    threads = sorted(_thread_names())
    if len(threads) > 1:  # reported in the hello; Python 3.12 would warn on every fork otherwise
        warnings.simplefilter("ignore", DeprecationWarning)
    wire.send(
        ctl,
        {
            "op": "hello",
            "pid": os.getpid(),
            "torch_version": torch.__version__,
            "gpus": gpus,
            "cuda_initialized": torch.cuda.is_initialized(),  # type: ignore[no-untyped-call]  # unannotated in torch
            "threads": len(threads),
            "thread_names": threads,
            "import_s": round(time.perf_counter() - t0, 2),
            "python": sys.version.split()[0],
        },
    )
    Server(ctl, gpus).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
