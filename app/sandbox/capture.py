"""Capture a child's stdout and stderr at the fd level, capped while streaming (STYLE.md item 12).

The child writes into pipes whose read ends only the pool holds; past the cap the output is still
drained (so the writer never blocks) but dropped, and the capture is marked truncated.
"""

from __future__ import annotations

import fcntl
import os
import select
import time

_F_SETPIPE_SZ = 1031


class Capture:
    def __init__(self, cap: int, *, pipes: bool = True):
        self.cap = cap
        self.buf: dict[int, bytearray] = {}
        self.dropped: dict[int, int] = {}
        self._writers: list[int] = []
        self._open: list[int] = []
        self._order: list[int] = []
        if pipes:
            for _ in range(2):
                r, w = os.pipe2(os.O_CLOEXEC)
                try:
                    fcntl.fcntl(r, _F_SETPIPE_SZ, 1 << 20)  # fewer wake-ups on a flood
                except OSError:
                    pass
                os.set_blocking(r, False)
                self.buf[r], self.dropped[r] = bytearray(), 0
                self._open.append(r)
                self._order.append(r)
                self._writers.append(w)

    @classmethod
    def empty(cls) -> Capture:
        return cls(0, pipes=False)

    def writers(self) -> tuple[int, int]:
        """The write ends (stdout, stderr) for the child; the caller closes its copies after handing them over."""
        return self._writers[0], self._writers[1]

    def open_fds(self) -> list[int]:
        return list(self._open)

    @property
    def done(self) -> bool:
        return not self._open

    @property
    def truncated(self) -> bool:
        return any(self.dropped.values())

    def read(self, fd: int) -> None:
        """Read what is available on one pipe (non-blocking); EOF closes it."""
        while True:
            try:
                data = os.read(fd, 1 << 20)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self._open.remove(fd)
                os.close(fd)
                return
            room = self.cap - len(self.buf[fd])
            if room > 0:
                self.buf[fd] += data[:room]
            self.dropped[fd] += max(0, len(data) - max(room, 0))

    def drain(self, seconds: float) -> None:
        """Read whatever is left, for at most `seconds` (writers may never close)."""
        deadline = time.monotonic() + seconds
        while self._open:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            ready, _, _ = select.select(self._open, [], [], left)
            for fd in ready:
                self.read(fd)

    def text(self) -> tuple[str, str]:
        if not self._order:
            return "", ""
        out, err = (self.buf[fd].decode(errors="replace") for fd in self._order)
        return out, err

    def dropped_bytes(self) -> int:
        return sum(self.dropped.values())

    def close(self) -> None:
        for fd in self._open:
            try:
                os.close(fd)
            except OSError:
                pass
        self._open = []
