"""The pool's side of the fork server: start it, ask it for children, hear how each one ended.

Runs in the pool's process (the agent or the CLI). `ForkServerClient` starts
`python -m app.sandbox.forkserver` (a clean exec, so forking happens in a single-threaded process
that imported torch and never ran a tensor op) and asks it for children, one request and one reply
at a time. `ChildHandle` is one child as the pool sees it; it owns everything of that child here:
its job socket, its cgroup, its run folder and its status pipe, the one channel on which its end
(exit code or signal) arrives, written by the fork server that reaps it.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict

from . import wire
from .cgroups import Cgroup
from .contracts import Outcome, as_outcome

log = logging.getLogger("pitfalls.sandbox")

# Snippets print what they like onto a shared page: no secret of the worker or the server may reach
# them (the worker token, database URLs with passwords, cloud keys).
SECRET = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|_KEY$|^PITFALLS_DATABASE_URL$", re.I)


def snippet_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment children inherit: the parent's, less anything that looks like a secret."""
    return {k: v for k, v in environ.items() if not SECRET.search(k)}


_REPO_ROOT = str(Path(__file__).resolve().parents[2])


class ExitStatus(TypedDict):
    """How a child ended, as the fork server that reaped it writes it on the child's status pipe."""

    code: int | None  # its exit code, or None when a signal killed it
    signal: int | None


class ChildHandle:
    """One sandbox process as the pool sees it: its socket, cgroup, run folder and status pipe."""

    def __init__(
        self, pid: int, sock: socket.socket | None, cgroup: Cgroup | None, kind: str, status_fd: int
    ):
        self.pid, self.cgroup, self.kind = pid, cgroup, kind
        channel = sock is not None
        if sock is None:  # a cold child has no channel (only its exit tells): a closed stand-in
            sock, other = socket.socketpair()
            other.close()  # (it was left to the garbage collector: a ResourceWarning per cold run)
        self.sock = sock
        self.reader = wire.Reader(self.sock)
        if not channel:
            self.reader.eof = True
        self.ready_info: wire.Message | None = None  # the child's `ready` message, once it came
        self.error: str | None = None
        self.status_fd = status_fd
        self.status: ExitStatus | None = None  # from the fork server; None: unknown
        self._ended = False  # its status came, or its status pipe closed (fork server gone)
        self.workdir: str | None = None  # the run's folder, made by the pool (it reads results there)

    # -------------------------------------------------------------- its end
    def read_status(self) -> None:
        """The status pipe is readable: the status, or EOF when the fork server died first."""
        if self._ended:
            return
        try:
            data = os.read(self.status_fd, 4096)
        except OSError:
            data = b""
        if data:
            try:
                self.status = json.loads(data)
            except ValueError:
                log.warning("child %s: unreadable exit status %r", self.pid, data[:100])
        self._ended = True

    @property
    def ended(self) -> bool:
        """Whether the child is known to be gone (does not block)."""
        if not self._ended and self.status_fd >= 0 and select.select([self.status_fd], [], [], 0)[0]:
            self.read_status()
        return self._ended

    def wait_ended(self, timeout: float) -> bool:
        if not self._ended and self.status_fd >= 0 and select.select([self.status_fd], [], [], timeout)[0]:
            self.read_status()
        return self._ended

    # -------------------------------------------------------------- its messages
    def handle(self, msg: wire.Message, fds: list[int]) -> Outcome | None:
        """One message from the child; returns the run's result when that is what it was.

        Raises ValueError for a malformed result (the snippet can write on this socket too).
        """
        for fd in fds:
            os.close(fd)
        op = msg.get("op")
        if op == "ready":
            if self.ready_info is None:  # a second one can only be the snippet's: not the child's facts
                self.ready_info = msg
        elif op == "error":
            self.error = msg.get("error")
        elif op == "result":
            return as_outcome(msg.get("result"))
        return None

    def kill(self) -> None:
        """SIGKILL the child's process group and everything in its cgroup."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            pass
        if self.cgroup:
            self.cgroup.kill()

    def retire(self) -> None:
        """Kill it and free everything it had here."""
        self.kill()
        self.sock.close()
        if self.cgroup:
            self.cgroup.remove()
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        if self.status_fd >= 0:
            os.close(self.status_fd)
            self.status_fd = -1
            self._ended = True


class ForkServerClient:
    """A running `python -m app.sandbox.forkserver`, restarted on demand if it dies."""

    def __init__(self, python: str):
        self.python = python
        self.hello: wire.Message = {}  # the server's first message: torch version, GPUs, Python
        self._proc: subprocess.Popen[bytes] | None = None
        self._ctl: socket.socket | None = None
        self._reader: wire.Reader | None = None
        self._lock = threading.Lock()  # one request and its reply at a time
        self._ids = itertools.count(1)
        self._closed = False

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def ensure(self) -> None:
        """Start the server unless it is running (a cold `import torch`: seconds)."""
        with self._lock:
            self._ensure()

    def _ensure(self) -> tuple[socket.socket, wire.Reader]:
        """The running server's control socket and its reader (started first if need be)."""
        if self._closed:
            raise RuntimeError("fork server closed")
        if (
            self._proc is not None
            and self._proc.poll() is None
            and self._ctl is not None
            and self._reader is not None
        ):
            return self._ctl, self._reader
        self._drop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        path = os.pathsep.join(filter(None, [_REPO_ROOT, os.environ.get("PYTHONPATH")]))
        env = {
            **snippet_environ(os.environ),
            "PYTHONPATH": path,
            "PYTORCH_NVML_BASED_CUDA_CHECK": "1",
            "CUDA_LAUNCH_BLOCKING": "1",
        }  # read at CUDA init in the children: right traceback lines
        try:
            proc = subprocess.Popen(
                [self.python, "-m", "app.sandbox.forkserver", str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                cwd=tempfile.gettempdir(),
                env=env,
            )
        except BaseException:  # no interpreter there (and the like): leave no socket open
            ours.close()
            raise
        finally:
            theirs.close()
        ours.settimeout(300)
        reader = wire.Reader(ours)
        got = reader.recv()  # Reader turns a timeout into end of stream
        ours.settimeout(60)  # every later reply comes at once: a silent server is a dead one
        if got is None or got[0].get("op") != "hello":
            proc.kill()
            proc.wait()
            ours.close()
            raise RuntimeError("the sandbox fork server failed to start (see its stderr)")
        self.hello, self._proc, self._ctl, self._reader = got[0], proc, ours, reader
        return ours, reader

    def _drop(self) -> None:
        """Forget a server that died or stopped answering (its children's status pipes read EOF)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
        if self._proc is not None:
            self._proc.wait()
        if self._ctl is not None:
            self._ctl.close()
        self._proc = self._ctl = self._reader = None

    def request(self, msg: wire.Message, fds: list[int]) -> wire.Message:
        """Send a fork/spawn request (the descriptors go to the server); return {"pid"} or {"error"}."""
        with self._lock:
            ctl, reader = self._ensure()
            rid = next(self._ids)
            try:
                wire.send(ctl, {**msg, "id": rid}, fds)
                got = reader.recv()
            except (OSError, ValueError) as exc:
                got, why = None, str(exc)
            else:
                why = "no answer"
            if got is None or got[0].get("id") != rid:
                log.warning("the sandbox fork server failed a request (%s); it will be restarted", why)
                self._drop()
                return {"error": f"fork server unreachable: {why}"}
            return got[0]

    def start_child(
        self,
        msg: wire.Message,
        fds: list[int],
        *,
        sock: socket.socket | None,
        cgroup: Cgroup | None,
        kind: str,
    ) -> ChildHandle | None:
        """Ask for one child with a status pipe of its own; None when the server could not fork."""
        status_r, status_w = os.pipe2(os.O_CLOEXEC)
        try:
            reply = self.request({**msg, "cgroup": cgroup.procs_files if cgroup else []}, [*fds, status_w])
        finally:
            os.close(status_w)  # the server holds the write end now; it closes when the child is reaped
        if "pid" not in reply:
            os.close(status_r)
            return None
        return ChildHandle(reply["pid"], sock, cgroup, kind, status_r)

    def close(self) -> None:
        """EOF on the control socket: the server kills what it started and exits."""
        with self._lock:
            self._closed = True
            ctl, proc = self._ctl, self._proc
            if ctl is not None:
                try:
                    ctl.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                ctl.close()
            if proc is not None:
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            self._ctl = self._reader = None

    def kill(self) -> None:
        """Kill the server process (tests: the pool must recover)."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
