"""Worker processes that `pitfalls serve` runs on this machine.

They are ordinary `app.sandbox.agent` processes pulling jobs over HTTP like remote workers, so there
is one job path; torch lives only in them, never in the web process. A worker that dies is restarted.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading

from ..config import Settings

log = logging.getLogger("pitfalls.workers")


class LocalWorkers:
    def __init__(self, settings: Settings, server_url: str, token: str):
        self.settings, self.server_url, self.token = settings, server_url, token
        self.procs: list[subprocess.Popen | None] = [None] * settings.local_workers
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="local-workers", daemon=True)

    def _spawn(self) -> subprocess.Popen:
        cmd = [sys.executable, "-m", "app.sandbox.agent", "--server", self.server_url,
               "--concurrency", str(self.settings.worker_concurrency), "--spare", str(self.settings.worker_spare)]
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
                    self.procs[i] = self._spawn()
            self._stop.wait(2.0)

    def stop(self) -> None:
        self._stop.set()
        for proc in self.procs:
            if proc and proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            if proc:
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
