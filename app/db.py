"""Database engine, SQLite pragmas, migrations, the session dependency, and the queue's wake-ups.

Two backends, chosen by `PITFALLS_DATABASE_URL`: SQLite (the embedded default: one file, one web
process) and PostgreSQL (`postgresql://...`, driver psycopg 3 from the `postgres` extra: several web
replicas on one database).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import event, text
from sqlalchemy.engine import Engine, make_url
from sqlmodel import Session, create_engine

from .config import Settings

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"
QUEUE_CHANNEL = "pitfalls_queue"  # NOTIFY on it when a run is queued; LISTENed to by every replica
BACKENDS = ("sqlite", "postgresql")
STARTUP_LOCK = 0x7069746661  # advisory lock key: migrations and the content sync at start
log = logging.getLogger("pitfalls")


def normalize_url(url: str) -> str:
    """`postgresql://` and `postgres://` URLs use psycopg 3 (SQLAlchemy would pick psycopg2)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def backend(url_or_engine: str | Engine) -> str:
    """'sqlite' or 'postgresql'; anything else is refused with the supported list."""
    url = url_or_engine.url if isinstance(url_or_engine, Engine) else make_url(normalize_url(url_or_engine))
    name = url.get_backend_name()
    if name not in BACKENDS:
        raise ValueError(
            f"unsupported database {name!r} in PITFALLS_DATABASE_URL: use sqlite:///path or "
            "postgresql://user:password@host/database"
        )
    return name


def make_engine(settings: Settings) -> Engine:
    """An engine set up on purpose: SQLite with WAL, foreign keys and a busy timeout; PostgreSQL with a
    pool that checks connections (a restarted server or a failover does not break the next request)."""
    url = normalize_url(settings.database_url)
    if backend(url) == "postgresql":
        return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20, pool_recycle=1800)
    if (path := settings.sqlite_path()) is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn: sqlite3.Connection, _record: object) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA busy_timeout=5000")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()

    return engine


def alembic_config(settings: Settings) -> Config:
    """Alembic config pointing at our migrations folder and the settings' database."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", normalize_url(settings.database_url).replace("%", "%%"))
    return cfg


def migrate(settings: Settings, revision: str = "head") -> None:
    """Bring the schema up to `revision` (idempotent; replicas starting at once take turns on PostgreSQL)."""
    from alembic import command

    make_engine(settings).dispose()  # creates the folder of a SQLite file
    command.upgrade(alembic_config(settings), revision)


def session_scope(engine: Engine) -> Iterator[Session]:
    """Yield one session per request."""
    with Session(engine) as session:
        yield session


@contextmanager
def startup_lock(engine: Engine) -> Iterator[None]:
    """Replicas starting at once migrate and sync one after the other (PostgreSQL: an advisory lock
    held on its own connection; SQLite: one process, nothing to do)."""
    if backend(engine) != "postgresql":
        yield
        return
    with engine.connect() as conn:
        conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": STARTUP_LOCK})
        conn.commit()
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": STARTUP_LOCK})
            conn.commit()


class QueueListener:
    """Wakes this process's long-polling workers when any replica queues a run (PostgreSQL).

    A thread holds its own connection LISTENing on `QUEUE_CHANNEL` and calls `wake` for each NOTIFY
    (sent by `runs.create_run` inside its transaction, so delivered at commit). If the connection drops,
    it reconnects; the long polls' one-second fallback covers the gap. SQLite needs none: there is one
    web process, which wakes its polls directly.
    """

    def __init__(self, engine: Engine, wake: Callable[[], object]):
        self.url = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        self.wake = wake
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="pitfalls-queue-listener", daemon=True)
        self.listening = threading.Event()

    def start(self) -> QueueListener:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=3)

    def _loop(self) -> None:
        import psycopg

        while not self._stop.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
                    conn.execute(f"LISTEN {QUEUE_CHANNEL}")
                    self.listening.set()
                    while not self._stop.is_set():
                        for _ in conn.notifies(timeout=0.5, stop_after=1):
                            self.wake()
            except psycopg.Error as exc:
                self.listening.clear()
                log.warning("queue listener: %s; reconnecting (long polls fall back to polling)", exc)
                self._stop.wait(1.0)


def queue_listener(engine: Engine, wake: Callable[[], object]) -> QueueListener | None:
    """A started listener on PostgreSQL, None on SQLite."""
    return QueueListener(engine, wake).start() if backend(engine) == "postgresql" else None
