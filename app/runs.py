"""The run queue: create runs, lease them to workers, take their results, never leave one stuck.

Every worker, local or remote, pulls jobs over the same HTTP protocol (see `app/sandbox/agent.py`).
A lease expires unless the worker heartbeats; an expired run is requeued, and after
`max_attempts` leases it is finished as crashed.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, NotRequired, TypedDict

from sqlalchemy import ColumnElement, false, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, func, select

from .config import Settings
from .content import EntryFile
from .db import QUEUE_CHANNEL
from .models import Entry, Meta, Result, Run, Worker, utcnow
from .sandbox.contracts import Expect, Requires, blank

PARTS = ("broken", "fixed")
GPU_WORKER_FRESH_S = 60  # a GPU worker seen this recently gets the CUDA jobs


class QueueFull(Exception):
    """The queue holds `queue_max` runs already."""


class ClientQueueFull(QueueFull):
    """This client has `queue_per_client` runs waiting already (others still get their turn)."""

    def __init__(self, message: str, waiting: int):
        super().__init__(message)
        self.waiting = waiting


def client_key(*, user: object = None, address: str | None = None) -> str:
    """Whose share of the queue a run counts against: the signed-in user, else the client address."""
    return f"user:{user}"[:200] if user else f"addr:{address or 'unknown'}"[:200]


class LeaseLost(Exception):
    """The run is no longer leased to this worker (expired and requeued, or finished)."""


class SnippetJob(TypedDict):
    """One snippet of a run's job: its code, what it must do, and the stdout check it runs with."""

    code: str
    expect: Expect | None
    check: str | None


class RunJob(TypedDict):
    """What `Run.job` holds and a lease hands a worker (`app/sandbox/agent.py` reads it)."""

    requires: Requires
    fresh_process: bool
    limits: dict[str, Any]  # the server's per-snippet limits (`Settings.limits`)
    snippets: dict[str, SnippetJob | None]  # by part; None: the entry has no fixed snippet
    client: NotRequired[str]  # whose share of the queue it counts against (`client_key`)
    interrupted: NotRequired[bool]  # the server stopped while it ran


def snippet_hash(snippet: Mapping[str, object] | None) -> str:
    return hashlib.sha256(repr(sorted((snippet or {}).items())).encode()).hexdigest()[:16]


def spec_snippets(spec: EntryFile) -> dict[str, SnippetJob | None]:
    """Both snippets with their expectation and stdout check (the entry-level check as default)."""
    out: dict[str, SnippetJob | None] = {}
    for part in PARTS:
        snippet = spec.snippet(part)
        out[part] = (
            None
            if snippet is None
            else {
                "code": snippet.code,
                "expect": snippet.expect.as_contract(),
                "check": spec.check_of(snippet),
            }
        )
    return out


def entry_snippets(entry: Entry) -> dict[str, SnippetJob | None]:
    return spec_snippets(entry.spec)


def build_job(entry: Entry, settings: Settings) -> RunJob:
    """What a worker needs to run an entry: both snippets, their expectations, requirements, limits."""
    requires = entry.spec.requires
    return {
        "requires": requires.as_contract(),
        "fresh_process": requires.fresh_process,
        "limits": settings.limits(),
        "snippets": entry_snippets(entry),
    }


def _lock_queue(session: Session) -> None:
    """Serialise queue writers until commit: a write on the queue's meta row (SQLite: the database's
    write lock; PostgreSQL: that row's lock, so replicas take turns too)."""
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    stmt = insert(Meta).values(key="queue", value="lock")
    session.execute(stmt.on_conflict_do_update(index_elements=["key"], set_={"value": "lock"}))


def create_run(*, session: Session, entry: Entry, settings: Settings, client: str | None = None) -> Run:
    """Queue a run of both snippets; an identical run already waiting is returned instead.

    Bounded atomically on both backends: the queue is locked before it is counted, so concurrent
    requests (threads, or replicas on PostgreSQL) cannot all see room for one more. One client may
    hold at most `queue_per_client` of the waiting runs (0: no per-client share), so one client cannot
    monopolise the queue; sharing an identical waiting run costs nothing.
    """
    _lock_queue(session)
    job = build_job(entry, settings)
    waiting = session.exec(select(Run).where(Run.state == "queued", Run.entry_slug == entry.slug)).all()
    for run in waiting:
        if run.job.get("snippets") == job["snippets"]:
            _commit_keeping(session, run)
            return run  # clicks of several people (or one impatient one) share a run
    queued = session.exec(select(func.count()).select_from(Run).where(Run.state == "queued")).one()
    if queued >= settings.queue_max:
        session.rollback()
        raise QueueFull(f"{queued} runs are waiting already")
    if client and settings.queue_per_client:
        mine = session.exec(
            select(func.count())
            .select_from(Run)
            .where(Run.state == "queued", Run.job["client"].as_string() == client)
        ).one()
        if mine >= settings.queue_per_client:
            session.rollback()
            raise ClientQueueFull(
                f"you have {mine} runs waiting already (at most {settings.queue_per_client} "
                "per client); try again when one has started",
                mine,
            )
    if client:
        job["client"] = client
    run = Run(entry_slug=entry.slug, job=dict(job))
    session.add(run)
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_notify(:channel, '')"), {"channel": QUEUE_CHANNEL})  # at commit
    _commit_keeping(session, run)
    return run


def _commit_keeping(session: Session, run: Run) -> None:
    """Commit, and keep `run` as this transaction saw it (queued): from the commit on, a woken
    worker may lease it before the caller answers, and a reload would report it running."""
    session.flush()
    session.refresh(run)
    keep, session.expire_on_commit = session.expire_on_commit, False
    try:
        session.commit()
    finally:
        session.expire_on_commit = keep


def see_worker(*, session: Session, info: Mapping[str, Any]) -> Worker:
    """Record that a worker made contact (device, torch version, last contact)."""
    wid = str(info.get("id") or "unknown")[:200]
    for attempt in (1, 2):  # a worker's parallel long polls may both insert its first row
        worker = session.get(Worker, wid, populate_existing=True) or Worker(
            id=wid, device="", torch_version=""
        )
        worker.device = str(info.get("device") or "unknown")[:200]
        worker.torch_version = str(info.get("torch_version") or "unknown")[:50]
        worker.gpus = int(info.get("gpus") or 0)
        worker.hostname = str(info.get("hostname") or "")[:200]
        worker.concurrency = int(info.get("concurrency") or 1)
        worker.last_seen = utcnow()
        session.add(worker)
        try:
            session.commit()
            return worker
        except IntegrityError:
            session.rollback()
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def expire_leases(*, session: Session, settings: Settings) -> int:
    """Requeue runs whose worker went silent; give up on runs that keep killing workers.

    Safe with several replicas: the stale rows are locked (PostgreSQL: `FOR UPDATE SKIP LOCKED`, the
    condition rechecked on the newest row; SQLite: the write lock is taken first), so a run another
    process has just requeued and leased again is not requeued under its new worker.
    """
    now = utcnow()
    stale_q = select(Run.id).where(Run.state == "running", col(Run.lease_expires) < now)
    found = session.exec(stale_q.limit(1)).first()  # the common case: one cheap read, nothing stale
    session.rollback()
    if found is None:
        return 0
    if session.get_bind().dialect.name == "sqlite":
        _lock_queue(session)
    stale = session.exec(
        select(Run)
        .where(Run.state == "running", col(Run.lease_expires) < now)
        .with_for_update(skip_locked=True)
        .execution_options(populate_existing=True)
    ).all()
    for run in stale:
        if run.attempts >= settings.max_attempts:
            _finish_missing(run, f"crashed: its worker stopped answering {run.attempts} times")
        else:
            run.state, run.lease, run.lease_expires, run.worker_id = "queued", None, None, None
        session.add(run)
    session.commit()
    return len(stale)


def _gpu_job(requires_key: str) -> ColumnElement[Any]:
    """The job's `requires.<key>` on both backends (JSON true/false or an int; missing is false/0)."""
    field = col(Run.job)[("requires", requires_key)]
    if requires_key == "gpus":
        return func.coalesce(field.as_integer(), 0)
    return func.coalesce(field.as_boolean(), false())


def lease_run(*, session: Session, worker: Worker, settings: Settings) -> Run | None:
    """Atomically hand the oldest suitable queued run to `worker`, or None.

    One UPDATE of the row its subquery picks: on PostgreSQL the pick is `FOR UPDATE SKIP LOCKED`
    (concurrent leases, from any replica, take different runs instead of waiting on each other); on
    SQLite the statement holds the write lock.
    """
    expire_leases(session=session, settings=settings)
    skip_gpu_jobs = False
    if worker.gpus == 0:
        fresh = utcnow() - timedelta(seconds=GPU_WORKER_FRESH_S)
        skip_gpu_jobs = (
            session.exec(
                select(func.count()).select_from(Worker).where(Worker.gpus > 0, Worker.last_seen > fresh)
            ).one()
            > 0
        )
    pick = select(Run.id).where(Run.state == "queued")
    if skip_gpu_jobs:
        pick = pick.where(_gpu_job("cuda") == false(), _gpu_job("gpus") == 0)
    pick = pick.order_by(col(Run.id)).limit(1).with_for_update(skip_locked=True)
    now = utcnow()
    row = session.execute(
        update(Run)
        .where(col(Run.id) == pick.scalar_subquery())
        .values(
            state="running",
            lease=secrets.token_urlsafe(16),
            lease_expires=now + timedelta(seconds=settings.lease_s),
            worker_id=worker.id,
            attempts=Run.attempts + 1,
            started_at=now,
        )
        .returning(col(Run.id))
        .execution_options(synchronize_session=False)
    ).first()
    session.commit()
    return session.get(Run, row[0], populate_existing=True) if row else None


def _leased(session: Session, run_id: int, lease: str) -> Run:
    # locked until the caller commits: a lease expiring in another replica waits for this write
    run = session.get(Run, run_id, populate_existing=True, with_for_update=True)
    if run is None or run.state != "running" or not lease or run.lease != lease:
        raise LeaseLost("this run is not leased to you any more")
    return run


def heartbeat(*, session: Session, run_id: int, lease: str, settings: Settings) -> Run:
    run = _leased(session, run_id, lease)
    run.lease_expires = utcnow() + timedelta(seconds=settings.lease_s)
    session.add(run)
    session.commit()
    return run


def submit_result(
    *, session: Session, run_id: int, lease: str, part: str, result: dict[str, Any], settings: Settings
) -> Run:
    """Store one part's outcome; the run is done once both parts are in."""
    run = _leased(session, run_id, lease)
    run.results = {**run.results, part: result}
    run.lease_expires = utcnow() + timedelta(seconds=settings.lease_s)
    if all(p in run.results for p in PARTS):
        run.state, run.finished_at, run.lease = "done", utcnow(), None
    session.add(run)
    _remember(session, run, part, result)
    session.commit()
    return run


def _remember(session: Session, run: Run, part: str, result: dict[str, Any]) -> None:
    remember(
        session,
        slug=run.entry_slug,
        part=part,
        snippet=run.job["snippets"].get(part),
        result=result,
        run_id=run.id,
    )


def remember(
    session: Session,
    *,
    slug: str,
    part: str,
    snippet: Mapping[str, object] | None,
    result: dict[str, Any],
    run_id: int | None = None,
) -> None:
    """Keep the latest outcome per snippet hash, torch version and device for the pages (runs and
    `pitfalls verify` both record here)."""
    if result.get("outcome") == "skipped" and "no fixed snippet" in (result.get("reason") or ""):
        return
    h = snippet_hash(snippet)
    torch_version = str(result.get("torch_version") or "unknown")
    device = str(result.get("device") or "unknown")
    row = session.exec(
        select(Result).where(
            Result.entry_slug == slug,
            Result.part == part,
            Result.snippet_hash == h,
            Result.torch_version == torch_version,
            Result.device == device,
        )
    ).first() or Result(
        entry_slug=slug, part=part, snippet_hash=h, torch_version=torch_version, device=device, outcome={}
    )
    row.outcome, row.expected, row.run_id, row.recorded_at = result, result.get("expected"), run_id, utcnow()
    session.add(row)


def _finish_missing(run: Run, reason: str) -> None:
    results = dict(run.results)
    for part in PARTS:
        # no worker's outcome: it did not do what the entry says (the API's OutcomeOut and the
        # outcome card default the output fields a worker would have sent: stdout, stderr, ...)
        results.setdefault(part, blank("crashed", reason, expected=False))
    run.results, run.state, run.finished_at, run.lease, run.lease_expires = (
        results,
        "done",
        utcnow(),
        None,
        None,
    )


def mark_interrupted(*, session: Session) -> int:
    """On start: runs left running by a stopped server are finished as interrupted.

    Queued runs never started: they stay queued, and the next worker takes them.
    On PostgreSQL, other replicas may be serving the runs that are running (one replica restarting must
    not fail its siblings' runs): nothing is marked, and the leases of workers that died with this
    server expire and are requeued like any silent worker's.
    """
    if session.get_bind().dialect.name == "postgresql":
        return 0
    stuck = session.exec(select(Run).where(Run.state == "running")).all()
    for run in stuck:
        _finish_missing(run, "interrupted: the server stopped before this run finished; run it again")
        run.job = {**run.job, "interrupted": True}
        session.add(run)
    session.commit()
    return len(stuck)


def latest_results(*, session: Session, entry: Entry) -> dict[str, Result]:
    """The newest stored outcome of each of the entry's current snippets, if any."""
    out: dict[str, Result] = {}
    snippets = entry_snippets(entry)
    for part in PARTS:
        h = snippet_hash(snippets[part])
        row = session.exec(
            select(Result)
            .where(Result.entry_slug == entry.slug, Result.part == part, Result.snippet_hash == h)
            .order_by(col(Result.recorded_at).desc())
        ).first()
        if row:
            out[part] = row
    return out


def run_public(run: Run) -> dict[str, Any]:
    return {
        "id": run.id,
        "entry": run.entry_slug,
        "state": run.state,
        "results": run.results,
        "worker": run.worker_id,
        "attempts": run.attempts,
        "interrupted": bool(run.job.get("interrupted")),
        "created_at": run.created_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }
