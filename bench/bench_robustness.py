"""Search robustness: each signature of the knowledge base pasted the ways users paste it.

    python bench/bench_robustness.py [--sample 400] [--seed 7] [--show KIND]

For a random sample of signatures, searches six variants of each and prints, per variant, how often
the signature's entry is first, in the top three, and first *and* confident:

    exact       the signature as written
    prose       inside a sentence ("I keep getting this when I run train.py: ... any idea?")
    traceback   after a Python traceback with the user's own paths
    backticks   in Markdown backticks
    truncated   cut after 60 % of its words (issue titles, half-copied lines)
    no-type     without its `RuntimeError:`-style prefix

Unlike the real-paste evaluation (bench_eval.py) this needs no labels, so it covers every entry;
unlike it, the variants are made up: use it to find a kind of paste that search handles badly, and
the real pastes to decide. `--show KIND` lists the misses of one variant.
"""

from __future__ import annotations

import argparse
import random
import re
import sqlite3
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app import content  # noqa: E402
from app.config import Settings  # noqa: E402
from app.db import make_engine, migrate  # noqa: E402
from app.search import Searcher  # noqa: E402

EXC = re.compile(r"^([\w.]+(?:Error|Exception|Warning)):\s*")
TRACEBACK = (
    'Traceback (most recent call last):\n  File "/home/u/proj/train.py", line 88, in <module>\n'
    '    main()\n  File "/home/u/proj/train.py", line 61, in main\n    out = model(x)\n'
)


def variants(sig: str) -> dict[str, str]:
    v = {
        "exact": sig,
        "prose": f"I keep getting this when I run train.py: {sig} any idea?",
        "traceback": TRACEBACK + sig,
        "backticks": f"`{sig}`",
    }
    words = sig.split()
    if len(words) > 8:
        v["truncated"] = " ".join(words[: max(6, int(len(words) * 0.6))])
    if EXC.match(sig) and EXC.sub("", sig).strip():  # (a signature that is only a type has no message)
        v["no-type"] = EXC.sub("", sig)
    return v


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sample", type=int, default=400)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--show", help="list the misses of one variant")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(database_url=f"sqlite:///{tmp}/bench.db", content_dir=ROOT / "content")
        migrate(settings)
        engine = make_engine(settings)
        content.sync(engine, settings.content_dir)
        searcher = Searcher.from_settings(engine, settings)
        with sqlite3.connect(f"{tmp}/bench.db") as conn:
            rows = conn.execute("SELECT entry_slug, text FROM signature").fetchall()
        owners: dict[str, set[str]] = defaultdict(set)  # the same text in several entries: any counts
        for slug, text in rows:
            owners[text].add(slug)
        random.Random(args.seed).shuffle(rows)
        counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # n, first, top-3, confident
        misses: dict[str, list[str]] = defaultdict(list)
        for _slug, text in rows[: args.sample]:
            ok = owners[text]
            for kind, paste in variants(text).items():
                result = searcher.search(paste)
                ranked = [h.slug for h in result.results]
                c = counts[kind]
                c[0] += 1
                c[1] += bool(ranked) and ranked[0] in ok
                c[2] += any(s in ok for s in ranked[:3])
                c[3] += result.confident and bool(ranked) and ranked[0] in ok
                if not (result.confident and ranked and ranked[0] in ok):
                    misses[kind].append(f"{ranked[0] if ranked else '-':45} {text[:100]}")
        engine.dispose()
    print(f"{len(rows)} signatures, {min(args.sample, len(rows))} sampled (seed {args.seed})")
    print(f"{'variant':10} {'n':>5} {'first':>7} {'top-3':>7} {'first+confident':>16}")
    for kind, (n, first, top3, conf) in counts.items():
        print(f"{kind:10} {n:5d} {first / n:7.1%} {top3 / n:7.1%} {conf / n:16.1%}")
    for line in misses.get(args.show or "", []):
        print("  ", line)


if __name__ == "__main__":
    main()
