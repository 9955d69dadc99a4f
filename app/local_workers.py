"""Worker processes that `pitfalls serve` runs on this machine.

They are ordinary `app.sandbox.agent` processes pulling jobs over HTTP like remote workers, so there
is one job path; torch lives only in them, never in the web process. A worker that dies is restarted.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time

from .config import Settings

log = logging.getLogger("pitfalls.workers")


class LocalWorkers:
    def __init__(self, settings: Settings, server_url: str, token: str):
        self.settings, self.server_url, self.token = settings, server_url, token
        self.procs: list[subprocess.Popen[bytes] | None] = [None] * settings.local_workers
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="local-workers", daemon=True)

    def _spawn(self) -> subprocess.Popen[bytes]:
        cmd = [
            sys.executable,
            "-m",
            "app.sandbox.agent",
            "--server",
            self.server_url,
            "--concurrency",
            str(self.settings.worker_concurrency),
            "--spare",
            str(self.settings.worker_spare),
            "--parent-pid",
            str(os.getpid()),
        ]  # it exits when we are gone, even after a kill -9
        # this machine's workers take the server's per-snippet limits as their maxima
        for key, value in self.settings.limits().items():
            cmd += ["--limit", f"{key}={int(value) if isinstance(value, bool) else value}"]
        # the token travels in the environment: a command line is visible to every user in `ps`
        env = {**os.environ, "PITFALLS_WORKER_TOKEN": self.token}
        return subprocess.Popen(cmd, env=env, start_new_session=True)

    def start(self) -> None:
        if self.settings.local_workers > 0:
            self._thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set():
            for i, proc in enumerate(self.procs):
                if proc is None or proc.poll() is not None:
                    if proc is not None:
                        log.warning("local worker exited with %s; restarting it", proc.returncode)
                    try:
                        self.procs[i] = self._spawn()
                    except Exception:  # e.g. out of processes: say so, try again on the next round
                        log.exception("could not start a local worker")
            self._stop.wait(2.0)

    def stop(self, timeout: float = 2.0) -> None:
        """Stop within `timeout`: two SIGTERMs (the agent's "abandon the jobs in hand": it cancels
        them and closes its pool; their runs are requeued), then SIGKILL to whatever is left."""
        self._stop.set()
        live = [p for p in self.procs if p and p.poll() is None]
        for sig in (signal.SIGTERM, signal.SIGTERM):
            for proc in live:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(sig)
            time.sleep(0.05)
        deadline = time.monotonic() + timeout
        for proc in live:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)  # its own session: the agent and its pool
                proc.wait()
