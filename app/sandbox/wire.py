"""Length-prefixed JSON messages over a Unix stream socket, with file descriptors (SCM_RIGHTS).

A message that carries descriptors says how many in its `nfds` field; the kernel delivers them with
the message's first byte, so they are always in hand by the time the message is complete.
"""

from __future__ import annotations

import array
import json
import os
import socket
import struct
from collections.abc import Sequence
from typing import Any

# Bound at import: a snippet that patches json or os must not break its own report.
_dumps, _loads, _close = json.dumps, json.loads, os.close
_HEAD = struct.Struct(">I")
MAX_MESSAGE = 64 * 1024 * 1024
_ANC = socket.CMSG_SPACE(16 * array.array("i").itemsize)

Message = dict[str, Any]  # one JSON object; each side checks the fields it reads


def send(sock: socket.socket, obj: Message, fds: Sequence[int] = ()) -> None:
    """Send one message (and descriptors, which the receiver then owns)."""
    if fds:
        obj = {**obj, "nfds": len(fds)}
    payload = _dumps(obj).encode()
    data = _HEAD.pack(len(payload)) + payload
    if fds:
        sent = sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        data = data[sent:]
    if data:
        sock.sendall(data)


class Reader:
    """Accumulates bytes and descriptors from one socket; yields whole messages."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = bytearray()
        self.fds: list[int] = []
        self.eof = False

    def feed(self) -> list[tuple[Message, list[int]]]:
        """One read (blocks unless the socket is readable); return the messages now complete.

        Raises ValueError for a malformed message (too long, not JSON, not an object, a bad `nfds`):
        a snippet can write on its own child's socket, so the reader must not trust the framing.
        """
        try:
            data, anc, _flags, _addr = self.sock.recvmsg(1 << 20, _ANC)
        except (ConnectionResetError, OSError):
            data, anc = b"", []
        for level, kind, raw in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                arr = array.array("i")
                arr.frombytes(raw[: len(raw) - len(raw) % arr.itemsize])
                self.fds.extend(arr)
        if not data:
            self.eof = True
        self.buf += data
        return self._complete()

    def _complete(self) -> list[tuple[Message, list[int]]]:
        out: list[tuple[Message, list[int]]] = []
        while len(self.buf) >= _HEAD.size:
            (size,) = _HEAD.unpack_from(self.buf)
            if size > MAX_MESSAGE:
                raise ValueError(f"message of {size} bytes")
            if len(self.buf) < _HEAD.size + size:
                break
            obj = _loads(bytes(self.buf[_HEAD.size : _HEAD.size + size]))  # JSONDecodeError: a ValueError
            del self.buf[: _HEAD.size + size]
            if not isinstance(obj, dict):
                raise ValueError(f"a message that is not a JSON object: {type(obj).__name__}")
            n = obj.get("nfds", 0)
            if not isinstance(n, int) or n < 0:
                raise ValueError(f"a message with nfds={str(n)[:20]!r}")
            fds, self.fds = self.fds[:n], self.fds[n:]
            out.append((obj, fds))
        return out

    def recv(self) -> tuple[Message, list[int]] | None:
        """Block until one message arrives; None at end of stream."""
        pending = self._complete()
        while not pending:
            if self.eof:
                return None
            pending = self.feed()
        first, rest = pending[0], pending[1:]
        if rest:  # keep what came along for the next call
            for obj, fds in reversed(rest):
                payload = _dumps(obj).encode()
                self.buf[:0] = _HEAD.pack(len(payload)) + payload
                self.fds[:0] = fds
        return first

    def close_fds(self) -> None:
        for fd in self.fds:
            try:
                _close(fd)
            except OSError:
                pass
        self.fds = []
