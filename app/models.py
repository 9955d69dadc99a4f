"""Database tables. Entries and signatures come from content files; runs and workers from use."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any

from sqlalchemy import JSON, Column, ForeignKey, Index, Integer, String, UniqueConstraint
from sqlmodel import Field, SQLModel

if TYPE_CHECKING:
    from .content import EntryFile


def utcnow() -> datetime:
    return datetime.now(UTC)


class Entry(SQLModel, table=True):
    """One pitfall, as loaded from `content/<category>/<slug>.toml`."""

    slug: str = Field(primary_key=True)
    category: str = Field(index=True)
    title: str
    summary: str
    cause: str
    fix: str
    data: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))  # everything else in the file
    content_hash: str
    path: str
    updated_at: datetime = Field(default_factory=utcnow)

    @cached_property
    def spec(self) -> EntryFile:
        """The entry read through its file's content model (`app.content.EntryFile`): typed, with
        the file format's defaults. Validated once per loaded row (a sync writes rows, nothing
        changes them); read entry data here, never from `data` itself."""
        from .content import EntryFile  # noqa: PLC0415  (app.content imports this module)

        return EntryFile.from_row(self)


class Signature(SQLModel, table=True):
    """An error text of an entry, with its tokens for matching (`app.normalize`)."""

    id: int | None = Field(default=None, primary_key=True)
    entry_slug: str = Field(
        sa_column=Column(String, ForeignKey("entry.slug", ondelete="CASCADE"), index=True)
    )
    text: str
    tokens: str  # space-joined main tokens
    aux: str  # space-joined low-weight tokens (quoted names, dtypes)


class Run(SQLModel, table=True):
    """One press of Reproduce: the broken and the fixed snippet of an entry."""

    __table_args__ = (Index("ix_run_state_lease", "state", "lease_expires"),)

    id: int | None = Field(default=None, primary_key=True)
    entry_slug: str = Field(index=True)  # no FK: run history outlives a removed entry
    state: str = Field(default="queued", index=True)  # queued | running | done
    job: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    results: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    worker_id: str | None = None
    lease: str | None = None
    lease_expires: datetime | None = None
    attempts: int = Field(default=0, sa_column=Column(Integer, nullable=False, default=0))
    created_at: datetime = Field(default_factory=utcnow, index=True)
    started_at: datetime | None = None
    finished_at: datetime | None = None


class Result(SQLModel, table=True):
    """Latest outcome per snippet, keyed by snippet hash, torch version and device."""

    __table_args__ = (
        UniqueConstraint(
            "entry_slug", "part", "snippet_hash", "torch_version", "device", name="uq_result_key"
        ),
        Index("ix_result_latest", "entry_slug", "part", "snippet_hash", "recorded_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    entry_slug: str = Field(index=True)
    part: str  # broken | fixed
    snippet_hash: str = Field(index=True)
    torch_version: str
    device: str
    outcome: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    expected: bool | None = None
    run_id: int | None = None
    recorded_at: datetime = Field(default_factory=utcnow)


class Worker(SQLModel, table=True):
    """A worker seen by the service (local or remote)."""

    id: str = Field(primary_key=True)
    device: str
    torch_version: str
    gpus: int = 0
    hostname: str = ""
    concurrency: int = 1
    last_seen: datetime = Field(default_factory=utcnow)


class Meta(SQLModel, table=True):
    """Small key/value facts, e.g. the content generation that search caches are keyed on."""

    key: str = Field(primary_key=True)
    value: str
