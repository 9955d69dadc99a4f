"""A private PostgreSQL server for tests and benches: `initdb` + `pg_ctl` on a free port, its data in a
temporary folder, gone when stopped.

The binaries come from Debian's `postgresql` package (`scripts/install-postgres`), found under
/usr/lib/postgresql/*/bin (or on PATH). PostgreSQL refuses to run as root: as root the server runs as
the package's `postgres` user (or `nobody`). The driver is psycopg 3 (`pip install -e '.[postgres]'`).
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

USER = "pitfalls"


def bin_dir() -> Path | None:
    """The newest installed PostgreSQL's bin folder."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def unavailable() -> str | None:
    """Why a private server cannot start here, or None."""
    if bin_dir() is None:
        return (
            "PostgreSQL is not installed (no initdb under /usr/lib/postgresql/*/bin or on PATH): "
            "run scripts/install-postgres"
        )
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "the psycopg driver is not installed: pip install -e '.[postgres]'"
    if os.geteuid() == 0 and _run_as() is None:
        return "running as root and there is no 'postgres' or 'nobody' user to run PostgreSQL as"
    return None


def _run_as() -> str | None:
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name).pw_name
        except KeyError:
            continue
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One running server; `database()` hands out fresh, empty databases on it."""

    def __init__(self, *, durable: bool = False) -> None:
        self.durable = durable  # False (tests): fsync off, the data is thrown away anyway
        self.bin = bin_dir()
        self.user = _run_as()
        # not under pytest's 0700 tmp folders: the server's own user must reach it
        self.root = Path(tempfile.mkdtemp(prefix="pitfalls-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self._names = itertools.count(1)
        self.log = self.root / "server.log"

    def _cmd(self, *args: str, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(self.bin / args[0]), *args[1:]],
            check=True,
            capture_output=True,
            text=True,
            user=self.user,
            **kw,
        )

    def start(self) -> Server:
        if self.user:
            shutil.chown(self.root, self.user)
        self._cmd(
            "initdb", "-D", str(self.data), "-U", USER, "-A", "trust", "-E", "UTF8", "--no-sync", "--locale=C"
        )
        opts = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c max_connections=200"
        if not self.durable:  # a test server: durability traded for speed
            opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self._cmd("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", opts, "-w", "-t", "60", "start")
        return self

    def stop(self) -> None:
        try:
            self._cmd("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{USER}@127.0.0.1:{self.port}/{database}"

    def execute(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(
            f"host=127.0.0.1 port={self.port} user={USER} dbname=postgres", autocommit=True
        ) as conn:
            conn.execute(sql)

    def database(self, *, template: str | None = None, name: str | None = None) -> str:
        """A new database (a copy of `template` when given); its SQLAlchemy URL."""
        name = name or f"t{next(self._names)}"
        self.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
        return self.url(name)

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
