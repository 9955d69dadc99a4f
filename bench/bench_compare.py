"""Search quality of two git revisions side by side, on the same pastes and the same content.

    python bench/bench_compare.py OLD [NEW] [--content REV] [--eval PATH ...] [--list]
    python bench/bench_compare.py OLD [NEW] --fresh [--list]

OLD and NEW are git revisions; NEW defaults to the working tree. Each side's search code runs in a
process of its own, from an export of its revision (`git archive`), with the same hash seed, so the
only difference between the two columns is the code. Every side scores the same case files against
one content tree:

- `--content` left out: the content of NEW. This measures a matching change on today's knowledge base.
- `--content REV`: the content as it stood at REV. Cases collected later are scored against entries
  nobody wrote for them; a case whose acceptable entries did not exist yet counts as uncovered.
- `--fresh`: every pool of eval/fresh-pools.toml (case files collected after a content revision, on
  that content), one row each and all together: how search fares on pastes it has not been fitted to.

`--eval` defaults to every case file but the held-out ones (nothing may be chosen on those). The
figures are those of `pitfalls eval`; `--list` also prints each case whose verdict moved.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.evaluate import Case, Outcome, Report, changes, load_cases, verdicts  # noqa: E402

# Runs inside a revision's export: sync the content into a fresh database, search every case,
# print one JSON line per case. Uses only APIs every revision since the evaluation set has.
SCORER = """
import json, sys
from pathlib import Path
from app import content
from app.config import Settings
from app.db import make_engine, migrate
from app.search import Searcher
db, content_dir = sys.argv[1], Path(sys.argv[2])
settings = Settings(database_url=f"sqlite:///{db}", content_dir=content_dir)
migrate(settings)
engine = make_engine(settings)
content.sync(engine, content_dir)
searcher = Searcher.from_settings(engine, settings)
for line in sys.stdin:
    case = json.loads(line)
    r = searcher.search(case["text"])
    hits = [h.slug for h in r.results]
    print(json.dumps({"id": case["id"], "ranked": hits[:10], "confident": r.confident,
                      "score": r.results[0].score if r.results else 0.0}))
"""


CODE = ("app", "migrations")  # what a side's search needs: the package and its schema


def export(rev: str, into: Path, paths: tuple[str, ...]) -> Path:
    """The files of `paths` as they are at `rev`, unpacked under `into`."""
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", rev, *paths], cwd=ROOT, capture_output=True, check=True
    ).stdout
    tar_path = into / "rev.tar"
    tar_path.write_bytes(archive)
    with tarfile.open(tar_path) as tar:
        tar.extractall(into, filter="data")
    tar_path.unlink()
    return into


def score(code: Path, content_dir: Path, cases: list[Case], tmp: Path) -> dict[str, dict[str, Any]]:
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(code)}
    env.pop("PITFALLS_DATABASE_URL", None)
    env.pop("PITFALLS_CONTENT_DIR", None)
    db = Path(tempfile.mkdtemp(dir=tmp)) / "search.db"  # a fresh database for each code and content
    stdin = "".join(json.dumps({"id": c.id, "text": c.text}) + "\n" for c in cases)
    done = subprocess.run(
        [sys.executable, "-c", SCORER, str(db), str(content_dir)],
        cwd=code,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        sys.exit(f"scoring with the code at {code} failed:\n{done.stderr[-3000:]}")
    return {row["id"]: row for row in map(json.loads, done.stdout.splitlines())}


def report(cases: list[Case], scored: dict[str, dict[str, Any]]) -> Report:
    return Report(
        [Outcome(c, scored[c.id]["confident"], scored[c.id]["ranked"], scored[c.id]["score"]) for c in cases]
    )


def as_of(cases: list[Case], content_dir: Path) -> list[Case]:
    """The cases as that content saw them: acceptable entries it did not have yet don't count."""
    known = {p.stem for p in content_dir.glob("*/*.toml")}  # category/slug.toml
    return [Case(c.id, c.text, tuple(s for s in c.ok if s in known), c.source, c.wanted) for c in cases]


def compare(
    codes: tuple[Path, Path], content_dir: Path, cases: list[Case], tmp: Path
) -> tuple[Report, Report]:
    old, new = (report(cases, score(code, content_dir, cases, tmp)) for code in codes)
    return old, new


def row(label: str, rep: Report) -> str:
    f = rep.figures()
    return (
        f"{label[:28]:28} {f['cases']:5d} {f['coverage']:6.1%} {f['top1_confident_right']:6.1%} {f['top3']:6.1%} "
        f"{f['wrong_confident']:7.1%} {f['abstain_uncovered']:7.1%} {f['confident_precision']:6.1%}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new", nargs="?", help="a revision (default: the working tree)")
    ap.add_argument("--content", help="score against the content at this revision (default: NEW's)")
    ap.add_argument("--eval", nargs="+", type=Path, help="case files or folders (default: all but held-out)")
    ap.add_argument("--fresh", action="store_true", help="the pools of eval/fresh-pools.toml")
    ap.add_argument("--list", action="store_true", help="print every case whose verdict moved")
    args = ap.parse_args()
    wild = ROOT / "eval" / "wild"
    if args.fresh:
        pools = tomllib.loads((ROOT / "eval" / "fresh-pools.toml").read_text())["pool"]
        runs = [(p["content"], sorted({f for g in p["files"] for f in wild.glob(g)})) for p in pools]
    else:
        files = args.eval or [f for f in sorted(wild.glob("*.jsonl")) if "heldout" not in f.name]
        runs = [(args.content or args.new, files)]
    new_label = args.new or "working tree"

    sides: tuple[list[Outcome], list[Outcome]] = ([], [])
    print(
        f"{'':28} {'cases':>5} {'cover':>6} {'top1':>6} {'top3':>6} {'wrong+c':>7} {'abstain':>7} {'prec':>6}"
    )
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        codes = (
            export(args.old, tmp / "old", CODE),
            export(args.new, tmp / "new", CODE) if args.new else ROOT,
        )
        for n, (content_rev, files) in enumerate(runs):
            where = tmp / f"content-{n}"
            content_dir = (
                export(content_rev, where, ("content",)) / "content" if content_rev else ROOT / "content"
            )
            entries = len(list(content_dir.glob("*/*.toml")))
            before, after = compare(codes, content_dir, as_of(load_cases(files), content_dir), tmp)
            print(
                f"{len(files)} files on the content of {content_rev or 'the working tree'} ({entries} entries):"
            )
            print(row(f"  {args.old}", before))
            print(row(f"  {new_label}", after))
            sides[0].extend(before.outcomes)
            sides[1].extend(after.outcomes)
    before, after = Report(sides[0]), Report(sides[1])
    if len(runs) > 1:
        print("all pools:")
        print(row(f"  {args.old}", before))
        print(row(f"  {new_label}", after))
    right = [sum(o.right for o in rep.outcomes) for rep in (before, after)]
    wrong = [sum(o.wrong_confident for o in rep.outcomes) for rep in (before, after)]
    moved = changes(verdicts(before), after)
    print(
        f"right {right[0]} -> {right[1]}, wrong and confident {wrong[0]} -> {wrong[1]}; "
        f"{len(moved['better'])} cases better, {len(moved['worse'])} worse"
    )
    if args.list:
        for side in ("better", "worse"):
            for case_id, was, now in moved[side]:
                print(f"  {side:6} {case_id:14} {was} -> {now}")


if __name__ == "__main__":
    main()
