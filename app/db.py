"""Database engine, SQLite pragmas, migrations and the session dependency."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session, create_engine

from .config import Settings

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"


def make_engine(settings: Settings) -> Engine:
    """An engine with SQLite set up on purpose: WAL, foreign keys, a busy timeout."""
    url = settings.database_url
    if (path := settings.sqlite_path()) is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"check_same_thread": False} if url.startswith("sqlite") else {})
    if url.startswith("sqlite"):

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record):  # noqa: ANN001
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=5000")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

    return engine


def alembic_config(settings: Settings):
    """Alembic config pointing at our migrations folder and the settings' database."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", settings.database_url.replace("%", "%%"))
    return cfg


def migrate(settings: Settings, revision: str = "head") -> None:
    """Bring the schema up to `revision` (idempotent)."""
    from alembic import command

    make_engine(settings).dispose()  # creates the folder of a SQLite file
    command.upgrade(alembic_config(settings), revision)


def session_scope(engine: Engine) -> Iterator[Session]:
    """Yield one session per request."""
    with Session(engine) as session:
        yield session
