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
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import Table, case, delete, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session, col

from ..config import Settings
from ..models import utcnow
from ..normalize import PLAIN_BESIDE_ERROR, extract, normalize
from .models import MissedSearch

if TYPE_CHECKING:
    from fastapi import Request

log = logging.getLogger("pitfalls")
MAX_LINES = 5
REPEAT_S = 10  # the same template again within this many seconds is the same search (live search)
TYPING_S = 60  # a template extending a one-off miss this recent replaces it (typing)
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
    ex = extract(paste)
    for line, weight in ex.lines:
        # a sentence or log line beside the error: not the error, maybe private; an error read with the
        # source line that raised it: the same error, with the user's code
        if weight <= PLAIN_BESIDE_ERROR or line in ex.raised_by:
            continue
        n = scrub(normalize(scrub(line)).text)[:MAX_LINE].strip()
        if n and n not in seen:
            seen.append(n)
        if len(seen) >= MAX_LINES:
            break
    return seen


# the misses' table, for Core statements on a connection (SQLModel leaves `__table__` untyped)
_MISSES: Table = MissedSearch.metadata.tables["missed_search"]


def _upsert(engine: Engine, table: Table) -> postgresql.Insert | sqlite.Insert:
    """INSERT ... ON CONFLICT for this engine's dialect (SQLite and PostgreSQL both have it)."""
    if engine.dialect.name == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)


def _being_typed(conn: Connection, template: str, now: datetime) -> tuple[int, str] | None:
    """A one-off miss of the last TYPING_S seconds whose template this one extends or shortens:
    the live search asks as the user types, and "RuntimeError: CUDA err" is not a miss of its own."""
    t = _MISSES
    recent = conn.execute(
        select(t.c.id, t.c.template).where(t.c.count == 1, t.c.last_seen >= now - timedelta(seconds=TYPING_S))
    ).all()
    for id_, other in recent:
        if other != template and (template.startswith(other) or other.startswith(template)):
            return id_, other
    return None


def record(
    engine: Engine,
    settings: Settings,
    paste: str,
    *,
    confident: bool,
    best: str | None = None,
    lines: list[str] | None = None,
) -> bool:
    """Count a search that ended without a confident match; True when something was stored.

    Keyed on the template by an upsert, so concurrent misses of one error count right. The live
    search asks while people type or paste, so the same template again within REPEAT_S seconds is
    not counted again, and a template that extends a one-off miss of the last TYPING_S seconds
    replaces it."""
    if confident or not settings.record_misses:
        return False
    lines = error_lines(paste) if lines is None else lines
    if not lines:
        return False
    template, example, now = lines[0], "\n".join(lines), utcnow()
    t = _MISSES
    with engine.begin() as conn:
        if typed := _being_typed(conn, template, now):
            id_, other = typed
            if other.startswith(template):  # a shorter form of a miss just recorded (a deletion)
                return True
            if conn.execute(select(t.c.id).where(t.c.template == template)).first() is None:
                conn.execute(
                    update(t)
                    .where(t.c.id == id_)
                    .values(template=template, example=example, last_seen=now, best_slug=best)
                )
                return True
            conn.execute(delete(t).where(t.c.id == id_))  # the longer form exists already: count it there
        stmt = _upsert(engine, t).values(
            template=template, example=example, count=1, first_seen=now, last_seen=now, best_slug=best
        )
        repeat = t.c.last_seen >= now - timedelta(seconds=REPEAT_S)
        conn.execute(
            stmt.on_conflict_do_update(
                index_elements=[t.c.template],
                set_={
                    "count": case((repeat, t.c.count), else_=t.c.count + 1),
                    "last_seen": now,
                    "example": example,
                    "best_slug": best,
                },
            )
        )
    return True


def on_search(request: Request, paste: str, result: dict[str, Any]) -> str:
    """The hook where searches are served (a search's `as_dict()` or the page's view of it): record
    the search when it missed, and hand back its normalised error lines (what a feedback form may
    carry back; never the paste). A failure to record never fails the search."""
    lines = error_lines(paste)
    state = request.app.state
    hits = result.get("results", result.get("hits")) or []
    try:
        record(
            state.engine,
            state.settings,
            paste,
            confident=bool(result.get("confident")),
            best=hits[0]["slug"] if hits else None,
            lines=lines,
        )
    except Exception:  # noqa: BLE001
        log.exception("recording a missed search failed")
    return "\n".join(lines)


def prune(session: Session, settings: Settings) -> int:
    """Drop misses not seen within the retention period; the number dropped."""
    cutoff = utcnow() - timedelta(days=settings.misses_retention_days)
    n = session.exec(delete(MissedSearch).where(col(MissedSearch.last_seen) < cutoff)).rowcount
    session.commit()
    return n


def listing(session: Session, settings: Settings, *, limit: int = 200) -> list[MissedSearch]:
    """Misses, most frequent first (then most recent), after pruning the expired ones."""
    prune(session, settings)
    query = (
        select(MissedSearch)
        .order_by(col(MissedSearch.count).desc(), col(MissedSearch.last_seen).desc())
        .limit(limit)
    )
    return list(session.scalars(query).all())


def public(m: MissedSearch) -> dict[str, Any]:
    return {
        "id": m.id,
        "template": m.template,
        "example": m.example,
        "count": m.count,
        "first_seen": m.first_seen.isoformat(),
        "last_seen": m.last_seen.isoformat(),
        "best_slug": m.best_slug,
        "draft_path": m.draft_path,
        "drafted_by": m.drafted_by,
        "drafted_at": m.drafted_at.isoformat() if m.drafted_at else None,
    }
