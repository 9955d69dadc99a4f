"""200 Reproduce requests at once against one local worker with a pool of 2: real server, real torch.

Each request is either accepted (202) and its run finishes with both outcomes, or refused cleanly
(503 with Retry-After). None is lost, none is stuck.
"""

from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import uvicorn

from app.config import Settings
from app.main import create_app
from tests.conftest import ROOT

SLUG = "view-non-contiguous"


@pytest.fixture()
def server(synced_db_url):  # on SQLite and on PostgreSQL (tests/conftest.py)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    # one client sends all 200: its per-client share is lifted, so the global bound is what is tested
    settings = Settings(
        database_url=synced_db_url,
        content_dir=ROOT / "content",
        local_workers=1,
        worker_concurrency=2,
        worker_spare=2,
        queue_max=40,
        queue_per_client=0,
    )
    # timeout_graceful_shutdown as `pitfalls serve`: the worker's open long poll does not hold up teardown
    config = uvicorn.Config(
        create_app(settings, worker_url=url), port=port, log_level="warning", timeout_graceful_shutdown=2
    )
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    while not srv.started:
        time.sleep(0.05)
    yield url
    srv.should_exit = True
    thread.join(30)


@pytest.mark.slow
def test_reproduce_burst_of_200_each_finishes_or_is_refused(server):
    with httpx.Client(base_url=server, timeout=60) as client, ThreadPoolExecutor(32) as pool:
        # 200 clicks spread over 50 quick entries: repeats of a waiting run share it, the rest queue
        # up to the bound, and the bound holds under concurrency
        entries = [
            e["slug"]
            for e in client.get("/api/entries", params={"category": "mismatch"}).json()
            if not e["requires"]["cuda"] and not e["requires"]["gpus"]
        ][:50]
        answers = list(
            pool.map(lambda i: client.post(f"/api/entries/{entries[i % len(entries)]}/reproduce"), range(200))
        )
        accepted = {r.json()["id"] for r in answers if r.status_code == 202}
        refused = [r for r in answers if r.status_code == 503]
        assert len([r for r in answers if r.status_code == 202]) + len(refused) == 200, {
            r.status_code for r in answers
        }
        assert accepted and refused, (len(accepted), len(refused))
        assert all(r.headers.get("Retry-After") for r in refused)
        deadline = time.monotonic() + 240
        pending = set(accepted)
        while pending and time.monotonic() < deadline:
            for run_id in list(pending):
                if client.get(f"/api/runs/{run_id}").json()["state"] == "done":
                    pending.discard(run_id)
            time.sleep(0.5)
        assert not pending, f"{len(pending)} runs never finished"
        for run_id in accepted:
            run = client.get(f"/api/runs/{run_id}").json()
            for part in ("broken", "fixed"):
                assert run["results"][part]["expected"] in (True, None), (
                    run["entry"],
                    part,
                    run["results"][part],
                )
        health = client.get("/healthz").json()
        assert health["queue"] == {"queued": 0, "running": 0}
        assert health["workers"] and health["workers"][0]["torch_version"].startswith("2.")
