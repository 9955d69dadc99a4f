"""Migration 0003 creates exactly the team tables the models describe, and goes down cleanly."""

from __future__ import annotations

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect
from sqlmodel import SQLModel

from app.config import Settings
from app.db import alembic_config, make_engine, migrate
from app.team import models

TEAM_TABLES = {
    models.MissedSearch.__tablename__,
    models.Feedback.__tablename__,
    models.TeamNote.__tablename__,
    models.TeamAction.__tablename__,
}


def test_migration_matches_the_team_models(tmp_path):
    settings = Settings(database_url=f"sqlite:///{tmp_path}/t.db")
    migrate(settings, "0003")
    engine = make_engine(settings)

    def ours(obj, name, type_, reflected, compare_to) -> bool:
        table = obj if type_ == "table" else getattr(obj, "table", None)
        return table is None or table.name in TEAM_TABLES

    only_ours = {
        "include_name": lambda name, type_, parent: type_ != "table" or name in TEAM_TABLES,
        "include_object": ours,
    }
    try:
        with engine.connect() as conn:
            diffs = compare_metadata(MigrationContext.configure(conn, opts=only_ours), SQLModel.metadata)
        assert diffs == []
        assert set(inspect(engine).get_table_names()) >= TEAM_TABLES
    finally:
        engine.dispose()
    command.downgrade(alembic_config(settings), "0002")
    engine = make_engine(settings)
    try:
        assert not TEAM_TABLES & set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
