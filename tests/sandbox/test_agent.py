"""The remote worker against a tiny fake of the server side of the lease protocol (stdlib http.server)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from app.sandbox.agent import AuthError, serve

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "s3cret"


class FakeServer:
    """Implements /api/worker/{lease, runs/ID/heartbeat, runs/ID/result} as documented in agent.py."""

    def __init__(self, port: int = 0):
        self.jobs: list[dict] = []
        self.results: list[dict] = []
        self.heartbeats: list[int] = []
        self.workers: list[dict] = []
        self.lost: set[int] = set()
        self.fail_results = 0  # answer 503 to this many result posts first
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self.reply(401, {"detail": "bad token"})
                parts = self.path.strip("/").split("/")
                if self.path == "/api/worker/lease":
                    return fake.lease(self, body)
                run_id = int(parts[3])
                with fake.lock:
                    if parts[4] == "heartbeat":
                        fake.heartbeats.append(run_id)
                    if run_id in fake.lost:
                        return self.reply(409, {"detail": "lease lost"})
                    if parts[4] == "heartbeat":
                        return self.reply(200, {})
                    if fake.fail_results > 0:
                        fake.fail_results -= 1
                        return self.reply(503, {"detail": "try later"})
                    fake.results.append({"run_id": run_id, **body})
                return self.reply(200, {})

            def reply(self, status, obj=None):
                data = b"" if status == 204 else json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def lease(self, handler, body):
        with self.lock:
            self.workers.append(body["worker"])
        deadline = time.monotonic() + min(float(body.get("wait_s", 20)), 0.3)  # a short long-poll
        while time.monotonic() < deadline:
            with self.lock:
                if self.jobs:
                    return handler.reply(200, self.jobs.pop(0))
            time.sleep(0.02)
        return handler.reply(204)

    def add(self, run_id, broken, fixed, lease_s=30, **extra):
        with self.lock:
            self.jobs.append(
                {
                    "run_id": run_id,
                    "lease": f"L{run_id}",
                    "lease_s": lease_s,
                    "requires": {},
                    "fresh_process": False,
                    "limits": {},
                    **extra,
                    "snippets": {"broken": broken, "fixed": fixed},
                }
            )

    def wait_results(self, n, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.results) >= n:
                    return list(self.results)
            time.sleep(0.05)
        raise AssertionError(f"only {len(self.results)} of {n} results: {self.results}")

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fake():
    srv = FakeServer()
    yield srv
    srv.close()


def _serve_in_thread(url, pool, token=TOKEN, **kw):
    stop = threading.Event()
    box = {}

    def target():
        try:
            box["done"] = serve(url, token, concurrency=2, spare=0, stop_event=stop, pool=pool, **kw)
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    return stop, t, box


BROKEN = {
    "code": "import torch\ntorch.ones(2, 3) @ torch.ones(4, 5)\n",
    "expect": {"outcome": "raised", "exc_type": "RuntimeError", "match": "cannot be multiplied"},
    "check": None,
}
FIXED = {
    "code": "import torch\nprint((torch.ones(2, 3) @ torch.ones(3, 5)).shape)\n",
    "expect": {"outcome": "ok"},
    "check": r"torch.Size\(\[2, 5\]\)",
}


def test_agent_runs_leased_jobs(fake, pool):
    fake.add(1, BROKEN, FIXED)
    fake.add(2, BROKEN, None)
    stop, t, box = _serve_in_thread(fake.url, pool)
    results = fake.wait_results(4)
    stop.set()
    t.join(10)
    assert not t.is_alive() and "error" not in box, box
    by = {(r["run_id"], r["part"]): r for r in results}
    assert (
        by[(1, "broken")]["result"]["outcome"] == "raised" and by[(1, "broken")]["result"]["expected"] is True
    )
    assert by[(1, "fixed")]["result"]["outcome"] == "ok" and by[(1, "fixed")]["result"]["expected"] is True
    assert by[(2, "fixed")]["result"]["outcome"] == "skipped"
    assert by[(2, "fixed")]["result"]["reason"] == "no fixed snippet"
    assert all(r["lease"] == f"L{r['run_id']}" for r in results)
    order = [(r["run_id"], r["part"]) for r in results]
    assert order.index((1, "broken")) < order.index((1, "fixed"))
    worker = fake.workers[0]
    assert {"id", "device", "torch_version", "gpus", "hostname", "concurrency"} <= set(worker)
    assert box["done"] == 2


def test_agent_bad_token_is_refused(fake, pool):
    start = time.monotonic()
    with pytest.raises(AuthError, match="refused the token"):
        serve(fake.url, "wrong", concurrency=1, spare=0, pool=pool)
    assert time.monotonic() - start < 15


def test_agent_abandons_job_when_lease_is_lost(fake, pool, next_run_ok):
    slow = {"code": "import time\ntime.sleep(5)\n", "expect": None, "check": None}
    fake.lost.add(7)  # every heartbeat and result for run 7 answers 409
    fake.add(7, slow, FIXED, lease_s=0.6)
    stop, t, _box = _serve_in_thread(fake.url, pool)
    start = time.monotonic()
    while 7 not in fake.heartbeats and time.monotonic() - start < 3:
        time.sleep(0.05)
    assert 7 in fake.heartbeats
    time.sleep(0.5)  # the heartbeat got 409: the run is cancelled, nothing posted
    stop.set()
    t.join(10)
    assert not t.is_alive()
    assert time.monotonic() - start < 4  # the 5 s snippet was killed, not waited for
    assert fake.results == []
    next_run_ok()


def test_agent_retries_network_errors(pool):
    # The server is down when the agent starts, then answers 503 twice to result posts.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    stop, t, box = _serve_in_thread(f"http://127.0.0.1:{port}", pool)
    time.sleep(1.2)
    srv = FakeServer(port)
    try:
        srv.fail_results = 2
        srv.add(3, BROKEN, FIXED)
        results = srv.wait_results(2, timeout=30)
        stop.set()
        t.join(10)
        assert "error" not in box, box
        assert [r["part"] for r in results] == ["broken", "fixed"]
    finally:
        srv.close()


def _agent_cmd(url, token):
    return [
        sys.executable,
        "-m",
        "app.sandbox.agent",
        "--server",
        url,
        "--token",
        token,
        "--concurrency",
        "1",
        "--spare",
        "0",
        "--wait",
        "1",
    ]


def test_agent_cli_bad_token_exits_with_message(fake):
    proc = subprocess.run(
        _agent_cmd(fake.url, "nope"), check=False, cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert "refused the token" in proc.stderr


def test_agent_cli_sigterm_finishes_job_in_hand(fake):
    slow = {
        "code": "import time\ntime.sleep(1.5)\nprint('finished')\n",
        "expect": {"outcome": "ok"},
        "check": None,
    }
    fake.add(9, slow, FIXED)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(_agent_cmd(fake.url, TOKEN), cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        while "run 9: leased" not in _read_some(proc) and time.monotonic() < deadline:
            pass
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
    assert rc == 0
    results = fake.wait_results(2, timeout=5)
    assert results[0]["result"]["stdout"] == "finished\n"
    assert [r["part"] for r in results] == ["broken", "fixed"]


_logs: dict[int, str] = {}


def _read_some(proc) -> str:
    line = proc.stderr.readline()
    _logs[proc.pid] = _logs.get(proc.pid, "") + line
    if not line and proc.poll() is not None:
        raise AssertionError(f"agent exited early: {_logs[proc.pid]}")
    return _logs[proc.pid]
