"""Inside a sandbox child: limits that the process sets on itself (stdlib only).

Called in the child after the fork (or before the exec of a cold child), never in the fork server.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import resource
import socket
import struct

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
