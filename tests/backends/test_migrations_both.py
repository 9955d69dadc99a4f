"""Migrations on both backends: up to head, down to nothing, up again; one head."""

from __future__ import annotations

from sqlalchemy import inspect, text

from app.config import Settings
from app.db import alembic_config, make_engine, migrate


def test_one_head():
    from alembic.script import ScriptDirectory

    heads = ScriptDirectory.from_config(alembic_config(Settings())).get_heads()
    assert len(heads) == 1, heads


def test_migrations_up_down_up(db_url):
    from alembic import command

    settings = Settings(database_url=db_url)
    migrate(settings)
    engine = make_engine(settings)
    try:
        tables = set(inspect(engine).get_table_names())
        assert {"entry", "signature", "run", "result", "worker", "meta", "entry_fts"} <= tables
        if engine.dialect.name == "postgresql":  # 0004: the weighted tsvector under a GIN index
            assert "ix_entry_fts_tsv" in {i["name"] for i in inspect(engine).get_indexes("entry_fts")}
        else:  # FTS5 from 0001
            with engine.connect() as c:
                names = {
                    n
                    for (n,) in c.execute(
                        text("SELECT name FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL%'")
                    )
                }
            assert names == {"entry_fts"}  # (0005 dropped the unused signature index)
    finally:
        engine.dispose()
    command.downgrade(alembic_config(settings), "base")
    engine = make_engine(settings)
    try:
        assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    finally:
        engine.dispose()
    migrate(settings)
    migrate(settings)  # idempotent
    engine = make_engine(settings)
    try:
        with engine.connect() as c:
            assert c.execute(text("SELECT count(*) FROM entry_fts")).scalar() == 0
    finally:
        engine.dispose()
