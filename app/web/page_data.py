"""Data for the HTML pages: one function per page, returning plain dicts the templates read.

Routes in `pages.py` stay short (parse -> one of these -> render); the full page and its HTMX
fragment are rendered from the same dict (STYLE.md item 8).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from sqlmodel import Session, col, func, select

from .. import runs
from ..categories import CATEGORIES
from ..content import Expect, Requires
from ..models import Entry, Result, Run, Worker, utcnow
from ..search import Searcher
from . import markup

WORKER_FRESH_S = 60  # a worker seen this recently counts as connected
RECENT = 6


# -- home and categories ---------------------------------------------------------------------------
def categories(session: Session) -> list[dict[str, Any]]:
    """The nine categories with their entry counts, in the fixed order."""
    counts = dict(session.exec(select(Entry.category, func.count()).group_by(Entry.category)).all())
    return [
        {"name": name, "title": title, "description": desc, "count": counts.get(name, 0)}
        for name, (title, desc) in CATEGORIES.items()
    ]


def recently_reproduced(session: Session, limit: int = RECENT) -> list[dict[str, Any]]:
    """Entries with the newest stored outcomes, newest first."""
    newest = func.max(Result.recorded_at)
    rows = session.exec(
        select(Result.entry_slug, newest).group_by(Result.entry_slug).order_by(newest.desc()).limit(limit * 2)
    ).all()
    entries = {
        e.slug: e for e in session.exec(select(Entry).where(col(Entry.slug).in_([r[0] for r in rows]))).all()
    }
    out = []
    for slug, at in rows:
        if slug in entries:
            e = entries[slug]
            out.append(
                {
                    "slug": slug,
                    "title": e.title,
                    "category": e.category,
                    "when": markup.when(at),
                    "iso": markup.iso(at),
                }
            )
    return out[:limit]


def home(session: Session) -> dict[str, Any]:
    return {"categories": categories(session), "recent": recently_reproduced(session)}


def badge(entry: Entry, latest: dict[str, Result]) -> dict[str, Any]:
    """Verification badge from the latest stored outcomes: passed / failed / partial / not yet run."""
    if not latest:
        return {"state": "none", "label": "not yet run", "detail": "No stored run for the current snippets."}
    newest = max(latest.values(), key=lambda r: r.recorded_at)
    where = f"{newest.device} · torch {newest.torch_version} · {markup.when(newest.recorded_at)}"
    has_fixed = entry.spec.fixed is not None
    expected = [latest[p].expected for p in runs.PARTS if p in latest]
    if any(x is False for x in expected):
        return {"state": "fail", "label": "failed", "detail": f"did not behave as described on {where}"}
    if all(x is True for x in expected) and ("fixed" in latest or not has_fixed) and "broken" in latest:
        return {"state": "pass", "label": "verified", "detail": f"passed on {where}"}
    return {"state": "partial", "label": "partly run", "detail": f"last run on {where}"}


def category(session: Session, name: str) -> dict[str, Any] | None:
    """A category's entries, each with its summary and verification badge; None if unknown."""
    if name not in CATEGORIES:
        return None
    title, description = CATEGORIES[name]
    items = []
    for e in session.exec(select(Entry).where(Entry.category == name).order_by(Entry.title)).all():
        items.append(
            {
                "slug": e.slug,
                "title": e.title,
                "summary": markup.markdown_inline(e.summary),
                "needs": needs(e.spec.requires),
                "badge": badge(e, runs.latest_results(session=session, entry=e)),
            }
        )
    return {"name": name, "title": title, "description": description, "entries": items}


def needs(requires: Requires) -> list[str]:
    """Short requirement tags: "CUDA GPU", "2 GPUs", "onnx"."""
    tags = []
    if requires.gpus > 1:
        tags.append(f"{requires.gpus} GPUs")
    elif requires.cuda or requires.gpus == 1:
        tags.append("CUDA GPU")
    tags.extend(requires.packages)
    return tags


# -- search ----------------------------------------------------------------------------------------
def search(searcher: Searcher, q: str) -> dict[str, Any]:
    """Results for a paste, with marks, what was ignored, and the closest categories when unsure.

    Raises `search.QueryError` for empty or oversized text.
    """
    result = searcher.search(q)
    hits = []
    for h in result.results:
        matched = markup.mark_shared(h.matched, h.line) if h.kind == "signature" else h.matched
        hits.append(
            {
                "slug": h.slug,
                "title": h.title,
                "category": h.category,
                "category_title": CATEGORIES.get(h.category, (h.category,))[0],
                "score": h.score,
                "kind": h.kind,
                "matched": matched,
                "line": h.line,
            }
        )
    closest: dict[str, float] = defaultdict(float)
    for h in result.results:
        closest[h.category] += h.score
    return {
        "q": q,
        "confident": result.confident,
        "hits": hits,
        "lines": result.lines,
        "ignored": markup.ignored_summary(result.ignored),
        "closest": [
            {"name": c, "title": CATEGORIES.get(c, (c,))[0]}
            for c in sorted(closest, key=lambda c: -closest[c])[:3]
        ],
    }


# -- entries and runs ------------------------------------------------------------------------------
def _expect_text(expect: Expect) -> str:
    if expect.outcome == "raised":
        text = f"should raise {expect.exc_type or 'an exception'}"
    elif expect.outcome == "warned":
        text = f"should warn ({expect.warning or 'a warning'})"
    elif expect.outcome == "wrong":
        text = "should finish with a silently wrong result"
    else:
        text = "should finish cleanly"
    if expect.match:
        text += f" matching “{expect.match}”"
    return text


def entry(session: Session, e: Entry, searcher: Searcher) -> dict[str, Any]:
    """Everything the entry page shows except the run panel."""
    spec = e.spec
    broken, fixed = spec.broken, spec.fixed
    left, right = markup.diff_snippets(broken.code, fixed.code if fixed else "")
    requires = spec.requires
    return {
        "slug": e.slug,
        "title": e.title,
        "category": e.category,
        "category_title": CATEGORIES.get(e.category, (e.category,))[0],
        "summary": markup.markdown(e.summary),
        "cause": markup.markdown(e.cause),
        "fix": markup.markdown(e.fix),
        "signatures": spec.signatures,
        "tags": spec.tags,
        "torch": spec.torch,
        "sources": spec.sources,
        "needs": needs(requires),
        "fresh_process": requires.fresh_process,
        "reproducible": requires.reproducible,
        "broken": {"lines": left, "expect": _expect_text(broken.expect)},
        "fixed": {"lines": right, "expect": _expect_text(fixed.expect)} if fixed else None,
        "badge": badge(e, runs.latest_results(session=session, entry=e)),
        "other_causes": [
            {"slug": h.slug, "title": h.title} for h in searcher.other_causes(e.slug, spec.signatures)
        ],
    }


def outcome(part: str, o: Mapping[str, Any], at: datetime | None) -> dict[str, Any]:
    """One snippet's outcome, every optional field defaulted, for the outcome card."""
    return {
        "part": part,
        "outcome": o.get("outcome") or "unknown",
        "exc_type": o.get("exc_type") or "",
        "message": o.get("message") or "",
        "traceback": o.get("traceback") or "",
        "warnings": o.get("warnings") or [],
        "stdout": o.get("stdout") or "",
        "stderr": o.get("stderr") or "",
        "truncated": bool(o.get("truncated")),
        "duration": markup.duration(o.get("duration_ms")),
        "device": o.get("device") or "",
        "torch_version": o.get("torch_version") or "",
        "expected": o.get("expected"),
        "reason": o.get("reason") or "",
        "when": markup.when(at),
        "iso": markup.iso(at),
    }


def _workers_connected(session: Session, *, gpus: int = 0) -> bool:
    """Whether a worker (with at least `gpus` GPUs) checked in lately."""
    fresh = utcnow() - timedelta(seconds=WORKER_FRESH_S)
    return (
        session.exec(
            select(func.count()).select_from(Worker).where(Worker.last_seen > fresh, Worker.gpus >= gpus)
        ).one()
        > 0
    )


def _gpus_needed(e: Entry) -> int:
    requires = e.spec.requires
    return max(requires.gpus, 1 if requires.cuda else 0)


def panel(
    session: Session, *, slug: str, e: Entry | None, run: Run | None = None, message: str = ""
) -> dict[str, Any]:
    """The outcomes panel: a run's state and results, or the latest stored outcomes of the entry."""
    out: dict[str, Any] = {
        "slug": slug,
        "can_run": e is not None,
        "run": None,
        "polling": False,
        "outcomes": [],
        "source": "none",
        "message": message,
        "needs_gpus": 0,
        "gpu_missing": False,
    }
    if e is not None and (needed := _gpus_needed(e)):
        # say so before the click: on a server without such a worker, the run would only be skipped
        out["needs_gpus"] = needed
        out["gpu_missing"] = not _workers_connected(session, gpus=needed)
    if run is not None:
        pending = run.state != "done"
        ahead = 0
        if run.state == "queued":
            ahead = session.exec(
                select(func.count()).select_from(Run).where(Run.state == "queued", col(Run.id) < run.id)
            ).one()
        out["run"] = {
            "id": run.id,
            "state": run.state,
            "ahead": ahead,
            "interrupted": bool(run.job.get("interrupted")),
            "no_workers": pending and not _workers_connected(session),
            "when": markup.when(run.finished_at or run.created_at),
        }
        out["polling"] = pending
        if not pending:
            out["source"] = "run"
            out["outcomes"] = [
                outcome(p, run.results[p], run.finished_at) for p in runs.PARTS if p in run.results
            ]
            return out
    if e is not None:
        latest = runs.latest_results(session=session, entry=e)
        if latest:
            out["source"] = "stored"
            out["outcomes"] = [
                outcome(p, latest[p].outcome, latest[p].recorded_at) for p in runs.PARTS if p in latest
            ]
    return out
