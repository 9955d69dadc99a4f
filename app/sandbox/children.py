"""The pool's side of the fork server: start it, ask it for children, hear how they ended.

The fork server (`forkserver.py`) is started with a clean exec, so forking happens in a
single-threaded process that imported torch and never ran a tensor op. Each request is answered
with a pid; every child's end (exit code or signal) comes back as an event, because only the
server, their parent, can reap them.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from . import wire
from .cgroups import Cgroup

# Snippets print what they like onto a shared page: no secret of the worker or the server may reach
# them (the worker token, database URLs with passwords, cloud keys).
SECRET = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|_KEY$|^PITFALLS_DATABASE_URL$", re.I)


def snippet_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment children inherit: the parent's, less anything that looks like a secret."""
    return {k: v for k, v in environ.items() if not SECRET.search(k)}


_REPO_ROOT = str(Path(__file__).resolve().parents[2])


class Child:
    """One sandbox process as the pool sees it: its socket, cgroup, and (later) how it ended."""

    def __init__(self, pid: int, sock: socket.socket | None, cgroup: Cgroup | None, kind: str):
        self.pid, self.cgroup, self.kind = pid, cgroup, kind
        self.sock = sock or socket.socketpair()[0]  # a cold child has no channel: only its exit tells
        self.reader = wire.Reader(self.sock)
        if sock is None:
            self.reader.eof = True
        self.ready_info: dict | None = None
        self.error: str | None = None
        self.status: dict | None = None  # {"code", "signal"} from the fork server; None: unknown
        self.exited = threading.Event()
        self.workdir: str | None = None  # the run's folder, made by the pool (it reads results there)

    def handle(self, msg: dict, fds: list[int]) -> dict | None:
        """One message from the child; returns the run's result when that is what it was."""
        for fd in fds:
            os.close(fd)
        op = msg.get("op")
        if op == "ready":
            self.ready_info = msg
        elif op == "error":
            self.error = msg.get("error")
        elif op == "result":
            return msg["result"]
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
        self.kill()
        self.sock.close()
        if self.cgroup:
            self.cgroup.remove()
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


class ForkServer:
    """A running `python -m app.sandbox.forkserver`, restarted on demand if it dies."""

    def __init__(self, python: str, on_lost: Callable[[list[Child]], None]):
        self.python, self.on_lost = python, on_lost
        self.hello: dict = {}
        self._proc: subprocess.Popen | None = None
        self._ctl: socket.socket | None = None
        self._lock = threading.RLock()
        self._send_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._pending: dict[int, list] = {}
        self._children: dict[int, Child] = {}
        self._early: dict[int, dict] = {}  # exits heard before the requester registered the child
        self._closed = False
        self.threads: list[threading.Thread] = []

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def ensure(self) -> None:
        """Start the server unless it is running (a cold `import torch`: seconds)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("fork server closed")
            if self._proc is not None and self._proc.poll() is None and self._ctl is not None:
                return
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            path = os.pathsep.join(filter(None, [_REPO_ROOT, os.environ.get("PYTHONPATH")]))
            env = {
                **snippet_environ(os.environ),
                "PYTHONPATH": path,
                "PYTORCH_NVML_BASED_CUDA_CHECK": "1",
                "CUDA_LAUNCH_BLOCKING": "1",
            }  # read at CUDA init in the children: right traceback lines
            proc = subprocess.Popen(
                [self.python, "-m", "app.sandbox.forkserver", str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                cwd=tempfile.gettempdir(),
                env=env,
            )
            theirs.close()
            ours.settimeout(300)
            reader = wire.Reader(ours)
            try:
                got = reader.recv()
            except OSError:
                got = None
            ours.settimeout(None)
            if got is None or got[0].get("op") != "hello":
                proc.kill()
                proc.wait()
                ours.close()
                raise RuntimeError("the sandbox fork server failed to start (see its stderr)")
            self.hello, self._proc, self._ctl = got[0], proc, ours
            t = threading.Thread(
                target=self._listen, args=(ours, reader), name="pitfalls-forkserver", daemon=True
            )
            t.start()
            self.threads.append(t)

    def _listen(self, ctl: socket.socket, reader: wire.Reader) -> None:
        """Replies and exit statuses from one server process, until it goes away."""
        while True:
            try:
                got = reader.recv()
            except (OSError, ValueError):
                got = None
            if got is None:
                break
            msg = got[0]
            if msg.get("op") == "forked":
                with self._lock:
                    slot = self._pending.pop(msg.get("id"), None)
                if slot is not None:
                    slot[1] = msg
                    slot[0].set()
            elif msg.get("op") == "exit":
                status = {"code": msg.get("code"), "signal": msg.get("signal")}
                with self._lock:
                    child = self._children.pop(msg["pid"], None)
                    if child is None:
                        self._early[msg["pid"]] = status
                if child is not None:
                    child.status = status
                    child.exited.set()
        # The server died or was closed: nobody can reap or report its children any more.
        with self._lock:
            if self._ctl is ctl:
                self._ctl = None
            orphans = list(self._children.values())
            self._children.clear()
            for slot in self._pending.values():
                slot[0].set()
            self._pending.clear()
        for child in orphans:
            child.exited.set()  # status stays None: "unknown"
        self.on_lost(orphans)

    def request(self, msg: dict, fds: list[int]) -> dict:
        """Send a fork/spawn request (the descriptors go to the server); return {"pid"} or {"error"}."""
        self.ensure()
        with self._lock:
            ctl, rid = self._ctl, next(self._ids)
            slot = [threading.Event(), None]
            self._pending[rid] = slot
        try:
            with self._send_lock:
                wire.send(ctl, {**msg, "id": rid}, fds)
        except (OSError, AttributeError) as exc:
            with self._lock:
                self._pending.pop(rid, None)
            return {"error": f"fork server unreachable: {exc}"}
        if not slot[0].wait(60) or slot[1] is None:
            return {"error": "fork server did not answer"}
        return slot[1]

    def start_child(
        self, msg: dict, fds: list[int], *, sock: socket.socket | None, cgroup: Cgroup | None, kind: str
    ) -> Child | None:
        """Ask for one child; register it so that its exit status finds it."""
        reply = self.request({**msg, "cgroup": cgroup.procs_files if cgroup else []}, fds)
        if "pid" not in reply:
            return None
        child = Child(reply["pid"], sock, cgroup, kind)
        with self._lock:
            status = self._early.pop(child.pid, None)
            if status is None and self._ctl is not None:
                self._children[child.pid] = child
                return child
        child.status = status
        child.exited.set()
        return child

    def close(self) -> None:
        """EOF on the control socket: the server kills what it started and exits."""
        with self._lock:
            self._closed = True
            ctl, proc = self._ctl, self._proc
        if ctl is not None:
            try:
                ctl.shutdown(socket.SHUT_RDWR)  # also wakes our listener
            except OSError:
                pass
            ctl.close()
        if proc is not None:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for t in self.threads:
            t.join(timeout=10)

    def kill(self) -> None:
        """Kill the server process (tests: the pool must recover)."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
