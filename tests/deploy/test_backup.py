"""`pitfalls backup PATH` takes a consistent copy of a live SQLite database (WAL mode, writers busy)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from app.config import Settings
from app.db import migrate

from .conftest import ROOT, tool


def pitfalls(*args: str, env: dict, timeout: float = 60) -> subprocess.CompletedProcess:
    exe = tool("pitfalls")
    cmd = [exe, *args] if exe else [sys.executable, "-c", "from app.cli import main; main()", *args]
    return subprocess.run(
        cmd, env={**os.environ, **env}, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )


def meta_count(path) -> int:
    with sqlite3.connect(path) as c:
        return c.execute("SELECT count(*) FROM meta").fetchone()[0]


@pytest.fixture
def live_db(tmp_path):
    """A migrated database with rows committed only to the WAL so far, and a writer holding it open."""
    db = tmp_path / "live" / "pitfalls.db"
    migrate(Settings(database_url=f"sqlite:///{db}"))
    writer = sqlite3.connect(db, check_same_thread=False, isolation_level=None)
    assert writer.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
    writer.execute("PRAGMA wal_autocheckpoint=0")  # keep the new rows in the -wal file, not the main file
    writer.execute("BEGIN")
    writer.executemany("INSERT INTO meta VALUES (?, ?)", [(f"committed-{i}", "x" * 200) for i in range(500)])
    writer.execute("COMMIT")
    assert (db.parent / "pitfalls.db-wal").stat().st_size > 0
    yield db, writer
    writer.close()


def backup(db, copy) -> None:
    proc = pitfalls("backup", str(copy), env={"PITFALLS_DATABASE_URL": f"sqlite:///{db}"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert copy.exists() and not copy.with_name(copy.name + "-wal").exists()


def keys_in(path) -> set[str]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as c:
        assert c.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert c.execute("SELECT count(*) FROM alembic_version").fetchone() == (1,)
        assert c.execute("SELECT count(*) FROM sqlite_master WHERE name = 'entry_fts'").fetchone() == (1,)
        return {k for (k,) in c.execute("SELECT key FROM meta")}


def test_backup_with_a_write_transaction_open(live_db, tmp_path):
    db, writer = live_db
    writer.execute("BEGIN IMMEDIATE")  # the server is in the middle of writing
    writer.execute("INSERT INTO meta VALUES ('uncommitted', 'x')")
    copy = tmp_path / "backups" / "pitfalls-copy.db"
    backup(db, copy)
    writer.execute("COMMIT")  # the live database goes on working

    keys = keys_in(copy)
    assert {f"committed-{i}" for i in range(500)} <= keys  # rows that were only in the WAL
    assert "uncommitted" not in keys
    assert meta_count(db) == 501


def test_backup_while_another_process_keeps_committing(live_db, tmp_path):
    db, _writer = live_db
    stop, written = threading.Event(), []

    def keep_writing() -> None:
        busy = sqlite3.connect(db, isolation_level=None, timeout=5)
        while not stop.is_set():
            busy.execute("INSERT INTO meta VALUES (?, 'y')", (f"busy-{len(written)}",))
            written.append(1)
        busy.close()

    thread = threading.Thread(target=keep_writing, daemon=True)
    thread.start()
    while not written:
        time.sleep(0.01)
    copy = tmp_path / "pitfalls-copy.db"
    try:
        backup(db, copy)
    finally:
        stop.set()
        thread.join(10)
    busy_in_copy = sorted(int(k.split("-")[1]) for k in keys_in(copy) if k.startswith("busy-"))
    # a snapshot: some prefix of the commits, without holes, and the writer was never blocked for good
    assert busy_in_copy == list(range(len(busy_in_copy))) and busy_in_copy
    assert len(written) > len(busy_in_copy)
    assert meta_count(db) == 500 + len(written)


def test_restore_is_a_file_copy_while_stopped(live_db, tmp_path):
    """The documented restore: stop, copy the backup over the database, drop -wal/-shm, start."""
    db, writer = live_db
    copy = tmp_path / "backup.db"
    backup(db, copy)
    writer.execute("INSERT INTO meta VALUES ('after-backup', 'lost on restore')")
    writer.close()  # "docker compose stop"

    shutil.copyfile(copy, db)
    for suffix in ("-wal", "-shm"):
        (db.parent / f"pitfalls.db{suffix}").unlink(missing_ok=True)
    migrate(Settings(database_url=f"sqlite:///{db}"))  # what the restarted server does first
    with sqlite3.connect(db) as c:
        keys = {k for (k,) in c.execute("SELECT key FROM meta")}
    assert "committed-0" in keys and "after-backup" not in keys


def test_backup_refuses_what_it_cannot_copy(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    urls = (f"sqlite:///{tmp_path / 'nothing-here.db'}", "postgresql://db/pitfalls")
    with ThreadPoolExecutor(2) as pool:
        missing, other = pool.map(
            lambda url: pitfalls("backup", str(tmp_path / "x.db"), env={"PITFALLS_DATABASE_URL": url}), urls
        )
    assert missing.returncode == 2 and "no database" in missing.stdout + missing.stderr
    assert other.returncode == 2 and "pg_dump" in other.stdout + other.stderr
