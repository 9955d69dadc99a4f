"""Feedback on entries: "this solved it" / "wrong entry for my error".

From a search result it keeps the search's error lines (normalised and scrubbed like missed
searches, never the raw paste); from an entry page, none. Feedback never changes ranking: curators
see per-entry counts and the misrouted pastes, and `export` writes the misrouted ones as evaluation
cases (`pitfalls eval` reads them), so real misses become test cases.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, TypeGuard, get_args

from sqlalchemy import func
from sqlmodel import Session, col, select

from ..models import Entry
from . import audit
from .misses import error_lines
from .models import Feedback

Verdict = Literal["solved", "wrong"]
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)
MAX_COMMENT = 2000


def is_verdict(text: str) -> TypeGuard[Verdict]:
    return text in VERDICTS


class FeedbackError(ValueError):
    """Feedback that can't be stored (an unknown entry); the message says which. `status`: 404 when
    the entry it is about is unknown, 422 when the entry named as the right one is."""

    def __init__(self, message: str, status: int = 422):
        super().__init__(message)
        self.status = status


def give(
    session: Session,
    *,
    slug: str,
    verdict: Verdict,
    paste: str = "",
    comment: str = "",
    used: str | None = None,
    user: str | None = None,
) -> Feedback:
    """Store one piece of feedback (and who gave it)."""
    if session.get(Entry, slug) is None:
        raise FeedbackError(f"no entry {slug!r}", 404)
    used = (used or "").strip() or None
    if used is not None and session.get(Entry, used) is None:
        raise FeedbackError(f"no entry {used!r} (the entry you ended up using)")
    fb = Feedback(
        entry_slug=slug,
        verdict=verdict,
        lines="\n".join(error_lines(paste)) if paste.strip() else "",
        comment=comment.strip()[:MAX_COMMENT],
        used_slug=used if verdict == "wrong" else None,
        user=user,
    )
    session.add(fb)
    audit.log(
        session, user, f"feedback: {verdict}", slug, f"used {used}" if used and verdict == "wrong" else ""
    )
    session.commit()
    session.refresh(fb)
    return fb


def counts(session: Session) -> list[dict[str, Any]]:
    """Per entry: how often it solved it and how often it was the wrong entry, most reported first."""
    rows = session.exec(
        select(Feedback.entry_slug, Feedback.verdict, func.count()).group_by(
            Feedback.entry_slug, Feedback.verdict
        )
    ).all()
    per: dict[str, dict[str, Any]] = {}
    for slug, verdict, n in rows:
        per.setdefault(slug, {"slug": slug, "solved": 0, "wrong": 0})[verdict] = n
    titles = (
        dict(session.exec(select(Entry.slug, Entry.title).where(col(Entry.slug).in_(list(per)))).all())
        if per
        else {}
    )
    out = [d | {"title": titles.get(d["slug"], d["slug"])} for d in per.values()]
    return sorted(out, key=lambda d: (-d["wrong"] - d["solved"], d["slug"]))


def misrouted(session: Session, limit: int | None = None) -> list[Feedback]:
    """'Wrong entry' reports that carry the search's error lines, newest first."""
    query = (
        select(Feedback)
        .where(Feedback.verdict == "wrong", Feedback.lines != "")
        .order_by(col(Feedback.created_at).desc(), col(Feedback.id).desc())
    )
    return list(session.exec(query.limit(limit) if limit else query).all())


def case(fb: Feedback) -> dict[str, Any]:
    """One evaluation case (eval/README.md): `ok` is the entry the user ended up using, or empty
    (the right answer is to abstain) when they named none; `wrong` is the entry search gave."""
    return {
        "id": f"feedback-{fb.id}",
        "text": fb.lines,
        "source": f"feedback #{fb.id}" + (f" by {fb.user}" if fb.user else ""),
        "ok": [fb.used_slug] if fb.used_slug else [],
        "wanted": None
        if fb.used_slug
        else (fb.comment or "reported as the wrong entry; no right entry named"),
        "wrong": fb.entry_slug,
        "notes": fb.comment,
        "created_at": fb.created_at.isoformat(),
    }


def export(session: Session, path: Path) -> int:
    """Write the misrouted pastes as JSONL evaluation cases; the number written."""
    rows = misrouted(session)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for fb in sorted(rows, key=lambda r: r.id or 0):  # stored rows always have an id
            f.write(json.dumps(case(fb), ensure_ascii=False) + "\n")
    return len(rows)


def public(fb: Feedback) -> dict[str, Any]:
    return {
        "id": fb.id,
        "entry": fb.entry_slug,
        "verdict": fb.verdict,
        "lines": fb.lines.split("\n") if fb.lines else [],
        "comment": fb.comment,
        "used": fb.used_slug,
        "user": fb.user,
        "created_at": fb.created_at.isoformat(),
    }
