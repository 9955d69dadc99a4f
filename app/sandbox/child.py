"""A sandbox child: the process that runs ONE snippet (its code, from the fork to its death).

Forked by the fork server (`forkserver.py`), it resets what it inherited, confines itself
(`isolate.confine`: namespaces, read-only mounts, a private /tmp, an unprivileged uid), warms up,
joins its run's cgroup, says `ready` on its socket, waits for one job, runs it (`execute.run_code`),
sends the result on the same socket and kills its own process group. How it ended (exit code or
signal) reaches the pool on its status pipe, written by the fork server that reaps it.
`spawn_child` is the cold variant: the same confinement, then exec `python -m app.sandbox.execute`.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from typing import Final

from . import wire
from .contracts import Outcome


def reset(ctl_fd: int, other_fds: tuple[int, ...]) -> None:
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
    torch.cuda.init()  # type: ignore[no-untyped-call]  # unannotated in torch
    for i in range(gpus):
        torch.cuda.set_per_process_memory_fraction(fraction, i)
    if level == "full":  # context + cuBLAS and cuDNN handles
        a = torch.ones(64, 64, device="cuda")
        (a @ a).sum().item()
        F.conv2d(torch.ones(1, 3, 8, 8, device="cuda"), torch.ones(4, 3, 3, 3, device="cuda")).sum().item()
        torch.cuda.synchronize()
    return torch.cuda.get_device_name(0)


def warm_child(sock: socket.socket, req: wire.Message, gpus: int) -> None:
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
    sock: socket.socket, job: wire.Message, fds: list[int], *, gpus: int, fraction: float, net: bool
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
_CAPPED: Final = ("message", "traceback")  # the result's own long texts


def _report(sock: socket.socket, result: Outcome, *, cap: int) -> None:
    for stream in (sys.__stdout__, sys.__stderr__, sys.stdout, sys.stderr):
        try:
            if stream is not None:  # sys.__stdout__ is None when Python started without one
                stream.flush()
        except Exception:  # noqa: BLE001, S110 - the snippet may have closed or replaced it
            pass
    null = _open("/dev/null", os.O_WRONLY)
    _dup2(null, 1)  # our ends of the output pipes close now, so the pool sees EOF at once
    _dup2(null, 2)
    for key in _CAPPED:
        text = result.get(key)
        if isinstance(text, str) and len(text) > cap:
            result[key] = text[:cap] + "\n[... truncated]"
            result["truncated"] = True
    try:
        wire.send(sock, {"op": "result", "result": result})
    except OSError:  # the snippet closed our channel: nothing left to say
        _exit(121)  # collect.CHANNEL_CLOSED
    _killpg(0, signal.SIGKILL)  # ourselves and anything the snippet left running


def spawn_child(req: wire.Message, fds: list[int]) -> None:
    """A cold child for `fresh_process` jobs: limits, then exec a fresh interpreter."""
    from . import isolate

    out_w, err_w = fds
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    cgroup = isolate.open_cgroup(req.get("cgroup") or [])
    confined = isolate.confine(
        network=req.get("network", False), workdir=req["cwd"], tmp_mb=req.get("tmp_mb", 1024)
    )
    isolate.join_cgroup_fds(cgroup)
    ok, how = confined["network"]
    if not ok and "switched off" not in how:  # as before: only a missing network namespace is said
        os.write(2, f"[sandbox] {how}\n".encode())
    isolate.set_run_limits(cpu_s=req["cpu_s"], max_file_mb=req["max_file_mb"])
    os.chdir(req["cwd"])
    os.execve(sys.executable, [sys.executable, *req["args"]], {**os.environ, **req.get("env", {})})
