"""Inside a sandbox child: limits that the process sets on itself (stdlib only).

Called in the child after the fork (or before the exec of a cold child), never in the fork server.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import resource
import socket
import stat
import struct
import sys

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


def _unshare(flags: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _loopback_up() -> None:
    """A new network namespace starts with `lo` down; multiprocessing/gloo snippets need 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifr = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(s, _SIOCGIFFLAGS, ifr))[1]
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | _IFF_UP))


def no_network() -> tuple[bool, str]:
    """Move this process into an empty network namespace (loopback only). Returns (done, how).

    Needs CAP_SYS_ADMIN, or else an unprivileged user namespace (which only a single-threaded
    process may create: call this before torch starts its thread pools).
    """
    try:
        _unshare(CLONE_NEWNET)
        how = "network namespace (loopback only)"
    except OSError as first:
        uid, gid = os.getuid(), os.getgid()
        try:
            _unshare(CLONE_NEWUSER | CLONE_NEWNET)
            for name, text in (
                ("setgroups", "deny"),
                ("uid_map", f"{uid} {uid} 1"),
                ("gid_map", f"{gid} {gid} 1"),
            ):
                with open(f"/proc/self/{name}", "w") as fh:
                    fh.write(text)
            how = "user + network namespace (loopback only)"
        except OSError as second:
            return (
                False,
                (
                    f"not enforced: unshare(CLONE_NEWNET) failed ({first.strerror}); "
                    f"with a user namespace too ({second.strerror})"
                ),
            )
    try:
        _loopback_up()
    except OSError as exc:
        how += f"; loopback left down ({exc.strerror})"
    return True, how


def set_run_limits(*, cpu_s: float, max_file_mb: float) -> None:
    """RLIMIT_CPU counted from now (warm-up excluded), RLIMIT_FSIZE, and no core dumps."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(ru.ru_utime + ru.ru_stime + cpu_s) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 2))  # SIGXCPU, then SIGKILL 2 s later
    size = int(max_file_mb * 1024 * 1024)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a segfault must not write 200 MB of core


def join_cgroup(procs_files: list[str]) -> None:
    for path in procs_files:
        with open(path, "w") as fh:
            fh.write(str(os.getpid()))


# ---------------------------------------------------------------- confinement (issue 10 item 1)
# The child runs where it cannot write the code, the database or the server's home, with a /tmp
# and /dev/shm of its own, as a user that cannot write the pool's cgroup files:
# - root (CAP_SYS_ADMIN): a private mount namespace, everything read-only but the run's folder,
#   fresh tmpfs on /tmp and /dev/shm, and procfs (CUDA writes there; the kernel's settings stay
#   read-only), then setuid to an unprivileged uid (no capabilities left);
# - not root: the same mounts inside an unprivileged user namespace (own uid mapped to itself),
#   then every capability dropped, so the read-only mounts cannot be undone;
# - neither: nothing, and `confine` says so. Called while the child is still single-threaded.

CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 0x1, 0x2, 0x4, 0x1000, 0x4000, 1 << 18
AT_RECURSIVE, MOUNT_ATTR_RDONLY = 0x8000, 0x1
_SYS_MOUNT_SETATTR = 442  # the same number on every architecture (syscalls added after 5.1)
PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG = 38, 1
DEFAULT_UID = 65534  # nobody
ENV_UID = "PITFALLS_SANDBOX_UID"  # the unprivileged uid children run as when the pool runs as root
# "0": no namespaces, no uid change (tests, debugging); "userns": even as root, confine the way a
# non-root server is confined (a user namespace keeping the uid, no capabilities), to test that path
ENV_CONFINE = "PITFALLS_SANDBOX_CONFINE"


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(ret: int) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _enc(s: str | None) -> bytes | None:
    return s.encode() if s is not None else None


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc().mount(_enc(source), _enc(target), _enc(fstype), ctypes.c_ulong(flags), _enc(data)))


def _setattr(path: str, *, set_: int = 0, clr: int = 0, recursive: bool = False) -> None:
    attr = _MountAttr(set_, clr, 0, 0)
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    ret = libc.syscall(
        ctypes.c_long(_SYS_MOUNT_SETATTR),
        ctypes.c_int(-100),  # AT_FDCWD
        path.encode(),
        ctypes.c_uint(AT_RECURSIVE if recursive else 0),
        ctypes.byref(attr),
        ctypes.c_size_t(ctypes.sizeof(attr)),
    )
    _check(0 if ret == 0 else -1)


def _drop_capabilities() -> None:
    """capset(2) to nothing, for this (single) thread; the bounding set goes too."""
    libc = _libc()
    for cap in range(64):
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP; EINVAL past the last capability
            break
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = (ctypes.c_uint32 * 6)()
    _check(libc.capset(header, data))


def _private_mounts(workdir: str | None, tmp_mb: int) -> None:
    keep = os.open(workdir, os.O_PATH | os.O_CLOEXEC) if workdir else None
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing we do here reaches the host
    _setattr("/", set_=MOUNT_ATTR_RDONLY, recursive=True)
    if os.path.isdir("/proc/self"):
        _writable_proc()
    size = f"size={max(16, int(tmp_mb))}m"
    for point in ("/tmp", "/dev/shm"):
        if os.path.isdir(point):
            # a checkout or a venv under /tmp (CI) stays readable: a fresh interpreter needs it
            _cover(point, f"mode=1777,{size}")
    if workdir and keep is not None:
        # the run's folder (made by the pool, so that it can read results and clean up) keeps its
        # path, on top of the private /tmp or wherever TMPDIR put it
        os.makedirs(workdir, exist_ok=True)
        _mount(f"/proc/self/fd/{keep}", workdir, None, MS_BIND)
        _setattr(workdir, clr=MOUNT_ATTR_RDONLY)
        os.close(keep)


# What Docker keeps read-only in a container's /proc: the kernel's settings and triggers
PROC_READ_ONLY = ("/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger")


def _writable_proc() -> None:
    """CUDA's initialisation writes into /proc: with all of it read-only, cudaGetDeviceCount fails
    with error 304 ("OS call failed", seen on an H100). So procfs stays writable, with its own
    permissions (a child writes its own process's files), but, as in Docker's default container,
    the kernel's settings and triggers are bound read-only over themselves: a uid 0 kept in a user
    namespace could otherwise write the host's /proc/sys."""
    _setattr("/proc", clr=MOUNT_ATTR_RDONLY)
    for path in PROC_READ_ONLY:
        if os.path.exists(path):
            _mount(path, path, None, MS_BIND | MS_REC)
            _setattr(path, set_=MOUNT_ATTR_RDONLY, recursive=True)


def confine(*, network: bool, workdir: str | None, tmp_mb: int = 1024) -> dict[str, tuple[bool, str]]:
    """Namespaces and an unprivileged identity for this child; returns {protection: (done, how)}.

    Replaces `no_network` when used. Must run before any thread starts (user namespaces).
    """
    out: dict[str, tuple[bool, str]] = {}
    if os.environ.get(ENV_CONFINE) == "0":
        no = (False, f"not enforced: confinement switched off ({ENV_CONFINE}=0)")
        out = {"filesystem": no, "private_tmp": no, "home": no, "identity": no}
        out["network"] = (True, "network allowed") if network else no_network()
        return out
    flags = CLONE_NEWNS | (0 if network else CLONE_NEWNET)
    mode = None
    errors = []
    if os.geteuid() == 0 and os.environ.get(ENV_CONFINE) != "userns":
        try:
            _unshare(flags)
            mode = "root"
        except OSError as exc:
            errors.append(f"unshare(CLONE_NEWNS) as root: {exc.strerror}")
    if mode is None:
        try:
            _enter_user_namespace(flags)
            mode = "userns"
        except OSError as exc:
            errors.append(f"unprivileged user namespace: {exc.strerror}")
    if mode is None:
        why = "not enforced: " + "; ".join(errors)
        out = {"filesystem": (False, why), "private_tmp": (False, why), "home": (False, why)}
        out["network"] = (True, "network allowed") if network else no_network()
    else:
        if not network:
            how = "network namespace (loopback only)" + (" in a user namespace" if mode == "userns" else "")
            try:
                _loopback_up()
            except OSError as exc:
                how += f"; loopback left down ({exc.strerror})"
            out["network"] = (True, how)
        try:
            _private_mounts(workdir, tmp_mb)
            ro = "private mount namespace: every mount read-only but the run's folder and /proc (not /proc/sys)"
            out["filesystem"] = (True, ro + (" (in a user namespace)" if mode == "userns" else ""))
            out["private_tmp"] = (True, "fresh tmpfs on /tmp and /dev/shm per run")
        except OSError as exc:
            why = f"not enforced: mount setup failed ({exc.strerror})"
            out["filesystem"] = out["private_tmp"] = (False, why)
        try:
            out["home"] = _hide_home()
        except OSError as exc:
            out["home"] = (False, f"not enforced: the server's home stays visible ({exc.strerror})")
    out["identity"] = _drop_identity(mode, workdir)
    return out


def _enter_user_namespace(flags: int) -> None:
    """A user namespace where we keep our uid (the one id an unprivileged process may map)."""
    uid, gid = os.getuid(), os.getgid()
    _unshare(CLONE_NEWUSER | flags)
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as fh:
            fh.write(text)


def _needed_paths() -> list[str]:
    """Folders the child must read to go on running Python: the interpreter, the libraries, our code."""
    import sysconfig

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = [
        os.path.dirname(os.path.realpath(sys.executable)),
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        here,
    ]
    paths += [sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    paths += [p for p in sys.path if p and os.path.isabs(p)]
    return [os.path.realpath(p) for p in paths if os.path.isdir(p)]


def _cover(point: str, data: str) -> list[str]:
    """A fresh tmpfs over `point`, with the folders Python needs that lived under it (the
    interpreter, the libraries, our code) bound back read-only. Returns those folders."""
    keep = sorted({p for p in _needed_paths() if p.startswith(point.rstrip(os.sep) + os.sep)})
    keep = [p for p in keep if not any(p != q and p.startswith(q + os.sep) for q in keep)]
    fds = [(p, os.open(p, os.O_PATH | os.O_CLOEXEC)) for p in keep]
    _mount("tmpfs", point, "tmpfs", MS_NOSUID | MS_NODEV, data)
    for path, fd in fds:
        os.makedirs(path, mode=0o755, exist_ok=True)
        _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        _setattr(path, set_=MOUNT_ATTR_RDONLY, recursive=True)
        os.close(fd)
    return keep


def _hide_home() -> tuple[bool, str]:
    """An empty tmpfs over the server user's home (its keys, tokens, caches), with only the folders
    Python needs bound back, read-only (a pyenv or a venv under /root, a checkout under ~)."""
    import pwd

    home = os.path.realpath(pwd.getpwuid(os.getuid()).pw_dir)
    if home in ("/", "") or not os.path.isdir(home):
        return (True, f"no home folder to hide ({home!r})")
    if home in _needed_paths():
        return (False, f"not enforced: Python or our code lives at the home folder itself ({home})")
    keep = _cover(home, "mode=0755,size=1m")
    _setattr(home, set_=MOUNT_ATTR_RDONLY)
    shown = ", ".join(keep) or "nothing"
    return (True, f"{home} replaced by an empty read-only folder; bound back read-only: {shown}")


def _unreadable_for_others() -> str | None:
    """The first of the interpreter's, the libraries' or our code's folders that another uid cannot
    read (a Python installed under /root, say), or None: then the child may become `nobody`."""
    import sysconfig

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for path in (
        os.path.realpath(sys.executable),
        os.path.dirname(os.__file__),
        sysconfig.get_paths()["purelib"],
        here,
    ):
        parts = os.path.realpath(path).split(os.sep)
        for i in range(2, len(parts) + 1):
            p = os.sep.join(parts[:i])
            try:
                st = os.stat(p)
            except OSError:
                return p
            need = 0o5 if stat.S_ISDIR(st.st_mode) else 0o4
            if st.st_mode & need != need:
                return p
    return None


def _drop_identity(mode: str | None, workdir: str | None) -> tuple[bool, str]:
    """Root becomes `nobody` (or ENV_UID) where that uid can read what Python needs; otherwise the
    child keeps its uid inside a user namespace and loses every capability. Either way no setuid
    program can give privileges back (no_new_privs)."""
    libc = _libc()
    unreadable = None
    try:
        if os.geteuid() == 0 and mode != "userns":
            unreadable = _unreadable_for_others()
            if not unreadable:
                run_uid = int(os.environ.get(ENV_UID) or DEFAULT_UID)
                if workdir:
                    os.chown(workdir, run_uid, run_uid)
                os.setgroups([])
                os.setresgid(run_uid, run_uid, run_uid)
                os.setresuid(run_uid, run_uid, run_uid)  # every capability goes with root
                _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
                return (True, f"uid {run_uid}, no capabilities")
            if mode == "root":
                _enter_user_namespace(0)  # uid 0 kept, but only inside: no capability outside
                mode = "userns"
        if mode == "userns":
            _drop_capabilities()
            _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
            why = (
                f"{unreadable} is not readable by uid {os.environ.get(ENV_UID) or DEFAULT_UID}"
                if unreadable
                else "not root: no other uid to take"
            )
            return (
                False,
                f"partly: the server's uid {os.getuid()} in a user namespace without capabilities ({why}); "
                "it cannot write what the mounts protect, but may signal the server's processes",
            )
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        return (False, f"not enforced: runs as the server's uid {os.getuid()} with its rights")
    except OSError as exc:
        return (False, f"not enforced: could not drop privileges ({exc.strerror})")


def open_cgroup(procs_files: list[str]) -> list[int]:
    """Open the run's cgroup.procs files now, while we may; `join_cgroup_fds` writes to them later
    (the kernel checks the opener's rights, and the snippet's view of /sys is read-only)."""
    return [os.open(p, os.O_WRONLY | os.O_CLOEXEC) for p in procs_files]


def join_cgroup_fds(fds: list[int]) -> None:
    me = str(os.getpid()).encode()
    for fd in fds:
        try:
            os.write(fd, me)
        finally:
            os.close(fd)
