"""Read entry files from `content/`, validate them, and sync them into the database.

A file with a mistake stops the whole sync with the file, the field and the problem; the sync runs
in one transaction, so nothing already loaded is lost.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from sqlalchemy import delete, text
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from .categories import CATEGORIES
from .models import Entry, Meta, Signature, utcnow
from .normalize import VERSION as NORMALIZE_VERSION
from .normalize import normalize
from .sandbox import contracts

SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
# The validation context of an entry read back from the database (`Entry.spec`): its file was
# validated in full when synced, so the snippets' syntax is not compiled again on every read.
STORED = {"stored": True}


def _stored(info: ValidationInfo) -> bool:
    return bool(info.context and info.context.get("stored"))


class Expect(BaseModel):
    model_config = ConfigDict(extra="forbid")
    outcome: Literal["raised", "warned", "ok", "wrong"]
    exc_type: str | None = None
    warning: str | None = None
    match: str | None = None

    @field_validator("match")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from None
        return v

    @model_validator(mode="after")
    def _keys_fit_outcome(self) -> Expect:
        if self.outcome == "raised" and not self.exc_type:
            raise ValueError("outcome 'raised' needs exc_type")
        if self.outcome != "raised" and self.exc_type:
            raise ValueError(f"exc_type only goes with outcome 'raised', not {self.outcome!r}")
        if self.outcome != "warned" and self.warning:
            raise ValueError(f"warning only goes with outcome 'warned', not {self.outcome!r}")
        return self

    def as_contract(self) -> contracts.Expect:
        """The sandbox's form (what `judge` reads): the keys that are set, as the file has them."""
        out: contracts.Expect = {"outcome": self.outcome}
        if self.exc_type is not None:
            out["exc_type"] = self.exc_type
        if self.warning is not None:
            out["warning"] = self.warning
        if self.match is not None:
            out["match"] = self.match
        return out


class Snippet(BaseModel):
    model_config = ConfigDict(extra="forbid")
    code: str = Field(min_length=1)
    expect: Expect
    check: str | None = None

    @field_validator("code")
    @classmethod
    def _compiles(cls, v: str, info: ValidationInfo) -> str:
        if _stored(info):
            return v
        try:
            compile(v, "snippet.py", "exec")
        except SyntaxError as exc:
            raise ValueError(f"Python syntax error on line {exc.lineno}: {exc.msg}") from None
        return v


class Requires(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cuda: bool = False
    gpus: int = Field(0, ge=0, le=16)
    packages: list[str] = []
    fresh_process: bool = False
    reproducible: bool = True

    def as_contract(self) -> contracts.Requires:
        return {
            "cuda": self.cuda,
            "gpus": self.gpus,
            "packages": list(self.packages),
            "fresh_process": self.fresh_process,
            "reproducible": self.reproducible,
        }


class EntryFile(BaseModel):
    """The schema of one `content/<category>/<slug>.toml` file."""

    model_config = ConfigDict(extra="forbid")
    title: str = Field(min_length=3, max_length=200)
    summary: str = Field(min_length=10)
    cause: str = Field(min_length=10)
    fix: str = Field(min_length=10)
    signatures: list[str] = Field(min_length=1)
    tags: list[str] = []
    torch: str = ""
    seeds: list[str] = []
    sources: list[str] = []
    check: str | None = None
    requires: Requires = Requires()
    broken: Snippet
    fixed: Snippet | None = None

    @field_validator("signatures")
    @classmethod
    def _non_empty(cls, v: list[str]) -> list[str]:
        for i, s in enumerate(v):
            if not s.strip():
                raise ValueError(f"signature {i + 1} is empty")
        return v

    @field_validator("check")
    @classmethod
    def _check_regex(cls, v: str | None) -> str | None:
        return Expect._regex(v)

    @model_validator(mode="after")
    def _fixed_needed(self) -> EntryFile:
        if self.fixed is None and self.requires.reproducible:
            raise ValueError("fixed is missing (only entries with requires.reproducible = false may omit it)")
        return self

    @classmethod
    def from_row(cls, e: Entry) -> EntryFile:
        """A synced entry read back: its row's texts and `data` (what `entry_row` stored)."""
        texts = {"title": e.title, "summary": e.summary, "cause": e.cause, "fix": e.fix}
        return cls.model_validate({**e.data, **texts}, context=STORED)

    def snippet(self, part: str) -> Snippet | None:
        """The broken or the fixed snippet (None: an entry without a fixed one)."""
        if part == "broken":
            return self.broken
        if part == "fixed":
            return self.fixed
        raise ValueError(f"no snippet part {part!r}")

    def check_of(self, snippet: Snippet) -> str | None:
        """The stdout check a snippet runs with: its own, else the entry's."""
        return snippet.check if snippet.check is not None else self.check


class ContentError(Exception):
    """A content file is wrong; the message names the file, the field and the problem."""


@dataclass
class LoadedEntry:
    slug: str
    category: str
    path: str
    spec: EntryFile
    content_hash: str


@dataclass
class SyncReport:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0

    def __str__(self) -> str:
        return (
            f"{len(self.added)} added, {len(self.updated)} updated, {len(self.removed)} removed, "
            f"{self.unchanged} unchanged"
        )


def _location(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in loc) or "(file)"


def load_file(path: Path, root: Path) -> LoadedEntry:
    """Parse and validate one entry file, raising ContentError naming the file and field."""
    rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
    raw = path.read_bytes()
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ContentError(f"{rel}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ContentError(f"{rel}: TOML syntax error: {exc}") from None
    category, slug = path.parent.name, path.stem
    if category not in CATEGORIES:
        raise ContentError(f"{rel}: folder {category!r} is not a category (one of: {', '.join(CATEGORIES)})")
    if not SLUG.match(slug):
        raise ContentError(f"{rel}: file name {slug!r} is not a slug (lowercase words joined by '-')")
    try:
        spec = EntryFile.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"field {_location(e['loc'])}: {e['msg']}" for e in exc.errors())
        raise ContentError(f"{rel}: {problems}") from None
    # the normaliser's version is part of the hash: a new one re-tokenises every stored signature
    digest = hashlib.sha256(raw + f"\0normalize-v{NORMALIZE_VERSION}".encode()).hexdigest()
    return LoadedEntry(slug, category, rel, spec, digest)


def load_dir(root: Path, *, named_from: Path | None = None, skip: tuple[str, ...] = ()) -> list[LoadedEntry]:
    """Every entry under `root` (but folders in `skip`), validated; duplicate slugs are an error.
    Files are named relative to `named_from` (default: `root`)."""
    if not root.is_dir():
        raise ContentError(f"{root}: content folder not found")
    entries: dict[str, LoadedEntry] = {}
    for path in sorted(root.glob("*/*.toml")):
        if path.parent.name in skip:
            continue
        e = load_file(path, named_from or root)
        if e.slug in entries:
            raise ContentError(f"{e.path}: slug {e.slug!r} already used by {entries[e.slug].path}")
        entries[e.slug] = e
    return list(entries.values())


# -- the team's folder (issue 13) -------------------------------------------------------------------
# `<team>/<category>/<slug>.toml`: the team's own entries, same format and validation as content/;
# `<team>/notes/<slug>.md`: the team's notes on any entry (shipped or theirs), shown on its page;
# `<team>/drafts/`: drafts made from missed searches, never synced. The team's folder is separate
# from content/, so upgrading the shipped content leaves it alone.
TEAM_SKIP = ("notes", "drafts")


@dataclass
class TeamNoteFile:
    slug: str
    path: str
    text: str


def load_team(team: Path, shipped: list[LoadedEntry]) -> tuple[list[LoadedEntry], list[TeamNoteFile]]:
    """The team's entries and notes, validated; a team slug that a shipped entry has is an error."""
    entries = load_dir(team, named_from=team.parent, skip=TEAM_SKIP)
    by_slug = {e.slug: e for e in shipped}
    for e in entries:
        if e.slug in by_slug:
            raise ContentError(
                f"{e.path}: slug {e.slug!r} is already the shipped entry {by_slug[e.slug].path}; "
                "a team entry cannot replace a shipped one: rename the team file, or attach a note "
                f"as notes/{e.slug}.md"
            )
    known = set(by_slug) | {e.slug for e in entries}
    notes = []
    for path in sorted((team / "notes").glob("*.md")):
        rel = path.relative_to(team.parent).as_posix()
        try:
            text_ = path.read_bytes().decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            raise ContentError(f"{rel}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        if path.stem not in known:
            raise ContentError(
                f"{rel}: no entry {path.stem!r} to attach this note to (name the file <slug>.md)"
            )
        if not text_:
            raise ContentError(f"{rel}: the note is empty")
        notes.append(TeamNoteFile(path.stem, rel, text_))
    return entries, notes


def _sync_notes(session: Session, notes: list[TeamNoteFile]) -> None:
    from .team.models import TeamNote  # noqa: PLC0415

    session.execute(delete(TeamNote))
    session.add_all([TeamNote(entry_slug=n.slug, text=n.text, path=n.path) for n in notes])


def entry_row(e: LoadedEntry) -> Entry:
    s = e.spec
    data = s.model_dump(exclude={"title", "summary", "cause", "fix"}, exclude_none=True)
    return Entry(
        slug=e.slug,
        category=e.category,
        title=s.title,
        summary=s.summary,
        cause=s.cause,
        fix=s.fix,
        data=data,
        content_hash=e.content_hash,
        path=e.path,
        updated_at=utcnow(),
    )


def signature_rows(e: LoadedEntry) -> list[Signature]:
    rows = []
    for text_ in e.spec.signatures:
        n = normalize(text_)
        rows.append(Signature(entry_slug=e.slug, text=text_, tokens=" ".join(n.tokens), aux=" ".join(n.aux)))
    return rows


def _index_body(e: LoadedEntry) -> str:
    s = e.spec
    return "\n".join([s.cause, s.fix, " ".join(s.tags), *s.signatures])


def bump_generation(session: Session) -> None:
    """Tell search caches (IDF tables) that the indexed content changed."""
    meta = session.get(Meta, "generation")
    if meta is None:
        session.add(Meta(key="generation", value="1"))
    else:
        meta.value = str(int(meta.value) + 1)
        session.add(meta)


MASS_REMOVAL = 0.5  # a sync that would remove more than this share of the entries needs `force`


ENTRY_LINK = re.compile(r"\]\(/e/([^)\s#?]+)")  # `[title](/e/slug)` in Markdown


def check_links(entries: list[LoadedEntry]) -> None:
    """Every `/e/<slug>` link in an entry's text names an entry that exists (hubs link the entries of
    a message's other causes; a typo or a removed entry would be a dead link)."""
    known = {e.slug for e in entries}
    for e in entries:
        for name in ("summary", "cause", "fix"):
            if dead := [s for s in ENTRY_LINK.findall(getattr(e.spec, name)) if s not in known]:
                raise ContentError(f"{e.path}: field {name}: links /e/{dead[0]}, which is no entry")


def sync(engine: Engine, root: Path, *, force: bool = False, team: Path | None = None) -> SyncReport:
    """Load `root` (and the team's folder, when given) into the database: new and changed entries
    written, vanished ones removed, team notes replaced.

    Idempotent (keyed on slug + content hash) and all-or-nothing: a bad file raises ContentError
    before anything is written. Runs and results are kept.
    """
    loaded = load_dir(root)
    team_entries, notes = load_team(team, loaded) if team is not None else ([], [])
    loaded += team_entries
    check_links(loaded)
    report = SyncReport()
    with Session(engine) as session:
        existing = {slug: h for slug, h in session.exec(select(Entry.slug, Entry.content_hash)).all()}
        wanted = {e.slug: e for e in loaded}
        vanished = sorted(set(existing) - set(wanted))
        if not force and len(existing) > 2 and len(vanished) > MASS_REMOVAL * len(existing):
            # an empty or wrong content folder (a missing mount, a typo) must not wipe the knowledge base
            raise ContentError(
                f"{root}: syncing would remove {len(vanished)} of {len(existing)} entries; "
                "nothing was changed (check the content folder, or force the sync)"
            )
        for slug in vanished:
            _remove(session, slug)
            report.removed.append(slug)
        for e in loaded:
            if existing.get(e.slug) == e.content_hash:
                report.unchanged += 1
                continue
            if e.slug in existing:
                _remove(session, e.slug)
                report.updated.append(e.slug)
            else:
                report.added.append(e.slug)
            session.add(entry_row(e))
            session.flush()
            session.add_all(signature_rows(e))
            session.execute(
                text("INSERT INTO entry_fts(slug, title, summary, body) VALUES (:slug, :t, :s, :b)"),
                {"slug": e.slug, "t": e.spec.title, "s": e.spec.summary, "b": _index_body(e)},
            )
        if report.added or report.updated or report.removed:
            bump_generation(session)
        _sync_notes(session, notes)
        session.commit()
    return report


def _remove(session: Session, slug: str) -> None:
    # signatures first, explicitly, so the FTS triggers see each delete
    session.execute(delete(Signature).where(col(Signature.entry_slug) == slug))
    session.execute(text("DELETE FROM entry_fts WHERE slug = :slug"), {"slug": slug})
    session.execute(delete(Entry).where(col(Entry.slug) == slug))


def seed_inventory(root: Path) -> list[dict[str, Any]]:
    """The seed-inventory lines (id, text) that entries must cover."""
    path = root / "seed-inventory.toml"
    return tomllib.loads(path.read_text())["line"] if path.exists() else []
