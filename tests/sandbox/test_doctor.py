"""`pitfalls doctor` says a protection holds exactly when an attacking snippet fails against it
(issue 10 item 1 (d)): checked with confinement on, and switched off, where every claim must flip."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from app.sandbox.isolate import ENV_CONFINE
from app.sandbox.pool import Pool

from .conftest import ROOT, TEST_LIMITS, _named, _run
from .test_escape import DAEMON, ESCAPE

FS_KEYS = ("code", "database", "home", "home_secrets", "private_tmp")


def _doctor(env: dict) -> dict:
    r = subprocess.run(
        [sys.executable, "-c", "from app.cli import main; main()", "doctor", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _truth(pool, db: Path) -> dict[str, bool]:
    """What an attacking snippet actually achieves on `pool` (True: the protection held)."""
    tag = uuid.uuid4().hex[:8]
    in_repo, in_home = ROOT / f".truth-{tag}", Path.home() / f".truth-{tag}"
    fd, marker = tempfile.mkstemp(prefix="pitfalls-truth-")
    os.close(fd)
    secret = Path.home() / f".truth-secret-{tag}"
    secret.write_text("secret")
    secret.chmod(0o600)
    name = f"pf-t{tag}"
    code = (
        ESCAPE
        + DAEMON
        + (
            "def w(p, m):\n"
            "    try:\n"
            "        open(p, m).close()\n"
            "        return True\n"
            "    except OSError:\n"
            "        return False\n"
            f"print(json.dumps({{'esc': escape(), 'repo': w({str(in_repo)!r}, 'x'), "
            f"'home': w({str(in_home)!r}, 'x'), 'db': w({str(db)!r}, 'r+'), "
            f"'marker': os.path.exists({marker!r}), 'secret': w({str(secret)!r}, 'r'), "
            "'caps': [l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')][0], "
            f"'uid': os.getuid(), 'daemon': daemonize({name!r}, escape_first=True)}}))\n"
        )
    )
    try:
        out = _run(pool, code)
        got = json.loads(out["stdout"])
        deadline = time.monotonic() + 3
        while _named(name) and time.monotonic() < deadline:
            time.sleep(0.05)
        survived = bool(_named(name))
    finally:
        for pid in _named(name):
            os.kill(pid, signal.SIGKILL)
        for p in (in_repo, in_home, Path(marker), secret):
            p.unlink(missing_ok=True)
    return {
        "cgroup_escape": bool(got["esc"]["tried"]) and not got["esc"]["moved"],
        "daemons": not survived,
        "code": not got["repo"],
        "home": not got["home"],
        "database": not got["db"],
        "private_tmp": not got["marker"],
        "home_secrets": not got["secret"],
        "privileges": got["caps"].strip("0") == "" and got["uid"] != os.getuid(),
    }


@pytest.fixture
def db_env():
    db = Path.home() / f".pitfalls-doctor-{uuid.uuid4().hex[:8]}.db"
    sqlite3.connect(db).execute("create table t (x)").connection.close()
    env = {**os.environ, "PITFALLS_DATABASE_URL": f"sqlite:///{db}", "PITFALLS_WORKER_SPARE": "0"}
    yield db, env
    db.unlink(missing_ok=True)


def test_doctor_reports_what_attacks_find(pool, db_env):
    db, env = db_env
    report = _doctor(env)["protections"]
    truth = _truth(pool, db)
    assert {k: report[k]["enforced"] for k in truth} == truth, report


def test_doctor_reports_confinement_switched_off(db_env, monkeypatch):
    db, env = db_env
    monkeypatch.setenv(ENV_CONFINE, "0")
    plain = Pool(size=1, spare=0, limits=TEST_LIMITS).start(wait=False)
    try:
        truth = _truth(plain, db)
    finally:
        plain.close()
    # switched off, the snippet writes the code, the database and home, and sees the host's /tmp
    assert not any(truth[k] for k in FS_KEYS), truth
    report = _doctor({**env, ENV_CONFINE: "0"})["protections"]
    assert {k: report[k]["enforced"] for k in truth} == truth, report
