"""Tables of the team features. Nothing here keeps a raw paste: only normalised error lines."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Index, String
from sqlmodel import Field, SQLModel

from ..models import utcnow


class MissedSearch(SQLModel, table=True):
    """Searches that ended without a confident match, grouped by the template of their error line."""

    __tablename__ = "missed_search"

    id: int | None = Field(default=None, primary_key=True)
    template: str = Field(sa_column=Column(String, nullable=False, unique=True))  # normalised first line
    example: str  # the normalised error lines of one such search (the latest)
    count: int = 1
    first_seen: datetime = Field(default_factory=utcnow)
    last_seen: datetime = Field(default_factory=utcnow, index=True)
    best_slug: str | None = None  # the entry search offered first, without confidence
    draft_path: str | None = None  # relative to the team content folder
    drafted_by: str | None = None
    drafted_at: datetime | None = None


class Feedback(SQLModel, table=True):
    """ "This solved it" or "wrong entry for my error" on an entry, from a search result or its page."""

    __table_args__ = (Index("ix_feedback_entry_verdict", "entry_slug", "verdict"),)

    id: int | None = Field(default=None, primary_key=True)
    entry_slug: str  # no FK: feedback outlives a removed entry
    verdict: str  # solved | wrong
    lines: str = ""  # the normalised error lines of the search it answers ('' from an entry page)
    comment: str = ""
    used_slug: str | None = None  # the entry the user ended up using
    user: str | None = None  # who gave it, when signed in
    created_at: datetime = Field(default_factory=utcnow, index=True)


class TeamNote(SQLModel, table=True):
    """A note from the team content folder attached to an entry (`notes/<slug>.md`)."""

    __tablename__ = "team_note"

    id: int | None = Field(default=None, primary_key=True)
    entry_slug: str = Field(index=True)
    text: str  # Markdown
    path: str  # relative to the team content folder


class TeamAction(SQLModel, table=True):
    """Who did what: drafts created, feedback given, sign-ins with the admin token."""

    __tablename__ = "team_action"

    id: int | None = Field(default=None, primary_key=True)
    at: datetime = Field(default_factory=utcnow, index=True)
    user: str
    action: str
    target: str = ""
    detail: str = ""
