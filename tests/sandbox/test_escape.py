"""Sandbox escapes (issue 10 item 1): hostile snippets run through the real pool.

(a) a snippet writes its pid into a cgroup outside its own: no effect, limits still hold for it and
    for what it starts; (b) it daemonizes (double fork + setsid): nothing of it survives the run or
    the pool's close; (c) it writes into the repository, a database file, $HOME; /tmp is private.
Where the host cannot isolate, the test is skipped with the missing capability named; what the
host can do is found out here independently of the sandbox's own probes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from app.sandbox.isolate import ENV_CONFINE
from app.sandbox.pool import Pool

from .conftest import ROOT, TEST_LIMITS, _named, _run

# Finds this process's cgroup directories (v1 memory/pids and v2) and tries to move into the
# parent of each and into each hierarchy's root. Prints what it tried and where it ended up.
ESCAPE = r"""
import json, os

def cgroup_dirs():
    own = {}
    with open('/proc/self/cgroup') as fh:
        for line in fh:
            _id, ctrls, path = line.rstrip('\n').split(':', 2)
            for c in (ctrls.split(',') if ctrls else ['']):
                own[c] = path
    found = []
    with open('/proc/self/mountinfo') as fh:
        for line in fh:
            left, _, right = line.partition(' - ')
            f, r = left.split(), right.split()
            if len(f) < 5 or len(r) < 3:
                continue
            if r[0] == 'cgroup2':
                key = ''
            elif r[0] == 'cgroup':
                key = next((o for o in r[2].split(',') if o in ('memory', 'pids')), None)
            else:
                continue
            if key is None or key not in own:
                continue
            path, root = own[key], f[3]
            if root not in ('/', '') and path.startswith(root):
                path = path[len(root):]
            found.append((f[4], os.path.join(f[4], path.lstrip('/'))))
    return found

def own_cgroups():
    with open('/proc/self/cgroup') as fh:
        return fh.read()

def escape():
    before = own_cgroups()
    tried = []
    for mount, mine in cgroup_dirs():
        for target in {os.path.dirname(mine.rstrip('/')), mount}:
            if not target.startswith(mount):
                continue
            try:
                with open(os.path.join(target, 'cgroup.procs'), 'w') as fh:
                    fh.write(str(os.getpid()))
                tried.append([target, 'written'])
            except OSError as exc:
                tried.append([target, type(exc).__name__])
    return {'tried': tried, 'moved': own_cgroups() != before}
"""

DAEMON = r"""
import os, time

def daemonize(name, escape_first):
    r, w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            if escape_first:
                escape()
            import ctypes
            ctypes.CDLL(None).prctl(15, name.encode(), 0, 0, 0)  # PR_SET_NAME: findable in /proc
            os.write(w, str(os.getpid()).encode())
            os.close(w)
            time.sleep(1000)
        os._exit(0)
    os.close(w)
    pid = int(os.read(r, 32) or 0)
    return pid
"""


def _gone(pids_fn, timeout: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := pids_fn()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _host_can_isolate() -> str | None:
    """None when this host lets a process get a private mount namespace (as root, or through an
    unprivileged user namespace) and so a read-only view with its own /tmp; else what is missing.
    Found out with util-linux `unshare`, not with the sandbox's own code."""
    if shutil.which("unshare") is None:
        return "util-linux `unshare` not installed: cannot tell whether mount namespaces are allowed"
    tries = [["unshare", "--mount", "--propagation", "private", "true"]] if os.geteuid() == 0 else []
    tries.append(["unshare", "--user", "--map-root-user", "--mount", "true"])
    errors = []
    for cmd in tries:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        if r.returncode == 0:
            return None
        errors.append(f"`{' '.join(cmd)}`: {r.stderr.strip() or r.returncode}")
    return "no mount namespace for a non-root process here (unprivileged user namespaces off?): " + "; ".join(
        errors
    )


# ---------------------------------------------------------------- (a) cgroups


def test_escape_to_parent_cgroup_has_no_effect_and_memory_limit_holds(pool, enforced):
    if not enforced["memory"]:
        pytest.skip("no memory cgroup on this host: nothing to escape from")
    code = ESCAPE + (
        "print(json.dumps(escape()), flush=True)\n"
        "keep = [b'\\x01' * (64 * 2**20) for _ in range(12)]  # 768 MB, every page touched\n"
        "print('survived', flush=True)\n"
    )
    out = _run(pool, code, limits={"memory_mb": 256, "timeout_s": 20})
    report = json.loads(out["stdout"].splitlines()[0])
    assert report["tried"], "the snippet found no cgroup to try: the test proves nothing"
    assert not report["moved"], report
    assert out["outcome"] == "crashed" and out.get("killed_for_memory"), out
    assert "survived" not in out["stdout"]


def test_descendant_escape_has_no_effect_and_memory_limit_holds(pool, enforced):
    if not enforced["memory"]:
        pytest.skip("no memory cgroup on this host: nothing to escape from")
    code = ESCAPE + (
        "import subprocess, sys\n"
        "child = '''\n" + ESCAPE.replace("\\", "\\\\") + "\n"
        "print(json.dumps(escape()), flush=True)\n"
        "keep = [b'\\\\x01' * (64 * 2**20) for _ in range(12)]\n"
        "print('survived', flush=True)\n'''\n"
        "p = subprocess.run([sys.executable, '-c', child], capture_output=True, text=True)\n"
        "print(p.stdout, end='')\n"
        "print('child status', p.returncode)\n"
    )
    out = _run(pool, code, limits={"memory_mb": 256, "timeout_s": 20})
    assert out["outcome"] == "ok", out
    report = json.loads(out["stdout"].splitlines()[0])
    assert report["tried"] and not report["moved"], report
    assert "survived" not in out["stdout"], out["stdout"]
    assert out["stdout"].rstrip().endswith("child status -9"), out["stdout"]


def test_escape_to_parent_cgroup_then_process_limit_holds(pool, enforced):
    if not enforced["procs"]:
        pytest.skip("no pids cgroup on this host: nothing to escape from")
    code = ESCAPE + (
        "import time\n"
        "print(json.dumps(escape()), flush=True)\n"
        "n = 0\n"
        "try:\n"
        "    for _ in range(400):\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(30)\n"
        "            os._exit(0)\n"
        "        n += 1\n"
        "except OSError as exc:\n"
        "    print('refused', type(exc).__name__)\n"
        "print('forked', n)\n"
    )
    out = _run(pool, code, limits={"max_procs": 64, "timeout_s": 30})
    assert out["outcome"] == "ok", out
    lines = out["stdout"].splitlines()
    report = json.loads(lines[0])
    assert report["tried"] and not report["moved"], report
    assert "refused BlockingIOError" in lines, out
    assert int(lines[-1].split()[1]) < 64, out


# ---------------------------------------------------------------- (b) daemons


def test_daemon_does_not_survive_the_run(pool, next_run_ok):
    name = f"pf-d{uuid.uuid4().hex[:10]}"
    code = ESCAPE + DAEMON + f"print(daemonize({name!r}, escape_first=True))\n"
    try:
        out = _run(pool, code)
        assert out["outcome"] == "ok", out
        pid = int(out["stdout"].split()[0])
        assert pid > 0
        assert _gone(lambda: _named(name)) == [], f"daemon {pid} outlived its run"
        next_run_ok()
    finally:
        _kill_all(_named(name))


def test_daemon_does_not_survive_pool_close():
    name = f"pf-c{uuid.uuid4().hex[:10]}"
    code = ESCAPE + DAEMON + f"daemonize({name!r}, escape_first=True)\nimport time\ntime.sleep(60)\n"
    p = Pool(size=1, spare=0, limits=TEST_LIMITS)
    outcome: dict = {}
    try:
        p.start(wait=False)
        job = {"code": code, "expect": None, "check": None, "requires": {}, "fresh_process": False}
        t = threading.Thread(
            target=lambda: outcome.update(p.run({**job, "limits": {"timeout_s": 60}})), daemon=True
        )
        t.start()
        deadline = time.monotonic() + 60
        while not _named(name) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _named(name), "the daemon never started"
        p.close()
        t.join(15)
        assert _gone(lambda: _named(name)) == [], "a daemon outlived the pool"
    finally:
        p.close()
        _kill_all(_named(name))


# ---------------------------------------------------------------- (c) filesystem


@pytest.fixture(scope="module")
def isolation():
    missing = _host_can_isolate()
    if missing:
        pytest.skip(missing)


def test_snippet_cannot_write_repo_database_or_home(pool, isolation):
    home = Path.home()
    db = home / f".pitfalls-escape-{uuid.uuid4().hex[:8]}.db"
    import sqlite3

    sqlite3.connect(db).execute("create table t (x)").connection.close()
    before = db.read_bytes()
    new_in_repo = ROOT / f".escape-{uuid.uuid4().hex[:8]}"
    new_in_home = home / f".escape-{uuid.uuid4().hex[:8]}"
    targets = {
        "repo_new_file": (str(new_in_repo), "x"),
        "repo_code": (str(ROOT / "app" / "__init__.py"), "a"),
        "database": (str(db), "a"),
        "home_new_file": (str(new_in_home), "x"),
    }
    code = (
        "import json, sqlite3\nres = {}\n"
        f"for key, (path, mode) in {targets!r}.items():\n"
        "    try:\n"
        "        with open(path, mode) as fh:\n"
        "            fh.write('')\n"
        "        res[key] = 'written'\n"
        "    except OSError as exc:\n"
        "        res[key] = type(exc).__name__\n"
        "try:\n"
        f"    c = sqlite3.connect({str(db)!r})\n"
        "    c.execute('insert into t values (1)')\n"
        "    c.commit()\n"
        "    res['sqlite'] = 'written'\n"
        "except Exception as exc:\n"
        "    res['sqlite'] = type(exc).__name__\n"
        "print(json.dumps(res))\n"
    )
    try:
        out = _run(pool, code)
        assert out["outcome"] == "ok", out
        res = json.loads(out["stdout"])
        assert "written" not in res.values(), res
        assert not new_in_repo.exists() and not new_in_home.exists()
        assert db.read_bytes() == before
    finally:
        for p in (new_in_repo, new_in_home, db):
            p.unlink(missing_ok=True)


def test_snippet_cannot_read_the_servers_home(pool, isolation):
    # The server user's own files (keys, tokens) are hidden, not merely read-only.
    secret = Path.home() / f".pitfalls-secret-{uuid.uuid4().hex[:8]}"
    secret.write_text("hunter2")
    secret.chmod(0o600)
    code = (
        "try:\n"
        f"    with open({str(secret)!r}) as fh:\n"
        "        print('read', fh.read())\n"
        "except OSError as exc:\n"
        "    print('refused', type(exc).__name__)\n"
    )
    try:
        out = _run(pool, code)
        assert out["outcome"] == "ok", out
        assert out["stdout"].startswith("refused"), out["stdout"]
    finally:
        secret.unlink()


def test_tmp_is_private_to_the_run(pool, isolation):
    fd, host_marker = tempfile.mkstemp(prefix="pitfalls-host-marker-", dir="/tmp")
    os.close(fd)
    leak = f"/tmp/pitfalls-leak-{uuid.uuid4().hex[:8]}"
    code = (
        "import os\n"
        f"print(os.path.exists({host_marker!r}))\n"
        f"print(os.path.exists({leak!r}))\n"
        f"with open({leak!r}, 'w') as fh:\n    fh.write('x')\n"
        "print(os.access('/tmp', os.W_OK))\n"
    )
    try:
        first = _run(pool, code)
        assert first["outcome"] == "ok", first
        assert first["stdout"].split() == ["False", "False", "True"], first
        assert not os.path.exists(leak), "the run's /tmp file landed in the host's /tmp"
        second = _run(pool, code)  # another run does not see the first run's /tmp either
        assert second["stdout"].split() == ["False", "False", "True"], second
    finally:
        os.unlink(host_marker)
        if os.path.exists(leak):
            os.unlink(leak)


def test_workdir_and_gpu_devices_still_usable(run, isolation):
    # The snippet's own folder stays writable, and /dev is not hidden (CUDA needs /dev/nvidia*).
    nvidia = sorted(str(p) for p in Path("/dev").glob("nvidia*"))
    code = (
        "import glob, os\nwith open('out.txt', 'w') as fh:\n    fh.write('ok')\nwith open('out.txt') as fh:\n    print(fh.read())\n"
        f"print(os.path.exists('/dev/null'), sorted(glob.glob('/dev/nvidia*')) == {nvidia!r})\n"
        "import tempfile\nfd, name = tempfile.mkstemp()\nos.close(fd)\nprint(name.startswith(os.getcwd()))\n"
    )
    out = run(code)
    assert out["outcome"] == "ok", out
    assert out["stdout"].split() == ["ok", "True", "True", "True"], out


# ---------------------------------------------------------------- a server that is not root

USERNS_ATTACKS = ESCAPE + (
    "def w(p, m):\n"
    "    try:\n"
    "        open(p, m).close()\n"
    "        return 'written'\n"
    "    except OSError as exc:\n"
    "        return type(exc).__name__\n"
)


def test_user_namespace_confinement_holds(monkeypatch, isolation):
    # What a non-root server gets (a user namespace keeping its uid, every capability dropped),
    # forced here even as root: the same attacks fail, and the snippet cannot undo the mounts.
    if os.geteuid() != 0 and subprocess.run(["unshare", "-Ur", "true"], capture_output=True).returncode:
        pytest.skip("no unprivileged user namespaces on this host")
    monkeypatch.setenv(ENV_CONFINE, "userns")
    secret = Path.home() / f".pitfalls-secret-{uuid.uuid4().hex[:8]}"
    secret.write_text("hunter2")
    secret.chmod(0o600)
    new_in_repo = ROOT / f".escape-{uuid.uuid4().hex[:8]}"
    code = USERNS_ATTACKS + (  # noqa: UP031  (the snippet is full of braces)
        "import subprocess\n"
        "r = {'esc': escape(), 'repo': w(%r, 'x'), 'secret': w(%r, 'r'), 'tmp': os.listdir('/tmp') != [],\n"
        "     'umount': subprocess.run(['umount', '/tmp'], capture_output=True).returncode,\n"
        "     'remount': subprocess.run(['mount', '-o', 'remount,rw', '/'], capture_output=True).returncode,\n"
        "     'caps': [l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')][0]}\n"
        "print(json.dumps(r))\n"
    ) % (str(new_in_repo), str(secret))
    p = Pool(size=1, spare=0, limits=TEST_LIMITS).start(wait=False)
    try:
        monkeypatch.delenv(ENV_CONFINE)  # the fork server took its environment at start
        out = _run(p, code)
        got = json.loads(out["stdout"])
        assert not got["esc"]["moved"] and got["esc"]["tried"], got
        assert got["repo"] != "written" and got["secret"] != "written", got
        assert got["umount"] != 0 and got["remount"] != 0, got
        assert got["caps"].strip("0") == "", got
        assert not new_in_repo.exists()
    finally:
        p.close()
        secret.unlink()
        new_in_repo.unlink(missing_ok=True)


PROC_CHECKS = (
    "import json, os, threading\n"
    "def opens(p):\n"  # opened for writing, nothing written: enough to show the door is open
    "    try:\n"
    "        os.close(os.open(p, os.O_WRONLY))\n"
    "        return 'opened'\n"
    "    except OSError as exc:\n"
    "        return type(exc).__name__\n"
    "stop = threading.Event()\n"
    "t = threading.Thread(target=stop.wait)\n"
    "t.start()\n"
    "comm = f'/proc/self/task/{t.native_id}/comm'\n"
    "try:\n"  # what glibc's pthread_setname_np does for another thread (CUDA names its threads)
    "    with open(comm, 'w') as fh:\n"
    "        fh.write('renamed')\n"
    "    with open(comm) as fh:\n"
    "        named = fh.read().strip()\n"
    "except OSError as exc:\n"
    "    named = type(exc).__name__\n"
    "stop.set()\n"
    "t.join()\n"
    "print(json.dumps({'named': named, 'system': {p: opens(p) for p in (\n"
    "    '/proc/sys/kernel/hostname', '/proc/sys/vm/drop_caches', '/proc/sysrq-trigger')}}))\n"
)


@pytest.mark.parametrize("mode", ["root", "userns"])
def test_own_proc_files_stay_writable_system_ones_do_not(mode, pool, monkeypatch, isolation):
    # CUDA's initialisation writes into /proc: with all of /proc read-only, cudaGetDeviceCount
    # failed with error 304 on an H100 and no warm child ever became ready. The child's own /proc
    # files are writable; /proc/sys, /proc/sysrq-trigger and the like stay read-only, as in Docker.
    if mode == "root" and os.geteuid() != 0:
        pytest.skip("the server is not root here")
    if mode == "userns":
        if os.geteuid() != 0 and subprocess.run(["unshare", "-Ur", "true"], capture_output=True).returncode:
            pytest.skip("no unprivileged user namespaces on this host")
        monkeypatch.setenv(ENV_CONFINE, "userns")
        pool = Pool(size=1, spare=0, limits=TEST_LIMITS).start(wait=False)
        monkeypatch.delenv(ENV_CONFINE)  # the fork server took its environment at start
    try:
        out = _run(pool, PROC_CHECKS)
        assert out["outcome"] == "ok", out
        got = json.loads(out["stdout"])
        assert got["named"] == "renamed", got
        assert "opened" not in got["system"].values(), got
    finally:
        if mode == "userns":
            pool.close()


def test_fresh_process_is_confined_too(run, isolation):
    # `fresh_process` jobs exec a cold interpreter: it starts confined (no write to the repo, its
    # own /tmp) and its stderr carries nothing of ours.
    target = ROOT / f".escape-{uuid.uuid4().hex[:8]}"
    code = USERNS_ATTACKS + (
        f"print(w({str(target)!r}, 'x'), "
        "','.join(sorted(set(os.listdir('/tmp')) - {os.path.basename(os.getcwd())})) or '-')\n"
    )
    # besides its run folder, /tmp shows only what Python needs and lives there (a checkout in /tmp, as in CI)
    needed = {Path(p).resolve() for p in (ROOT, sys.prefix, Path(sys.executable).resolve().parent)}
    kept = sorted({p.relative_to("/tmp").parts[0] for p in needed if p.is_relative_to("/tmp")})
    try:
        out = run(code, fresh_process=True, limits={"timeout_s": 60})
        assert out["outcome"] == "ok", out
        assert out["stdout"].split()[0] != "written" and not target.exists(), out
        assert out["stdout"].split()[1] == (",".join(kept) or "-"), out["stdout"]
        assert out["stderr"] == "", out["stderr"]
    finally:
        target.unlink(missing_ok=True)
