"""`pitfalls copy-db`: an existing SQLite database's history moves to PostgreSQL intact."""

from __future__ import annotations

import shutil

import pytest
from sqlmodel import Session, func, select
from typer.testing import CliRunner

from app import content, runs
from app.cli import cli
from app.config import Settings
from app.db import make_engine
from app.models import Entry, Result, Run, Worker
from app.sandbox.contracts import blank
from app.team.models import Feedback
from tests.conftest import ROOT, _synced_database


@pytest.fixture()
def sqlite_with_history(request, tmp_path):
    url = _synced_database(request, "sqlite", tmp_path)
    # content/ as of now, for both databases (other work may add entries while the suite runs)
    folder = shutil.copytree(ROOT / "content", tmp_path / "content")
    settings = Settings(database_url=url, content_dir=folder)
    engine = make_engine(settings)
    try:
        content.sync(engine, folder)
        with Session(engine) as s:
            done = runs.create_run(
                session=s, entry=s.get(Entry, "view-non-contiguous"), settings=settings, client="addr:1"
            )
            queued = runs.create_run(session=s, entry=s.get(Entry, "nan-loss"), settings=settings)
            worker = runs.see_worker(
                session=s,
                info={"id": "gpu-box", "gpus": 1, "device": "NVIDIA H100", "torch_version": "2.13.0"},
            )
            leased = runs.lease_run(session=s, worker=worker, settings=settings)
            out = {
                **blank("raised", "as expected"),
                "expected": True,
                "device": "cuda",
                "torch_version": "2.13.0",
                "message": "view size is not compatible ✓",
            }
            for part in runs.PARTS:
                runs.submit_result(
                    session=s, run_id=leased.id, lease=leased.lease, part=part, result=out, settings=settings
                )
            s.add(Feedback(entry_slug="nan-loss", verdict="solved", comment="thanks", user="ana"))
            s.commit()
            ids = (done.id, queued.id)
    finally:
        engine.dispose()
    return settings, ids


def _snapshot(url: str) -> dict:
    engine = make_engine(Settings(database_url=url))
    try:
        with Session(engine) as s:
            snap = {
                "runs": [
                    (
                        r.id,
                        r.entry_slug,
                        r.state,
                        r.job,
                        r.results,
                        r.worker_id,
                        r.attempts,
                        r.created_at.replace(tzinfo=None),
                        r.finished_at and r.finished_at.replace(tzinfo=None),
                    )
                    for r in s.exec(select(Run).order_by(Run.id)).all()
                ],
                "results": [
                    (r.entry_slug, r.part, r.snippet_hash, r.outcome, r.expected, r.run_id)
                    for r in s.exec(select(Result).order_by(Result.id)).all()
                ],
                "workers": [(w.id, w.device, w.gpus) for w in s.exec(select(Worker)).all()],
                "feedback": [
                    (f.entry_slug, f.verdict, f.comment, f.user) for f in s.exec(select(Feedback)).all()
                ],
                "entries": s.exec(select(func.count()).select_from(Entry)).one(),
            }
    finally:
        engine.dispose()
    return snap


@pytest.mark.postgres
def test_copy_db_moves_history_to_postgresql_and_new_runs_follow(sqlite_with_history, pg_server):
    settings, (done_id, queued_id) = sqlite_with_history
    target = pg_server.database()
    env = {"PITFALLS_DATABASE_URL": settings.database_url, "PITFALLS_CONTENT_DIR": str(settings.content_dir)}
    result = CliRunner().invoke(cli, ["copy-db", target], env=env)
    assert result.exit_code == 0, result.output
    assert "copied 1 worker, 2 run, 2 result" in result.output
    before, after = _snapshot(settings.database_url), _snapshot(target)
    assert after == before and len(after["runs"]) == 2 and after["entries"] > 100
    # the copy is a working database: the queued run is leased from it, new runs get new ids
    pg_settings = settings.model_copy(update={"database_url": target})
    engine = make_engine(pg_settings)
    try:
        with Session(engine) as s:
            worker = runs.see_worker(session=s, info={"id": "w2"})
            assert runs.lease_run(session=s, worker=worker, settings=pg_settings).id == queued_id
            new = runs.create_run(
                session=s, entry=s.get(Entry, "linear-in-features-mismatch"), settings=pg_settings
            )
            assert new.id > max(done_id, queued_id)
    finally:
        engine.dispose()
    # a second copy into a database with history is refused, and changes nothing
    again = CliRunner().invoke(cli, ["copy-db", target], env=env)
    assert again.exit_code == 2 and "already has rows" in again.output
    assert len(_snapshot(target)["runs"]) == 3
