"""Memory and process limits through cgroups, where the host lets us make child cgroups.

DESIGN.md: RLIMIT_AS is no memory limit for torch and RLIMIT_NPROC counts threads, so memory and
process counts are limited per run with a cgroup: v2 `memory.max`/`pids.max` when our cgroup can
delegate those controllers, else v1 `memory.limit_in_bytes`/`pids.max` hierarchies (hybrid hosts),
else nothing, and `enforced` says so plainly. The child joins its own cgroup before running anything.
"""

from __future__ import annotations

import errno
import itertools
import os
import re
import signal
import time

from .contracts import Protection

ENV_BASE = "PITFALLS_SANDBOX_CGROUP"  # a delegated, empty v2 cgroup to put runs under
_managers = itertools.count(1)  # several pools in one process must not share a base cgroup


def _write(path: str, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _read(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return ""


def _mounts() -> dict[str, tuple[str, str]]:
    """{'cgroup2' | 'memory' | 'pids': (mount point, cgroup path the mount shows as its root)}."""
    out: dict[str, tuple[str, str]] = {}
    for line in _read("/proc/self/mountinfo").splitlines():
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 3:
            continue
        if rfields[0] == "cgroup2":
            out.setdefault("cgroup2", (fields[4], fields[3]))
        elif rfields[0] == "cgroup":
            for opt in rfields[2].split(","):
                if opt in ("memory", "pids"):
                    out.setdefault(opt, (fields[4], fields[3]))
    return out


def _own_dir(mount: tuple[str, str], own: str) -> str:
    """Our cgroup's directory: /proc/self/cgroup gives a path from the hierarchy's root, and a
    container's mount may show a subtree (mountinfo's root field) or, with a cgroup namespace,
    paths relative to it."""
    point, root = mount
    rel = own
    if root not in ("/", "") and (own == root or own.startswith(root.rstrip("/") + "/")):
        rel = own[len(root.rstrip("/")) :]
    path = os.path.join(point, rel.lstrip("/"))
    if os.path.isdir(path):
        return path
    me = str(os.getpid())  # a view we can't map: look for the cgroup that lists us
    for seen, (dirpath, dirnames, _files) in enumerate(os.walk(point)):
        if me in _read(os.path.join(dirpath, "cgroup.procs")).split():
            return dirpath
        if seen > 2000 or dirpath.count("/") - point.count("/") >= 6:
            dirnames[:] = []
    return path


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _sweep(parent: str) -> None:
    """Remove the cgroups of pools whose process died without closing them (SIGKILL, OOM)."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        m = re.fullmatch(r"pitfalls-(\d+)(?:-\d+)?", name)
        if not m or _pid_alive(int(m.group(1))):
            continue
        _remove_runs(os.path.join(parent, name), tries=1)


def _remove_runs(base: str, *, tries: int) -> None:
    """Kill what is left in `base`'s run cgroups, remove them, then `base` itself."""
    for sub in [s for s in os.listdir(base) if s.startswith("run-")] if os.path.isdir(base) else []:
        path = os.path.join(base, sub)
        for attempt in range(tries):
            for pid in _read(os.path.join(path, "cgroup.procs")).split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
            try:
                os.rmdir(path)
                break
            except OSError:
                if attempt + 1 < tries:
                    time.sleep(0.01)  # the killed processes take a moment to leave the cgroup
    try:
        os.rmdir(base)
    except OSError:
        pass


def _own_paths() -> dict[str, str]:
    """Our cgroup path per controller ('' key for v2) from /proc/self/cgroup."""
    out = {}
    for line in _read("/proc/self/cgroup").splitlines():
        _id, ctrls, path = line.split(":", 2)
        for c in ctrls.split(",") if ctrls else [""]:
            out[c] = path
    return out


class Cgroup:
    """One run's cgroup (one directory per hierarchy)."""

    def __init__(self, mgr: CgroupManager, dirs: dict[str, str]):
        self.mgr, self.dirs = mgr, dirs
        self.limits: tuple[int, int] | None = None

    @property
    def procs_files(self) -> list[str]:
        return [os.path.join(d, "cgroup.procs") for d in dict.fromkeys(self.dirs.values())]

    def set_limits(self, memory_mb: int, max_procs: int) -> None:
        if self.limits == (memory_mb, max_procs):
            return
        mem = str(int(memory_mb) * 1024 * 1024)
        if self.mgr.kind == "v2":
            d = self.dirs["memory"]
            _write(os.path.join(d, "memory.max"), mem)
            if os.path.exists(os.path.join(d, "memory.swap.max")):
                _write(os.path.join(d, "memory.swap.max"), "0")
            _write(os.path.join(d, "pids.max"), str(max_procs))
        else:
            d = self.dirs["memory"]
            memsw = os.path.join(d, "memory.memsw.limit_in_bytes")
            has_sw = os.path.exists(memsw)
            if has_sw and self.limits and int(memory_mb) > self.limits[0]:
                _write(memsw, mem)  # v1: memsw must stay >= the memory limit while raising it
            _write(os.path.join(d, "memory.limit_in_bytes"), mem)
            if has_sw:
                _write(memsw, mem)
            _write(os.path.join(self.dirs["pids"], "pids.max"), str(max_procs))
        self.limits = (memory_mb, max_procs)

    def oom_kills(self) -> int:
        d = self.dirs["memory"]
        text = _read(os.path.join(d, "memory.events" if self.mgr.kind == "v2" else "memory.oom_control"))
        for line in text.splitlines():
            key, _, val = line.partition(" ")
            if key == "oom_kill":
                return int(val)
        return 0

    def pids(self) -> list[int]:
        out: set[int] = set()
        for f in self.procs_files:
            out.update(int(p) for p in _read(f).split())
        return sorted(out)

    def kill(self) -> None:
        """SIGKILL everything in the cgroup, escaped process groups and sessions included."""
        if self.mgr.kind == "v2" and os.path.exists(os.path.join(self.dirs["memory"], "cgroup.kill")):
            try:
                _write(os.path.join(self.dirs["memory"], "cgroup.kill"), "1")
                return
            except OSError:
                pass
        for _ in range(100):  # v1: no atomic kill; a fork bomb is bounded by pids.max
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass

    def remove(self, wait_s: float = 2.0) -> bool:
        """rmdir every directory; processes that were just killed may take a moment to leave."""
        deadline = time.monotonic() + wait_s
        for d in dict.fromkeys(self.dirs.values()):
            while True:
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                        return False
                    self.kill()
                    time.sleep(0.01)
        return True


class CgroupManager:
    """Finds where this process may create cgroups; creates one per run."""

    def __init__(self, *, enable: bool = True):
        self.kind: str | None = None
        self.base: dict[str, str] = {}
        self.reason = "disabled"
        self._ids = itertools.count(1)
        if enable:
            try:
                self._setup()
            except OSError as exc:
                self.kind, self.reason = None, f"cannot create cgroups here ({exc})"

    def _setup(self) -> None:
        mounts, own = _mounts(), _own_paths()
        tag = f"pitfalls-{os.getpid()}-{next(_managers)}"
        errors = []
        if "cgroup2" in mounts:
            parent = os.environ.get(ENV_BASE) or _own_dir(mounts["cgroup2"], own.get("", "/"))
            try:
                if not os.path.isdir(parent):
                    raise OSError(
                        errno.ENOENT,
                        f"our cgroup {own.get('', '?')} is not visible there "
                        f"(another cgroup namespace or mount); give a delegated cgroup in {ENV_BASE}",
                    )
                self._setup_v2(parent, tag)
                return
            except OSError as exc:
                hint = ""
                if exc.errno == errno.EBUSY:
                    hint = (
                        " (our cgroup holds processes, so it cannot delegate controllers; give an empty, "
                        f"delegated cgroup in {ENV_BASE})"
                    )
                errors.append(f"cgroup v2 under {parent}: {exc.strerror or exc}{hint}")
        if "memory" in mounts and "pids" in mounts:
            dirs = {}
            try:
                for c in ("memory", "pids"):
                    parent = _own_dir(mounts[c], own.get(c, "/"))
                    _sweep(parent)
                    d = os.path.join(parent, tag)
                    os.makedirs(d, exist_ok=True)
                    dirs[c] = d
                self.kind, self.base = "v1", dirs
                self.reason = "cgroup v1 memory.limit_in_bytes + pids.max per run"
                return
            except OSError as exc:
                errors.append(f"cgroup v1: {exc.strerror or exc}")
        self.reason = "; ".join(errors) or "no cgroup filesystem with memory and pids controllers"

    def _setup_v2(self, parent: str, tag: str) -> None:
        have = _read(os.path.join(parent, "cgroup.subtree_control")).split()
        if not {"memory", "pids"} <= set(have):
            # Fails with EBUSY when our cgroup holds processes (the no-internal-process rule):
            # then a delegated, empty cgroup must be given through PITFALLS_SANDBOX_CGROUP.
            _write(os.path.join(parent, "cgroup.subtree_control"), "+memory +pids")
        _sweep(parent)
        base = os.path.join(parent, tag)
        os.makedirs(base, exist_ok=True)
        try:
            _write(os.path.join(base, "cgroup.subtree_control"), "+memory +pids")
        except OSError:
            os.rmdir(base)
            raise
        self.kind, self.base = "v2", {"memory": base, "pids": base}
        self.reason = "cgroup v2 memory.max + pids.max per run"

    def create(self, memory_mb: int, max_procs: int) -> Cgroup | None:
        """A fresh cgroup with these limits, or None when cgroups are not available."""
        if self.kind is None:
            return None
        name = f"run-{next(self._ids)}"
        dirs = {c: os.path.join(b, name) for c, b in self.base.items()}
        for d in dict.fromkeys(dirs.values()):
            os.makedirs(d, exist_ok=True)
        cg = Cgroup(self, dirs)
        cg.set_limits(memory_mb, max_procs)
        return cg

    def close(self) -> None:
        """Kill what is left in our runs' cgroups and remove them and the base."""
        for d in dict.fromkeys(self.base.values()):
            _remove_runs(d, tries=100)

    def enforced(self) -> dict[str, Protection]:
        on = self.kind is not None
        return {
            "memory": {"enforced": on, "how": self.reason if on else f"not enforced: {self.reason}"},
            "procs": {"enforced": on, "how": self.reason if on else f"not enforced: {self.reason}"},
        }
