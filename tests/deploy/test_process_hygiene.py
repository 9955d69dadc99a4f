"""`pitfalls serve` and its local workers: workers die with their server, and a stop is quick."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from .conftest import ROOT, tool
from .test_end_to_end import descendants


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alive(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            out.append(pid)
    return out


@pytest.fixture
def server(tmp_path):
    port = _free_port()
    env = {
        **os.environ,
        "PITFALLS_DATABASE_URL": f"sqlite:///{tmp_path}/p.db",
        "PITFALLS_CONTENT_DIR": str(ROOT / "content"),
        "PITFALLS_WORKER_SPARE": "1",
    }
    proc = subprocess.Popen(
        [tool("pitfalls"), "serve", "--port", str(port), "--workers", "1"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # up, and its worker (torch imported, pool warm) has checked in
        try:
            if httpx.get(f"{url}/healthz", timeout=2).json().get("workers"):
                break
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("the server or its worker did not come up")
    tree = descendants(proc.pid)
    assert tree, "the server has no worker processes"
    yield proc, tree
    with_leftovers = _alive(tree)
    for pid in with_leftovers:
        os.kill(pid, signal.SIGKILL)
    if proc.poll() is None:
        proc.kill()


def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while _alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return _alive(pids)


@pytest.mark.slow
def test_workers_and_their_pools_die_with_a_killed_server(server):
    proc, tree = server
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert _wait_gone(tree, 15) == [], "worker processes outlived their server"


@pytest.mark.slow
def test_ctrl_c_stops_the_server_and_its_workers(server):
    proc, tree = server
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=15)  # long polls in flight do not hold the stop (was ~20 s)
    assert _wait_gone(tree, 5) == []
