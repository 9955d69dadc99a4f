"""Two `pitfalls serve` replicas on one PostgreSQL database, as behind a load balancer.

Workers speak the real worker protocol over HTTP to both replicas at once; the burst checks that no
run is handed to two workers and none is lost. A content sync made through one path is seen by both
replicas' search without a restart, and a run queued on one replica wakes a long poll on the other
(LISTEN/NOTIFY) sooner than the one-second polling fallback would.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.conftest import ROOT
from tests.pgserver import free_port

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
TOKEN = "replica-test-token"
PITFALLS = str(Path(sys.executable).parent / "pitfalls")


class Replica:
    def __init__(self, name: str, url: str, content: Path, log: Path):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {
            **os.environ,
            "PITFALLS_DATABASE_URL": url,
            "PITFALLS_CONTENT_DIR": str(content),
            "PITFALLS_LOCAL_WORKERS": "0",
            "PITFALLS_WORKER_TOKEN": TOKEN,
            "PITFALLS_QUEUE_MAX": "1000",
            "PITFALLS_QUEUE_PER_CLIENT": "0",
            "PITFALLS_LEASE_S": "60",
        }
        self.log = log
        with log.open("w") as out:  # the child has its own copy of the file
            self.proc = subprocess.Popen(
                [PITFALLS, "serve", "--port", str(self.port)],
                env=env,
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.http = httpx.Client(base_url=self.base, timeout=30)

    def wait_healthy(self) -> None:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"replica exited:\n{self.log.read_text()[-3000:]}"
            try:
                if self.http.get("/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"replica not healthy:\n{self.log.read_text()[-3000:]}")

    def lease(self, worker: str, wait_s: float) -> dict | None:
        r = self.http.post(
            "/api/worker/lease",
            json={"worker": {"id": worker}, "wait_s": wait_s},
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        assert r.status_code in (200, 204), r.text
        return r.json() if r.status_code == 200 else None

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.http.close()


def outcome() -> dict:
    return {
        "outcome": "ok",
        "exc_type": None,
        "message": None,
        "traceback": None,
        "warnings": [],
        "stdout": "",
        "stderr": "",
        "truncated": False,
        "duration_ms": 1.0,
        "device": "cpu",
        "torch_version": "2.13.0",
        "expected": True,
        "reason": "ok",
    }


@pytest.fixture(scope="module")
def replicas(pg_server, tmp_path_factory):
    root = tmp_path_factory.mktemp("replicas")
    content = root / "content"
    shutil.copytree(ROOT / "content", content)
    url = pg_server.database()  # empty: both replicas migrate and sync it at once, taking turns
    pair = [Replica(name, url, content, root / f"{name}.log") for name in ("a", "b")]
    try:
        for r in pair:
            r.wait_healthy()
        yield pair, url, content
    finally:
        for r in pair:
            r.stop()


def test_two_replicas_start_together_on_an_empty_database(replicas):
    (a, b), _, _ = replicas
    ha, hb = a.http.get("/healthz").json(), b.http.get("/healthz").json()
    assert ha["entries"] == hb["entries"] > 100


def test_burst_across_replicas_no_double_lease_no_lost_run(replicas):
    (a, b), _, _ = replicas
    slugs = [
        e["slug"]
        for e in a.http.get("/api/entries").json()
        if not e["requires"]["cuda"] and not e["requires"]["gpus"]
    ][:60]
    # a burst of Reproduce presses, alternating replicas
    created = []
    with ThreadPoolExecutor(8) as pool:
        for r in pool.map(
            lambda i: (a, b)[i % 2].http.post(f"/api/entries/{slugs[i]}/reproduce"), range(len(slugs))
        ):
            assert r.status_code == 202, r.text
            created.append(r.json()["id"])
    assert len(set(created)) == len(slugs)

    leases: dict[int, list[str]] = defaultdict(list)
    lock = threading.Lock()
    stop = threading.Event()

    def work(n: int) -> None:
        me, server = f"w{n}", (a, b)[n % 2]
        while not stop.is_set():
            job = server.lease(me, wait_s=1)
            server = b if server is a else a  # the next lease from the other replica
            if job is None:
                continue
            with lock:
                leases[job["run_id"]].append(me)
            for part in ("broken", "fixed"):  # results go to either replica
                r = (a, b)[(job["run_id"] + (part == "fixed")) % 2].http.post(
                    f"/api/worker/runs/{job['run_id']}/result",
                    headers={"Authorization": f"Bearer {TOKEN}"},
                    json={"lease": job["lease"], "part": part, "result": outcome()},
                )
                assert r.status_code == 200, r.text

    workers = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in workers:
        t.start()
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            states = [a.http.get(f"/api/runs/{i}").json()["state"] for i in created]
            if all(s == "done" for s in states):
                break
            time.sleep(0.5)
    finally:
        stop.set()
        for t in workers:
            t.join(10)
    doubles = {rid: who for rid, who in leases.items() if len(who) > 1}
    assert doubles == {}, f"runs leased to two workers: {doubles}"
    lost = [i for i in created if b.http.get(f"/api/runs/{i}").json()["state"] != "done"]
    assert lost == [] and set(leases) == set(created)
    assert len({who[0] for who in leases.values()}) > 1  # the work was really shared


def test_a_run_queued_on_one_replica_wakes_a_long_poll_on_the_other(replicas):
    (a, b), _, _ = replicas
    slugs = ["view-non-contiguous", "nan-loss", "linear-in-features-mismatch"]
    latencies = []
    for slug in slugs:
        got: dict = {}

        def poll() -> None:
            got["job"] = b.lease("waker", wait_s=10)  # noqa: B023  (joined before the loop moves on)
            got["at"] = time.monotonic()  # noqa: B023

        t = threading.Thread(target=poll)
        t.start()
        time.sleep(0.4)  # the poll is waiting on b
        queued_at = time.monotonic()
        run = a.http.post(f"/api/entries/{slug}/reproduce").json()
        t.join(15)
        assert got["job"]["run_id"] == run["id"]
        latencies.append(got["at"] - queued_at)
        r = b.http.post(
            f"/api/worker/runs/{run['id']}/result",
            headers={"Authorization": f"Bearer {TOKEN}"},
            json={"lease": got["job"]["lease"], "part": "broken", "result": outcome()},
        )
        assert r.status_code == 200
    # the fallback polls once a second (0.6 s after the run here); NOTIFY answers in a few ms
    assert statistics.median(latencies) < 0.35, latencies
