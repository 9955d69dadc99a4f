"""The fork server: a clean, single-threaded process that imported torch and forks sandbox children.

`python -m app.sandbox.forkserver FD` — FD is a Unix socket to the pool (see `pool.py`).

Why a separate process (DESIGN.md, issue 3): the pool lives in a caller with threads, and forking
a threaded process is unsafe; here nothing runs but this loop. This process imports torch (and
torch._dynamo, slow to import) but never runs a tensor op and never initialises CUDA: after one
parallel op a forked child's first matmul hangs, and `is_available`/`get_device_name`/`cuda.init`
here would break CUDA in every child. `device_count` (NVML) is safe.

Requests (wire.py messages): `fork` (a warm single-use child, given its socket) and `spawn` (a
cold `python -m app.sandbox.execute` child for `fresh_process` jobs, given its stdout/stderr).
Replies: `forked` {id, pid}; events: `exit` {pid, code, signal} for every child reaped.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import sys
import time
import traceback
import warnings

from . import wire


def _reset_in_child(ctl_fd: int, other_fds: tuple[int, ...]) -> None:
    """First thing in any child: own session/process group, default signals, no server fds."""
    os.setsid()
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for fd in (ctl_fd, *other_fds):
        try:
            os.close(fd)
        except OSError:
            pass


def _devnull_stdio() -> None:
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def _warm(level: str, gpus: int, fraction: float) -> str:
    """Create, in this child, what a snippet would otherwise pay for on its first op."""
    import torch
    import torch.nn.functional as F

    if level == "full":  # a small matmul and conv: thread pool, oneDNN/MKL kernels
        a = torch.ones(32, 32)
        (a @ a).sum().item()
        F.conv2d(torch.ones(1, 3, 8, 8), torch.ones(4, 3, 3, 3)).sum().item()
    if not gpus:
        return "cpu"
    torch.cuda.init()
    for i in range(gpus):
        torch.cuda.set_per_process_memory_fraction(fraction, i)
    if level == "full":  # context + cuBLAS and cuDNN handles
        a = torch.ones(64, 64, device="cuda")
        (a @ a).sum().item()
        F.conv2d(torch.ones(1, 3, 8, 8, device="cuda"), torch.ones(4, 3, 3, 3, device="cuda")).sum().item()
        torch.cuda.synchronize()
    return torch.cuda.get_device_name(0)


def _warm_child(sock: socket.socket, req: dict, gpus: int) -> None:
    """A single-use sandbox: warm up, report ready, wait for ONE job, run it, report, die."""
    from . import isolate

    start = time.perf_counter()
    _devnull_stdio()  # warm-up chatter must not reach the snippet's output
    cgroup = isolate.open_cgroup(req.get("cgroup") or [])  # while we still may open them
    # Before any thread pool starts (user namespaces need a single thread): namespaces, read-only
    # mounts, a private /tmp, an unprivileged uid; warm-up already runs confined.
    confined = isolate.confine(
        network=req.get("network", False), workdir=req.get("workdir"), tmp_mb=req.get("tmp_mb", 1024)
    )
    net = confined["network"]
    fraction = req.get("gpu_memory_fraction", 0.45)
    device = _warm(req.get("warm", "full"), gpus, fraction)
    # Join the run's cgroup after warming up: warm-up memory stays charged where it was (charges do
    # not move with a process), so memory.max bounds what the snippet allocates; and the move
    # (~10 ms on cgroup v1: an RCU grace period) happens before the job, not on its clock.
    isolate.join_cgroup_fds(cgroup)
    reader = wire.Reader(sock)
    wire.send(
        sock,
        {
            "op": "ready",
            "pid": os.getpid(),
            "device": device,
            "network": net[0],
            "network_how": net[1],
            "confinement": confined,
            "warm_ms": round((time.perf_counter() - start) * 1000, 2),
        },
    )
    got = reader.recv()
    if got is None:  # the pool went away or retired this child
        os._exit(0)
    job, fds = got
    _run_job(sock, job, fds, gpus=gpus, fraction=fraction, net=net[0])


def _run_job(
    sock: socket.socket, job: dict, fds: list[int], *, gpus: int, fraction: float, net: bool
) -> None:
    import tempfile

    from . import execute, isolate

    out_w, err_w = fds
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    os.close(out_w)
    os.close(err_w)
    workdir = job["workdir"]
    os.chdir(workdir)
    os.environ["TMPDIR"] = workdir
    os.environ["HOME"] = workdir  # the server's home is not the snippet's (and is read-only to it)
    tempfile.tempdir = workdir
    sys.argv = [os.path.join(workdir, execute.SNIPPET_NAME)]
    sys.path.insert(0, workdir)  # like `python snippet.py`
    limits = job["limits"]
    if not limits.get("network", False) and net is False:
        isolate.no_network()  # a pool that allows network, a job that does not
    if gpus and limits.get("gpu_memory_fraction", fraction) != fraction:
        import torch

        for i in range(gpus):
            torch.cuda.set_per_process_memory_fraction(limits["gpu_memory_fraction"], i)
    isolate.set_run_limits(cpu_s=limits["cpu_s"], max_file_mb=limits["max_file_mb"])
    me = os.getpid()
    result = execute.run_code(job["code"], workdir=workdir)
    if os.getpid() != me:  # a bare os.fork() in the snippet: the copy must not report
        os._exit(0)
    _report(sock, result, cap=limits.get("max_output_bytes", 1 << 20))


# Bound at import: what the child needs after the snippet, in case the snippet patches `os`.
_open, _dup2, _exit, _killpg = os.open, os.dup2, os._exit, os.killpg


def _report(sock: socket.socket, result: dict, *, cap: int) -> None:
    for stream in (sys.__stdout__, sys.__stderr__, sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001, S110 - the snippet may have closed or replaced it
            pass
    null = _open("/dev/null", os.O_WRONLY)
    _dup2(null, 1)  # our ends of the output pipes close now, so the pool sees EOF at once
    _dup2(null, 2)
    for key in ("message", "traceback"):
        if isinstance(result.get(key), str) and len(result[key]) > cap:
            result[key] = result[key][:cap] + "\n[... truncated]"
            result["truncated"] = True
    try:
        wire.send(sock, {"op": "result", "result": result})
    except OSError:  # the snippet closed our channel: nothing left to say
        _exit(121)  # collect.CHANNEL_CLOSED
    _killpg(0, signal.SIGKILL)  # ourselves and anything the snippet left running


def _spawn_child(req: dict, fds: list[int]) -> None:
    """A cold child for `fresh_process` jobs: limits, then exec a fresh interpreter."""
    from . import isolate

    out_w, err_w = fds
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    cgroup = isolate.open_cgroup(req.get("cgroup") or [])
    confined = isolate.confine(network=req.get("network", False), workdir=req["cwd"], tmp_mb=req.get("tmp_mb", 1024))
    isolate.join_cgroup_fds(cgroup)
    for ok, how in confined.values():
        if not ok and "switched off" not in how:
            os.write(2, f"[sandbox] {how}\n".encode())
    isolate.set_run_limits(cpu_s=req["cpu_s"], max_file_mb=req["max_file_mb"])
    os.chdir(req["cwd"])
    os.execve(sys.executable, [sys.executable, *req["args"]], {**os.environ, **req.get("env", {})})


class Server:
    def __init__(self, ctl: socket.socket, gpus: int):
        self.ctl, self.gpus = ctl, gpus
        self.reader = wire.Reader(ctl)
        self.children: set[int] = set()
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)

    def serve(self) -> None:
        while True:
            try:
                ready, _, _ = select.select([self.ctl, self.wake_r], [], [], 1.0)
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
                return
            if pid == 0:
                break
            if pid not in self.children:  # an orphan of a finished run, reaped
                continue
            self.children.discard(pid)
            event = {"op": "exit", "pid": pid, "code": None, "signal": None}
            if os.WIFSIGNALED(status):
                event["signal"] = os.WTERMSIG(status)
            else:
                event["code"] = os.waitstatus_to_exitcode(status)
            self.tell(event)
        self.kill_orphans()

    def kill_orphans(self) -> None:
        for pid in _own_children():
            if pid not in self.children:
                try:
                    os.kill(pid, signal.SIGKILL)  # its own children come to us in turn
                except OSError:
                    pass

    def handle(self, msg: dict, fds: list[int], others: list[int]) -> None:
        op = msg.get("op")
        if op not in ("fork", "spawn"):
            return
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                _reset_in_child(self.ctl.fileno(), (self.wake_r, self.wake_w, *others))
                if op == "fork":
                    sock = socket.socket(fileno=fds[0])
                    _warm_child(sock, msg, self.gpus)
                else:
                    _spawn_child(msg, fds)
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
        self.children.add(pid)
        self.tell({"op": "forked", "id": msg.get("id"), "pid": pid})

    def tell(self, msg: dict) -> None:
        try:
            wire.send(self.ctl, msg)
        except OSError:  # the pool is gone; serve() sees EOF next and shuts down
            pass

    def shutdown(self) -> None:
        """The pool went away: nothing we started may outlive us, nor what they started."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            live = set(_own_children()) | self.children
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
                    pid, _ = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    pid = 0
                if pid == 0:
                    break
                self.children.discard(pid)
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
            "cuda_initialized": torch.cuda.is_initialized(),
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
