"""SQLite and PostgreSQL side by side, in one run: search latency and the queue's lease throughput.

    python bench/bench_backends.py [--rounds 30] [--runs 600] [--json out.json]

- search: `Searcher.search` over the bench's pastes and free-text queries (bench/bench_search.py's
  set), p50/p99 per backend, after a warm-up (the in-memory signature index is built once per
  content generation on both backends; what differs is reading candidates and free-text ranking);
- free text alone: the store's ranked free-text query (FTS5 BM25 / GIN + the same BM25);
- lease throughput: `runs` runs queued, then drained by 1 and by 8 worker threads doing what a
  worker's HTTP calls do (lease, then post both results), in runs per second.

PostgreSQL is a private server started for the run (tests/pgserver.py: Debian's package, fsync on as
a real server would have it). Both on this machine, which is shared and noisy: compare the columns,
not the absolute numbers with other machines.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlmodel import Session, select  # noqa: E402

from app import content, runs  # noqa: E402
from app.config import Settings  # noqa: E402
from app.db import make_engine, migrate  # noqa: E402
from app.models import Entry  # noqa: E402
from app.sandbox.contracts import blank  # noqa: E402
from app.search import Searcher  # noqa: E402
from app.search_store import SearchStore  # noqa: E402
from bench.bench_search import QUERIES, pct  # noqa: E402
from tests import pgserver  # noqa: E402

FREE_TEXT = [
    ["dataloader", "hangs"],
    ["loss", "nan"],
    ["learning", "rate", "warmup"],
    ["onnx", "export", "fails"],
    ["optimizer", "step", "before", "scheduler"],
    ["gradient", "none"],
]
OUTCOME = {**blank("ok", "bench"), "expected": True, "device": "cpu", "torch_version": "2.13.0"}


def search_ms(engine, settings: Settings, rounds: int) -> list[float]:
    searcher = Searcher.from_settings(engine, settings)
    for q in QUERIES:
        searcher.search(q)
    out = []
    for _ in range(rounds):
        for q in QUERIES:
            t = time.perf_counter()
            searcher.search(q)
            out.append((time.perf_counter() - t) * 1000)
    return out


def free_text_ms(engine, rounds: int) -> list[float]:
    store, out = SearchStore(engine), []
    for i in range(rounds * len(FREE_TEXT) + len(FREE_TEXT)):
        t = time.perf_counter()
        with store.reader() as r:
            r.free_text(FREE_TEXT[i % len(FREE_TEXT)], every=i % 2 == 0, limit=10)
        if i >= len(FREE_TEXT):  # the first pass warms caches
            out.append((time.perf_counter() - t) * 1000)
    return out


def queue(engine, settings: Settings, n: int) -> int:
    """Queue `n` runs (entries repeat with a changed limit, so identical waiting runs don't merge)."""
    with Session(engine) as s:
        entries = s.exec(select(Entry).where(Entry.data["requires"]["cuda"].as_boolean() == False)).all()  # noqa: E712
        for i in range(n):
            tweaked = settings.model_copy(update={"run_timeout_s": 30 + i // len(entries)})
            runs.create_run(session=s, entry=entries[i % len(entries)], settings=tweaked)
    return n


def drain(engine, settings: Settings, threads: int) -> tuple[float, int, int]:
    """Workers lease and finish runs until none is left: (seconds, runs done, double leases)."""
    seen: dict[int, int] = {}
    lock = threading.Lock()

    def work(i: int) -> None:
        with Session(engine) as s:
            worker = runs.see_worker(session=s, info={"id": f"bench-{i}", "device": "cpu"})
            while True:
                run = runs.lease_run(session=s, worker=worker, settings=settings)
                if run is None:
                    return
                with lock:
                    seen[run.id] = seen.get(run.id, 0) + 1
                for part in runs.PARTS:
                    runs.submit_result(
                        session=s,
                        run_id=run.id,
                        lease=run.lease,
                        part=part,
                        result=OUTCOME,
                        settings=settings,
                    )

    t = time.perf_counter()
    pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    return time.perf_counter() - t, len(seen), sum(c - 1 for c in seen.values())


def measure(url: str, args) -> dict:
    settings = Settings(database_url=url, content_dir=ROOT / "content", queue_max=10**6, queue_per_client=0)
    migrate(settings)
    engine = make_engine(settings)
    content.sync(engine, settings.content_dir)
    out: dict = {"backend": engine.dialect.name}
    ms = search_ms(engine, settings, args.rounds)
    out["search_p50_ms"], out["search_p99_ms"] = statistics.median(ms), pct(ms, 0.99)
    ft = free_text_ms(engine, args.rounds)
    out["free_text_p50_ms"], out["free_text_p99_ms"] = statistics.median(ft), pct(ft, 0.99)
    for threads in (1, 8):
        queue(engine, settings, args.runs)
        seconds, done, doubles = drain(engine, settings, threads)
        out[f"lease_{threads}w_runs_per_s"] = done / seconds
        out[f"lease_{threads}w_double_leases"] = doubles
        assert done == args.runs, (done, args.runs)
    engine.dispose()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--runs", type=int, default=600)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if why := pgserver.unavailable():
        sys.exit(f"bench_backends: {why}")
    results = []
    with tempfile.TemporaryDirectory() as tmp, pgserver.Server(durable=True) as pg:
        results.append(measure(f"sqlite:///{tmp}/bench.db", args))
        results.append(measure(pg.database(), args))
    rows = [
        ("search p50 (ms)", "search_p50_ms", "{:.2f}"),
        ("search p99 (ms)", "search_p99_ms", "{:.2f}"),
        ("free-text query p50 (ms)", "free_text_p50_ms", "{:.2f}"),
        ("free-text query p99 (ms)", "free_text_p99_ms", "{:.2f}"),
        ("lease+2 results, 1 worker (runs/s)", "lease_1w_runs_per_s", "{:.0f}"),
        ("lease+2 results, 8 workers (runs/s)", "lease_8w_runs_per_s", "{:.0f}"),
        ("double leases (1 / 8 workers)", None, None),
    ]
    print(f"{len(QUERIES)} search queries x {args.rounds} rounds; {args.runs} runs drained per worker count")
    print(f"{'':40} {'SQLite':>12} {'PostgreSQL':>12}")
    for label, key, fmt in rows:
        if key is None:
            cells = [f"{r['lease_1w_double_leases']} / {r['lease_8w_double_leases']}" for r in results]
        else:
            cells = [fmt.format(r[key]) for r in results]
        print(f"{label:40} {cells[0]:>12} {cells[1]:>12}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
