"""JSON API: search, categories, entries, runs (the contracts of DESIGN.md)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlmodel import Session, col, func, select

from .. import runs
from ..categories import CATEGORIES
from ..content import Requires
from ..models import Entry, Run, Worker
from ..search import QueryError, Searcher
from ..team import auth, misses
from . import page_data, queueing
from .deps import RunId, SearcherDep, SessionDep

router = APIRouter()


class SearchBody(BaseModel):
    q: str = Field(description="An error message, or a whole pasted traceback or log.")


class SearchHit(BaseModel):
    slug: str
    title: str
    category: str
    score: float = Field(
        description="0-1; signature matches at or above the confidence threshold are confident."
    )
    matched: str = Field(description="The signature (or free-text words) that matched.")
    line: str = Field("", description="The line of the paste that matched.")
    kind: str = Field("signature", description="signature | text")


class SearchOut(BaseModel):
    query: str
    confident: bool
    results: list[SearchHit]
    lines: list[str] = Field(default_factory=list, description="The lines of the paste that carry the error.")
    ignored: dict[str, int] = Field(default_factory=dict, description="Volatile parts set aside, by kind.")


class CategoryOut(BaseModel):
    name: str
    title: str
    description: str
    count: int


class EntryOut(BaseModel):
    slug: str
    title: str
    category: str
    summary: str
    requires: Requires


class EntryDetail(EntryOut):
    cause: str
    fix: str
    signatures: list[str]
    tags: list[str] = []
    torch: str = ""
    sources: list[str] = []
    seeds: list[str] = []
    snippets: dict[str, Any]
    latest: dict[str, Any] = Field(default_factory=dict, description="Latest stored outcome per snippet.")


class OutcomeOut(BaseModel):
    """What one snippet did when it ran (DESIGN.md OUTCOME). Extra fields are welcome; these are the
    ones other tools read."""

    model_config = ConfigDict(extra="allow")

    outcome: Literal["raised", "warned", "ok", "wrong", "timeout", "crashed", "skipped"]
    exc_type: str | None = Field(None, description="The exception's class name, for `raised`.")
    message: str | None = None
    traceback: str | None = Field(None, description="Trimmed to the snippet's own frames.")
    warnings: list[dict[str, Any]] = Field(default_factory=list)
    stdout: str = ""
    stderr: str = ""
    truncated: bool = Field(False, description="Output went over the cap and was cut.")
    duration_ms: float | None = None
    device: str | None = Field(None, description='"cpu", or the GPU\'s name ("NVIDIA H100 80GB HBM3").')
    torch_version: str | None = None
    expected: bool | None = Field(None, description="It did what the entry says it should.")
    reason: str | None = Field(
        None, description="Why it was skipped or crashed, or how it missed the expectation."
    )


class RunOut(BaseModel):
    """A press of Reproduce: the entry's broken and fixed snippet, run on a worker."""

    id: int
    entry: str = Field(description="The entry's slug.")
    state: Literal["queued", "running", "done"]
    results: dict[Literal["broken", "fixed"], OutcomeOut] = Field(
        description="One outcome per snippet, as each finishes."
    )
    worker: str | None = Field(None, description="The worker that ran it.")
    attempts: int = Field(0, description="Times it was leased (a worker that dies mid-run gives it back).")
    interrupted: bool = Field(False, description="The server restarted while it ran.")
    created_at: str
    finished_at: str | None = None


QUEUE_ERRORS: dict[int | str, dict[str, Any]] = {
    429: {"description": "Too many of your runs are waiting (each client gets a share of the queue)."},
    503: {"description": "The run queue is full; retry after `Retry-After` seconds."},
}


def entry_out(e: Entry) -> dict[str, Any]:
    return {
        "slug": e.slug,
        "title": e.title,
        "category": e.category,
        "summary": e.summary,
        "requires": e.spec.requires.model_dump(),
    }


def _search(searcher: Searcher, q: str, request: Request) -> dict[str, Any]:
    try:
        result = searcher.search(q).as_dict()
    except QueryError as exc:
        status = 413 if "larger than" in str(exc) else 422
        raise HTTPException(status, str(exc)) from None
    misses.on_search(request, q, result)  # a search without a confident match is recorded (issue 13)
    return result


@router.get("/api/search", response_model=SearchOut, tags=["search"])
def search_get(
    q: Annotated[str, Query(description="Error text; use POST for long tracebacks.")],
    searcher: SearcherDep,
    request: Request,
) -> dict[str, Any]:
    """Find the entries that explain an error message."""
    return _search(searcher, q, request)


@router.post("/api/search", response_model=SearchOut, tags=["search"])
def search_post(body: SearchBody, searcher: SearcherDep, request: Request) -> dict[str, Any]:
    """Same as GET, for whole tracebacks."""
    return _search(searcher, body.q, request)


@router.get("/api/categories", response_model=list[CategoryOut], tags=["entries"])
def categories(session: SessionDep) -> list[dict[str, Any]]:
    """The nine categories with their entry counts."""
    return page_data.categories(session)  # the same data the home page shows


@router.get("/api/entries", response_model=list[EntryOut], tags=["entries"])
def entries(session: SessionDep, category: str | None = None) -> list[dict[str, Any]]:
    """All entries, or one category's."""
    if category is not None and category not in CATEGORIES:
        raise HTTPException(404, f"no category {category!r}; categories: {', '.join(CATEGORIES)}")
    query = select(Entry).order_by(Entry.category, Entry.title)
    if category:
        query = query.where(Entry.category == category)
    return [entry_out(e) for e in session.exec(query).all()]


def get_entry(session: Session, slug: str) -> Entry:
    entry = session.get(Entry, slug)
    if entry is None:
        raise HTTPException(404, f"no entry {slug!r}")
    return entry


@router.get("/api/entries/{slug}", response_model=EntryDetail, tags=["entries"])
def entry_detail(slug: str, session: SessionDep) -> dict[str, Any]:
    """One entry in full, with its latest recorded outcomes."""
    e = get_entry(session, slug)
    spec = e.spec
    latest = {
        part: r.outcome | {"recorded_at": r.recorded_at.isoformat()}
        for part, r in runs.latest_results(session=session, entry=e).items()
    }
    return {
        **entry_out(e),
        "cause": e.cause,
        "fix": e.fix,
        "signatures": spec.signatures,
        "tags": spec.tags,
        "torch": spec.torch,
        "sources": spec.sources,
        "seeds": spec.seeds,
        "snippets": runs.entry_snippets(e),
        "latest": latest,
    }


@router.post(
    "/api/entries/{slug}/reproduce",
    status_code=202,
    response_model=RunOut,
    responses=QUEUE_ERRORS,
    tags=["runs"],
)
def reproduce(slug: str, request: Request, session: SessionDep) -> Any:
    """Queue a run of the entry's broken and fixed snippets."""
    if (denied := auth.reproduce_denied(request)) is not None:  # sign-in for Reproduce, when set
        return denied
    try:
        return runs.run_public(queueing.queue_run(request, session, get_entry(session, slug)))
    except queueing.Refused as exc:
        return JSONResponse({"detail": exc.message}, status_code=exc.status, headers=exc.headers)


@router.get("/api/runs/{run_id}", response_model=RunOut, tags=["runs"])
def get_run(run_id: RunId, session: SessionDep) -> dict[str, Any]:
    """A run's state and, once done, both outcomes."""
    run = session.get(Run, run_id)
    if run is None:
        raise HTTPException(404, f"no run {run_id}")
    return runs.run_public(run)


@router.get("/healthz", tags=["service"])
def healthz(session: SessionDep) -> dict[str, Any]:
    """Liveness, the number of entries, the queue, and the workers seen."""
    n = session.exec(select(func.count()).select_from(Entry)).one()
    states = dict(session.exec(select(Run.state, func.count()).group_by(Run.state)).all())
    workers = [
        {
            "id": w.id,
            "device": w.device,
            "torch_version": w.torch_version,
            "gpus": w.gpus,
            "hostname": w.hostname,
            "last_seen": w.last_seen.isoformat(),
        }
        for w in session.exec(select(Worker).order_by(col(Worker.last_seen).desc())).all()
    ]
    return {
        "status": "ok",
        "entries": n,
        "queue": {"queued": states.get("queued", 0), "running": states.get("running", 0)},
        "workers": workers,
    }
