"""Shared fixtures: a real SQLite file, migrated by Alembic, with the real content/ synced into it."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def kb_settings(tmp_path_factory):
    from app.config import Settings

    db = tmp_path_factory.mktemp("kb") / "pitfalls.db"
    return Settings(
        database_url=f"sqlite:///{db}", content_dir=ROOT / "content", local_workers=0, htmx_local=True
    )


@pytest.fixture(scope="session")
def kb_engine(kb_settings, _synced_templates, tmp_path_factory):
    from app import content
    from app.db import make_engine, migrate

    _seed_sqlite(_synced_templates, tmp_path_factory, kb_settings.sqlite_path())
    migrate(kb_settings)
    engine = make_engine(kb_settings)
    content.sync(engine, kb_settings.content_dir)  # on the seeded copy: checks hashes, writes what changed
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def searcher(kb_engine, kb_settings):
    from app.search import Searcher

    return Searcher.from_settings(kb_engine, kb_settings)


# -- both database backends -------------------------------------------------------------------
# Tests that take `db_url` (or `module_db_url`) run once on SQLite and once on a real PostgreSQL server
# (tests/pgserver.py: Debian's package, started privately for the session). Where PostgreSQL cannot be
# installed, its half is skipped with the reason; `-m "not postgres"` runs SQLite only.
BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


@pytest.fixture(scope="session")
def pg_server():
    from tests.pgserver import Server, unavailable

    if why := unavailable():
        pytest.skip(f"PostgreSQL half skipped: {why}")
    server = Server().start()
    yield server
    server.stop()


def _new_database(request, backend: str, folder: Path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{folder / 'pitfalls.db'}"
    return request.getfixturevalue("pg_server").database()


@pytest.fixture(scope="session")
def _synced_templates(tmp_path_factory):
    """Per backend, a database migrated and synced with content/ once, copied for each test."""
    return {}


def _template(templates: dict, backend: str, new_url: Callable[[], str]):
    """The backend's template database (Settings), migrated and synced with content/ on first use."""
    from app import content
    from app.config import Settings
    from app.db import make_engine, migrate

    if backend not in templates:
        settings = Settings(database_url=new_url(), content_dir=ROOT / "content")
        migrate(settings)
        engine = make_engine(settings)
        content.sync(engine, settings.content_dir)
        engine.dispose()  # SQLite: the last connection's close folds the WAL into the file
        templates[backend] = settings
    return templates[backend]


def _seed_sqlite(templates: dict, tmp_path_factory, dest: Path) -> None:
    """Copy the synced SQLite template to `dest`: an app starting on it re-syncs by hash (~1 s)
    instead of writing every entry again (~8 s on a 2-core machine)."""
    url = lambda: f"sqlite:///{tmp_path_factory.mktemp('template') / 'synced.db'}"
    shutil.copy(_template(templates, "sqlite", url).sqlite_path(), dest)


def _synced_database(request, backend: str, folder: Path) -> str:
    templates = request.getfixturevalue("_synced_templates")
    if backend == "sqlite":
        _seed_sqlite(templates, request.getfixturevalue("tmp_path_factory"), folder / "pitfalls.db")
        return f"sqlite:///{folder / 'pitfalls.db'}"
    _template(templates, backend, lambda: request.getfixturevalue("pg_server").database(name="synced"))
    return request.getfixturevalue("pg_server").database(template="synced")


@pytest.fixture(scope="session")
def seed_db(_synced_templates, tmp_path_factory) -> Callable[[Path], Path]:
    """seed_db(path): put a SQLite database already migrated and synced with content/ at `path`
    (a copy of the session's template), for tests whose app would otherwise sync from scratch."""

    def seed(path: Path) -> Path:
        _seed_sqlite(_synced_templates, tmp_path_factory, path)
        return path

    return seed


@pytest.fixture(params=BACKENDS)
def db_url(request, tmp_path) -> str:
    """The URL of a new, empty database (not migrated) on each backend in turn."""
    return _new_database(request, request.param, tmp_path)


@pytest.fixture(params=BACKENDS)
def synced_db_url(request, tmp_path) -> str:
    """The URL of a new database, migrated and synced with content/, on each backend in turn."""
    return _synced_database(request, request.param, tmp_path)


@pytest.fixture(scope="module", params=BACKENDS)
def module_db_url(request, tmp_path_factory) -> str:
    """`synced_db_url` shared by one module's tests (for module-scoped apps)."""
    return _synced_database(request, request.param, tmp_path_factory.mktemp("db"))
