"""The real-paste evaluation set (eval/wild) stays what eval/README.md says it is: one case per
thread, unique ids, labels that name entries which exist."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from app.evaluate import load_cases

ROOT = Path(__file__).resolve().parent.parent
WILD = ROOT / "eval" / "wild"
SLUGS = {p.stem for p in (ROOT / "content").glob("*/*.toml")}


def rows() -> list[tuple[str, dict]]:
    return [
        (f.name, json.loads(line))
        for f in sorted(WILD.glob("*.jsonl"))
        for line in f.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]


def test_every_file_loads():
    assert len(load_cases([WILD])) == len(rows()) > 0


def test_case_ids_are_unique():
    repeated = [k for k, n in Counter(r["id"] for _, r in rows()).items() if n > 1]
    assert not repeated


def test_at_most_one_case_per_thread_across_all_files():
    # a thread in two files (worse: in a held-out file and a worked-on one) counts one paste twice
    # (a held-out file is named, never its case ids: a collector learns the thread is taken, no more)
    where: dict[str, list[str]] = {}
    for name, r in rows():
        where.setdefault(r["source"], []).append(name if name.startswith("heldout") else f"{name}:{r['id']}")
    assert {s: w for s, w in where.items() if len(w) > 1} == {}


@pytest.mark.parametrize("field", ["id", "text", "source"])
def test_every_case_has(field):
    assert [r.get("id") for _, r in rows() if not str(r.get(field) or "").strip()] == []


def test_labels_name_entries_that_exist():
    unknown = [(r["id"], s) for _, r in rows() for s in r.get("ok", []) if s not in SLUGS]
    assert unknown == []


def test_a_case_has_entries_or_names_the_missing_one_never_both():
    # `wanted` is for a paste the knowledge base lacks: once an entry explains it, `ok` names it
    odd = [r["id"] for _, r in rows() if bool(r.get("ok")) == bool(r.get("wanted"))]
    assert odd == []
