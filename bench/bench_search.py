"""Search latency: the search function and the HTTP endpoint, at the real size and at 100,000 entries.

    python bench/bench_search.py [--synthetic 100000] [--rounds 200]

Prints p50/p99 per setting, measured side by side in one run (the machine is shared and noisy).
Synthetic entries are real signatures with a share of their words swapped for other words, so token
frequencies look like a large real knowledge base rather than random noise.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import socket
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app import content  # noqa: E402
from app.config import Settings  # noqa: E402
from app.db import make_engine, migrate  # noqa: E402
from app.normalize import normalize  # noqa: E402
from app.search import Searcher  # noqa: E402
from tests.test_search import PASTES, UNRELATED  # noqa: E402

QUERIES = (
    [p for p, _ in PASTES.values()] + UNRELATED + ["dataloader hangs", "nan loss", "weight decay frozen"]
)


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))]


def time_function(searcher: Searcher, rounds: int) -> list[float]:
    for q in QUERIES:  # warm caches (IDF table, page cache)
        searcher.search(q)
    out = []
    for _ in range(rounds):
        for q in QUERIES:
            t = time.perf_counter()
            searcher.search(q)
            out.append((time.perf_counter() - t) * 1000)
    return out


def time_http(settings: Settings, rounds: int) -> list[float]:
    import httpx
    import uvicorn

    from app.main import create_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(settings), port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    out = []
    try:
        # the first request builds the signature index (seconds at 100k entries): wait for it
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            for q in QUERIES:
                client.post("/api/search", json={"q": q})
            for _ in range(rounds):
                for q in QUERIES:
                    t = time.perf_counter()
                    r = client.post("/api/search", json={"q": q})
                    out.append((time.perf_counter() - t) * 1000)
                    assert r.status_code == 200, r.text
    finally:
        server.should_exit = True
        thread.join(5)
    return out


EXCEPTIONS = ["RuntimeError"] * 8 + [
    "ValueError",
    "TypeError",
    "IndexError",
    "KeyError",
    "AttributeError",
    "AssertionError",
    "OSError",
    "UserWarning",
    "NotImplementedError",
]


def add_synthetic(db: Path, n: int, *, corpus: str = "realistic", seed: int = 0) -> None:
    """Insert `n` synthetic entries (3 signatures each) straight into the tables.

    realistic: words drawn from a Zipf-distributed vocabulary of 200,000 words (a few very common,
    most rare, as in real error text), 10% of them real words from our own signatures.
    near-duplicate: every synthetic signature is a real one with 45% of its words swapped, i.e.
    ~1,500 near-copies of each real signature: a worst case for our rarest-token retrieval.
    """
    rng = random.Random(seed)
    conn = sqlite3.connect(db)
    sigs = [r[0] for r in conn.execute("SELECT text FROM signature")]
    real_words = sorted({w for s in sigs for w in s.split()})
    vocab = [
        f"{rng.choice('bcdfghklmnprstvz')}{rng.choice('aeiou')}{rng.choice('bcdfghklmnprstvz')}"
        f"{rng.choice('aeiou')}{i}"
        for i in range(200_000)
    ]
    zipf = list(itertools.accumulate(1 / (r + 1) for r in range(len(vocab))))

    def zipf_words(k: int) -> list[str]:
        return rng.choices(vocab, cum_weights=zipf, k=k)

    def realistic() -> str:
        words = [rng.choice(real_words) if rng.random() < 0.1 else w for w in zipf_words(rng.randint(6, 18))]
        return f"{rng.choice(EXCEPTIONS)}: {' '.join(words)}"

    def near_duplicate() -> str:
        toks = rng.choice(sigs).split()
        for i in range(len(toks)):
            r = rng.random()
            toks[i] = zipf_words(1)[0] if r < 0.35 else rng.choice(real_words) if r < 0.45 else toks[i]
        return " ".join(toks)

    make = realistic if corpus == "realistic" else near_duplicate
    entries, signatures, fts = [], [], []
    for i in range(n):
        slug = f"synthetic-{i}"
        texts = [make() for _ in range(3)]
        title = " ".join(zipf_words(6))
        entries.append(
            (
                slug,
                rng.choice(list(content.CATEGORIES)),
                title,
                title,
                "cause",
                "fix",
                "{}",
                "x",
                "synthetic",
                "2026-01-01 00:00:00",
            )
        )
        for t in texts:
            nz = normalize(t)
            signatures.append((slug, t, " ".join(nz.tokens), " ".join(nz.aux)))
        fts.append((slug, title, title, " ".join(texts)))
    with conn:
        conn.executemany("INSERT INTO entry VALUES (?,?,?,?,?,?,?,?,?,?)", entries)
        conn.executemany("INSERT INTO signature(entry_slug, text, tokens, aux) VALUES (?,?,?,?)", signatures)
        conn.executemany("INSERT INTO entry_fts(slug, title, summary, body) VALUES (?,?,?,?)", fts)
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('generation', 'synthetic')")
    conn.execute("INSERT INTO entry_fts(entry_fts) VALUES ('optimize')")
    conn.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--synthetic", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--content", default=str(ROOT / "content"))
    ap.add_argument("--corpus", choices=["realistic", "near-duplicate"], default="realistic")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pitfalls-bench-"))
    rows = []
    for label, extra in (("real", 0), (f"+{args.synthetic} {args.corpus}", args.synthetic)):
        db = tmp / f"{extra}.db"
        settings = Settings(database_url=f"sqlite:///{db}", content_dir=Path(args.content), local_workers=0)
        migrate(settings)
        engine = make_engine(settings)
        content.sync(engine, settings.content_dir)
        if extra:
            t = time.perf_counter()
            add_synthetic(db, extra, corpus=args.corpus)
            print(f"inserted {extra} synthetic entries in {time.perf_counter() - t:.1f}s", file=sys.stderr)
        n = sqlite3.connect(db).execute("SELECT count(*) FROM entry").fetchone()[0]
        fn = time_function(Searcher(engine), args.rounds)
        settings.sync_on_start = False  # keep the synthetic rows
        http = time_http(settings, max(3, args.rounds // 5))
        rows.append(
            {
                "kb": label,
                "entries": n,
                "queries": len(QUERIES),
                "function_p50_ms": round(statistics.median(fn), 3),
                "function_p99_ms": round(pct(fn, 0.99), 3),
                "http_p50_ms": round(statistics.median(http), 3),
                "http_p99_ms": round(pct(http, 0.99), 3),
            }
        )
    print(
        f"{'knowledge base':<28}{'entries':>9}{'fn p50':>9}{'fn p99':>9}{'http p50':>10}{'http p99':>10}  (ms)"
    )
    for r in rows:
        print(
            f"{r['kb']:<28}{r['entries']:>9}{r['function_p50_ms']:>9}{r['function_p99_ms']:>9}"
            f"{r['http_p50_ms']:>10}{r['http_p99_ms']:>10}"
        )
    big, small = rows[-1], rows[0]
    print(
        f"ratio 100k/real: function p50 x{big['function_p50_ms'] / small['function_p50_ms']:.2f}, "
        f"http p50 x{big['http_p50_ms'] / small['http_p50_ms']:.2f}; goal: function p50 <= 2 ms at 100k -> "
        f"{'met' if big['function_p50_ms'] <= 2 else 'NOT met'}"
    )
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
