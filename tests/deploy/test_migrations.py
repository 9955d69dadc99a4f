"""Upgrades keep data: a database made at the first migration, with rows in it, upgrades to head intact."""

from __future__ import annotations

import json
import sqlite3

import pytest
from alembic.script import ScriptDirectory

from app.config import Settings
from app.db import alembic_config, migrate

FIRST = "0001"
TABLES = ("entry", "signature", "run", "result", "worker", "meta")


@pytest.fixture
def settings(tmp_path):
    return Settings(database_url=f"sqlite:///{tmp_path / 'pitfalls.db'}", local_workers=0)


def head(settings: Settings) -> str:
    return ScriptDirectory.from_config(alembic_config(settings)).get_current_head()


def fill(db) -> None:
    """Rows in every table, written with plain SQL as an old version of the app would have."""
    job = {
        "requires": {"cuda": False},
        "fresh_process": False,
        "limits": {"timeout_s": 30},
        "snippets": {
            "broken": {"code": "import torch\nx.view(2, 12)\n", "expect": None, "check": None},
            "fixed": None,
        },
    }
    outcome = {
        "outcome": "raised",
        "exc_type": "RuntimeError",
        "message": "view size is not compatible",
        "expected": True,
        "device": "NVIDIA H100 80GB HBM3",
        "torch_version": "2.5.1",
    }
    with sqlite3.connect(db) as c:
        c.execute(
            "INSERT INTO entry VALUES ('view-non-contiguous', 'mismatch', 'view() on a non-contiguous tensor', "
            "'summary', 'cause', 'fix', ?, 'abc123', 'mismatch/view-non-contiguous.toml', "
            "'2026-01-02 03:04:05.000000')",
            (json.dumps({"tags": ["view"], "seeds": ["mismatch-6"]}),),
        )
        c.execute(
            "INSERT INTO signature (entry_slug, text, normalized, tokens, aux) VALUES "
            "('view-non-contiguous', 'RuntimeError: view size is not compatible', 'view size is not compatible', "
            "'view size compatible', 'runtimeerror')"
        )
        c.execute(
            "INSERT INTO entry_fts (slug, title, summary, body) VALUES "
            "('view-non-contiguous', 'view() on a non-contiguous tensor', 'summary', 'reshape contiguous')"
        )
        for run_id, state in ((1, "done"), (2, "queued"), (3, "running")):
            c.execute(
                "INSERT INTO run (id, entry_slug, state, job, results, worker_id, lease, lease_expires, attempts, "
                "created_at, started_at, finished_at) VALUES (?, 'view-non-contiguous', ?, ?, ?, ?, ?, ?, ?, "
                "'2026-01-02 03:04:05.000000', NULL, NULL)",
                (
                    run_id,
                    state,
                    json.dumps(job),
                    json.dumps({"broken": outcome} if state == "done" else {}),
                    "gpu-box-1" if state == "running" else None,
                    "lease-token" if state == "running" else None,
                    "2026-01-02 03:05:05.000000" if state == "running" else None,
                    1 if state != "queued" else 0,
                ),
            )
        c.execute(
            "INSERT INTO result (entry_slug, part, snippet_hash, torch_version, device, outcome, expected, run_id, "
            "recorded_at) VALUES ('view-non-contiguous', 'broken', 'h1', '2.5.1', 'NVIDIA H100 80GB HBM3', ?, 1, 1, "
            "'2026-01-02 03:04:06.000000')",
            (json.dumps(outcome),),
        )
        c.execute(
            "INSERT INTO result (entry_slug, part, snippet_hash, torch_version, device, outcome, expected, run_id, "
            "recorded_at) VALUES ('view-non-contiguous', 'broken', 'h1', '2.5.1', 'cpu', ?, 1, 1, "
            "'2026-01-03 03:04:06.000000')",
            (json.dumps({**outcome, "device": "cpu"}),),
        )
        c.execute(
            "INSERT INTO worker VALUES ('gpu-box-1', 'NVIDIA H100 80GB HBM3', '2.5.1', 1, 'gpu-box', 2, "
            "'2026-01-02 03:04:05.000000')"
        )
        c.execute("INSERT INTO meta VALUES ('content_generation', '7')")


# columns that outlive every migration (0005 drops `signature.normalized`, derived data the sync rewrites)
KEPT = {"signature": "id, entry_slug, text, tokens, aux"}


def dump(db) -> dict[str, list[tuple]]:
    with sqlite3.connect(db) as c:
        return {t: c.execute(f"SELECT {KEPT.get(t, '*')} FROM {t} ORDER BY 1").fetchall() for t in TABLES}


def version(db) -> str:
    with sqlite3.connect(db) as c:
        return c.execute("SELECT version_num FROM alembic_version").fetchone()[0]


def test_migrations_form_one_line_with_downgrades(settings):
    script = ScriptDirectory.from_config(alembic_config(settings))
    assert len(script.get_heads()) == 1, f"more than one head: {script.get_heads()}"
    revisions = list(script.walk_revisions())
    assert revisions[-1].revision == FIRST and revisions[-1].down_revision is None
    assert len(revisions) >= 2, "the upgrade test needs a second migration to mean anything"
    for rev in revisions:
        assert callable(getattr(rev.module, "downgrade", None)), f"{rev.revision} has no downgrade"


def test_upgrade_from_first_migration_keeps_data(settings):
    db = settings.sqlite_path()
    migrate(settings, FIRST)
    assert version(db) == FIRST
    fill(db)
    before = dump(db)
    assert all(before[t] for t in TABLES)

    migrate(settings)  # what `pitfalls serve` does at start

    assert version(db) == head(settings) != FIRST
    assert dump(db) == before
    with sqlite3.connect(db) as c:
        assert c.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert c.execute("PRAGMA foreign_key_check").fetchall() == []
        # the free-text index still answers; the signature index nothing read is gone, with its triggers
        assert c.execute("SELECT slug FROM entry_fts WHERE entry_fts MATCH 'reshape'").fetchall() == [
            ("view-non-contiguous",)
        ]
        assert (
            c.execute(
                "SELECT name FROM sqlite_master WHERE name IN ('sig_fts', 'sig_vocab', 'entry_vocab') "
                "OR type = 'trigger'"
            ).fetchall()
            == []
        )
        assert "normalized" not in {row[1] for row in c.execute("PRAGMA table_info(signature)")}
        indexes = {row[0] for row in c.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"ix_result_latest", "ix_run_state_lease"} <= indexes


def test_the_app_reads_upgraded_rows(settings):
    from sqlmodel import Session

    from app import runs
    from app.db import make_engine
    from app.models import Entry, Run

    migrate(settings, FIRST)
    fill(settings.sqlite_path())
    migrate(settings)
    engine = make_engine(settings)
    try:
        with Session(engine) as session:
            run = session.get(Run, 1)
            assert run.state == "done" and run.results["broken"]["exc_type"] == "RuntimeError"
            assert run.job["snippets"]["broken"]["code"].startswith("import torch")
            entry = session.get(Entry, "view-non-contiguous")
            assert entry.data["seeds"] == ["mismatch-6"]
            # a server starting on the upgraded database finishes what the old one left running,
            # and keeps the queued run queued for the next worker
            assert runs.mark_interrupted(session=session) == 1
            assert session.get(Run, 3).results["broken"]["outcome"] == "crashed"
            assert session.get(Run, 2).state == "queued"
    finally:
        engine.dispose()


def test_downgrade_to_first_and_upgrade_again_keeps_data(settings):
    from alembic import command

    db = settings.sqlite_path()
    migrate(settings, FIRST)
    fill(db)
    before = dump(db)
    migrate(settings)
    command.downgrade(alembic_config(settings), FIRST)
    assert version(db) == FIRST and dump(db) == before
    with sqlite3.connect(db) as c:  # the old signature index is back, filled
        assert c.execute("SELECT rowid FROM sig_fts WHERE sig_fts MATCH 'compatible'").fetchall() == [(1,)]
    migrate(settings)
    assert version(db) == head(settings) and dump(db) == before


def test_migrate_is_idempotent(settings):
    migrate(settings)
    migrate(settings)
    assert version(settings.sqlite_path()) == head(settings)
