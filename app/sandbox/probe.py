"""What the sandbox really enforces on this host, found out by attacking it (`pitfalls doctor`).

Each protection is checked by a hostile snippet run through the pool like any other, never by
reading the pool's own claims: it tries to move into a cgroup outside its own, to write into the
code, the database and the server's home, to see and leave files in the host's /tmp, and to leave a
daemon behind. Standard library only.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from .contracts import Protection, make_job

if TYPE_CHECKING:
    from .pool import Pool

# Runs inside the sandbox. Parameters are substituted as Python literals.
_SNIPPET = r"""
import ctypes, json, os, time

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
            key = '' if r[0] == 'cgroup2' else next((o for o in r[2].split(',') if o in ('memory', 'pids')), None) if r[0] == 'cgroup' else None
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
            if target.startswith(mount):
                try:
                    with open(os.path.join(target, 'cgroup.procs'), 'w') as fh:
                        fh.write(str(os.getpid()))
                    tried.append(target + ': written')
                except OSError as exc:
                    tried.append(target + ': ' + type(exc).__name__)
    return {'tried': tried, 'moved': own_cgroups() != before}

def write(path, mode):
    try:
        with open(path, mode) as fh:
            fh.write('')
        return 'written'
    except OSError as exc:
        return type(exc).__name__ + ': ' + (exc.strerror or '')

report = {'escape': escape(), 'writes': {k: write(p, m) for k, (p, m) in TARGETS.items()}}
report['tmp'] = {'host_marker_seen': os.path.exists(MARKER)}
try:
    with open(LEAK, 'w') as fh:
        fh.write('x')
    report['tmp']['leak_written'] = True
except OSError:
    report['tmp']['leak_written'] = False
with open('/proc/self/status') as fh:
    report['caps'] = next((l.split()[1] for l in fh if l.startswith('CapEff:')), '?')
report['uid'] = os.getuid()
try:
    with open(SECRET) as fh:
        report['secret_read'] = fh.read() != ''
except OSError:
    report['secret_read'] = False
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        escape()
        ctypes.CDLL(None).prctl(15, DAEMON.encode(), 0, 0, 0)
        os.write(w, b'1')
        time.sleep(600)
    os._exit(0)
os.close(w)
os.read(r, 1)
print(json.dumps(report))
"""


def _named(name: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                comm = Path(f"/proc/{entry}/comm").read_text().strip()
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if comm == name[:15] and state != "Z":
                found.append(int(entry))
    return found


def probe(
    pool: Pool, *, code_dir: str | None, database: str | None, home: str | None
) -> dict[str, Protection]:
    """Run the hostile snippet on `pool`; {protection: {"enforced": bool, "how": evidence}}."""
    tag = uuid.uuid4().hex[:10]
    targets: dict[str, tuple[str, str]] = {}  # name -> (path, open mode)
    if code_dir:
        targets["code"] = (os.path.join(code_dir, f".pitfalls-probe-{tag}"), "x")
    if database and os.path.isfile(database):
        targets["database"] = (database, "r+")  # opened for writing; nothing is written
    if home:
        targets["home"] = (os.path.join(home, f".pitfalls-probe-{tag}"), "x")
    fd, marker = tempfile.mkstemp(prefix="pitfalls-probe-")
    os.close(fd)
    leak = os.path.join(tempfile.gettempdir(), f"pitfalls-probe-leak-{tag}")
    daemon = f"pf-probe-{tag}"[:15]
    secret = os.path.join(home, f".pitfalls-probe-secret-{tag}") if home else None
    if secret:
        fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, b"secret")
        os.close(fd)
    params = (
        f"TARGETS = {targets!r}\nMARKER = {marker!r}\nLEAK = {leak!r}\nDAEMON = {daemon!r}\n"
        f"SECRET = {secret or '/nonexistent'!r}\n"
    )
    try:
        out = pool.run(make_job(params + _SNIPPET, limits={"timeout_s": 30}))
        survivors = _named(daemon)
        deadline = time.monotonic() + 3
        while survivors and time.monotonic() < deadline:
            time.sleep(0.05)
            survivors = _named(daemon)
        leaked = os.path.exists(leak)
    finally:
        for pid in _named(daemon):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for path in [marker, leak, secret or ""] + [p for k, (p, _m) in targets.items() if k != "database"]:
            try:
                os.unlink(path)
            except OSError:
                pass
    try:
        report = json.loads(out.get("stdout") or "")
    except ValueError:
        why = f"not known: the probe did not run ({out.get('outcome')}: {out.get('reason')})"
        return {
            k: {"enforced": False, "how": why} for k in ("cgroup_escape", "daemons", "private_tmp", *targets)
        }
    result: dict[str, Protection] = {}
    esc = report["escape"]
    if not esc["tried"]:
        result["cgroup_escape"] = {
            "enforced": False,
            "how": "no cgroup here: no memory or process limit to keep",
        }
    else:
        result["cgroup_escape"] = {
            "enforced": not esc["moved"],
            "how": ("moved out of its cgroup: " if esc["moved"] else "stayed in its cgroup; tried ")
            + "; ".join(esc["tried"]),
        }
    result["daemons"] = {
        "enforced": not survivors,
        "how": f"a double-forked, setsid daemon outlived its run (pids {survivors})"
        if survivors
        else "a double-forked, setsid daemon died with its run",
    }
    tmp = report["tmp"]
    private = not tmp["host_marker_seen"] and not leaked
    result["private_tmp"] = {
        "enforced": private,
        "how": "the run saw none of the host's /tmp and left nothing there"
        if private
        else f"the host's /tmp is shared (saw a host file: {tmp['host_marker_seen']}, left one: {leaked})",
    }
    for key, (path, _mode) in targets.items():
        got = report["writes"][key]
        result[key] = {
            "enforced": got != "written",
            "how": f"writing {path}: {got}" if got != "written" else f"the snippet could write {path}",
        }
    if secret:
        result["home_secrets"] = {
            "enforced": not report["secret_read"],
            "how": f"the snippet read {secret} (mode 600, the server's)"
            if report["secret_read"]
            else "a file private to the server's user in its home was not readable",
        }
    result["privileges"] = {
        "enforced": report["caps"].strip("0") == "" and report["uid"] != os.getuid(),
        "how": f"uid {report['uid']} (the server's: {os.getuid()}), effective capabilities {report['caps']}",
    }
    return result
