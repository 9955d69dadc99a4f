"""Missed searches: searches that ended without a confident match, kept as normalised error lines.

The raw paste is never stored. Its error lines go through the same normaliser as search (paths,
user names inside paths, numbers, sizes, shapes, addresses, quoted names set aside), and `scrub`
then removes what could still name a person or a machine (e-mail addresses, home folders, host
names). Misses are grouped by the template of their first error line, with a count, first and last
seen, and the latest example; `prune` drops those not seen within the retention period.
"""

from __future__ import annotations

import logging
import re
from datetime import timedelta

from sqlalchemy import delete
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from ..config import Settings
from ..models import utcnow
from ..normalize import extract, normalize
from .models import MissedSearch

log = logging.getLogger("pitfalls")
MAX_LINES = 5
MAX_LINE = 500

# What the normaliser leaves that can still identify someone: a lone home folder ("/home/ana",
# "~ana", "C:\Users\ana"), an e-mail address, user@host prompts, and host names in URLs it kept.
SCRUB = [
    (re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"), "_email_"),
    (re.compile(r"\b[\w.-]+@[\w.-]+"), "_user_"),
    (re.compile(r"(?:[A-Za-z]:)?[\\/](?:home|Users|users|root)[\\/][^\s\"'<>|:,;)]*"), "_path_"),
    (re.compile(r"(?<![\w/])~[\w.-]*(?:[\\/][^\s\"'<>|:,;)]*)?"), "_path_"),
    (re.compile(r"\b[A-Za-z]:\\[^\s\"'<>|:,;)]*"), "_path_"),
]


def scrub(text: str) -> str:
    for pattern, placeholder in SCRUB:
        text = pattern.sub(placeholder, text)
    return text


def error_lines(paste: str) -> list[str]:
    """The paste's error lines, normalised and scrubbed: what the team features keep of a paste."""
    seen: list[str] = []
    for line, _weight in extract(paste).lines:
        n = scrub(normalize(scrub(line)).text)[:MAX_LINE].strip()
        if n and n not in seen:
            seen.append(n)
        if len(seen) >= MAX_LINES:
            break
    return seen


def _upsert(engine: Engine):
    """INSERT ... ON CONFLICT for this engine's dialect (SQLite and PostgreSQL both have it)."""
    if engine.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert  # noqa: PLC0415
    else:
        from sqlalchemy.dialects.sqlite import insert  # noqa: PLC0415
    return insert


def record(engine: Engine, settings: Settings, paste: str, *, confident: bool, best: str | None = None,
           lines: list[str] | None = None) -> bool:
    """Count a search that ended without a confident match; True when something was stored.

    One statement (an upsert keyed on the template), so that concurrent misses of one error
    count right and a search pays one write."""
    if confident or not settings.record_misses:
        return False
    lines = error_lines(paste) if lines is None else lines
    if not lines:
        return False
    template, example, now = lines[0], "\n".join(lines), utcnow()
    table = MissedSearch.__table__
    stmt = _upsert(engine)(table).values(template=template, example=example, count=1, first_seen=now,
                                          last_seen=now, best_slug=best)
    stmt = stmt.on_conflict_do_update(index_elements=[table.c.template], set_={
        "count": table.c.count + 1, "last_seen": now, "example": example, "best_slug": best})
    with engine.begin() as conn:
        conn.execute(stmt)
    return True


def on_search(request, paste: str, result: dict) -> str:
    """The hook where searches are served (a search's `as_dict()` or the page's view of it): record
    the search when it missed, and hand back its normalised error lines (what a feedback form may
    carry back; never the paste). A failure to record never fails the search."""
    lines = error_lines(paste)
    state = request.app.state
    hits = result.get("results", result.get("hits")) or []
    try:
        record(state.engine, state.settings, paste, confident=bool(result.get("confident")),
               best=hits[0]["slug"] if hits else None, lines=lines)
    except Exception:  # noqa: BLE001
        log.exception("recording a missed search failed")
    return "\n".join(lines)


def prune(session: Session, settings: Settings) -> int:
    """Drop misses not seen within the retention period; the number dropped."""
    cutoff = utcnow() - timedelta(days=settings.misses_retention_days)
    n = session.execute(delete(MissedSearch).where(MissedSearch.last_seen < cutoff)).rowcount
    session.commit()
    return n


def listing(session: Session, settings: Settings, *, limit: int = 200) -> list[MissedSearch]:
    """Misses, most frequent first (then most recent), after pruning the expired ones."""
    prune(session, settings)
    query = select(MissedSearch).order_by(MissedSearch.count.desc(), MissedSearch.last_seen.desc()).limit(limit)
    return list(session.exec(query).all())


def public(m: MissedSearch) -> dict:
    return {"id": m.id, "template": m.template, "example": m.example, "count": m.count,
            "first_seen": m.first_seen.isoformat(), "last_seen": m.last_seen.isoformat(),
            "best_slug": m.best_slug, "draft_path": m.draft_path, "drafted_by": m.drafted_by,
            "drafted_at": m.drafted_at.isoformat() if m.drafted_at else None}

