"""Shared fixtures: a real SQLite file, migrated by Alembic, with the real content/ synced into it."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def kb_settings(tmp_path_factory):
    from app.config import Settings

    db = tmp_path_factory.mktemp("kb") / "pitfalls.db"
    return Settings(database_url=f"sqlite:///{db}", content_dir=ROOT / "content", local_workers=0,
                    htmx_local=True)


@pytest.fixture(scope="session")
def kb_engine(kb_settings):
    from app import content
    from app.db import make_engine, migrate

    migrate(kb_settings)
    engine = make_engine(kb_settings)
    content.sync(engine, kb_settings.content_dir)
    return engine


@pytest.fixture(scope="session")
def searcher(kb_engine, kb_settings):
    from app.search import Searcher

    return Searcher.from_settings(kb_engine, kb_settings)
