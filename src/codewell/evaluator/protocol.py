"""The pipe protocol between the evaluator and its worker processes: length-prefixed JSON frames.

Messages (every frame is one JSON object with a "type"):
- worker → parent `{"type": "ready"}` once, when the worker can run scripts;
- parent → worker `{"type": "run", "script": str, "limits": {...}}`;
- worker → parent `{"type": "call", "name": "search" | "read_file", "args": [...]}` while a script runs;
- parent → worker `{"type": "reply", "status": "ok" | "error" | "limit", "value": ..., "kind": str}`;
- worker → parent `{"type": "done", "outcome": {...}}` (a `SandboxOutcome` as a dict).

Standard library only: the worker imports this module.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

HEADER = struct.Struct(">I")


class ProtocolError(Exception):
    """The other side sent something that is not a valid frame, or closed the pipe."""


def encode(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return HEADER.pack(len(body)) + body


def write_frame(fd: int, message: dict[str, Any]) -> None:
    """Write one frame completely (blocking)."""
    data = memoryview(encode(message))
    while data:
        written = os.write(fd, data)
        data = data[written:]


def _read_exactly(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            raise ProtocolError("the pipe was closed")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _decode(body: bytes) -> dict[str, Any]:
    try:
        message = json.loads(body)
    except ValueError as exc:
        raise ProtocolError(f"invalid frame: {exc}") from None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise ProtocolError("invalid frame: not a message object")
    return message


def read_frame(fd: int, max_bytes: int) -> dict[str, Any]:
    """Read one frame (blocking); ProtocolError on EOF, oversize or malformed frames."""
    (size,) = HEADER.unpack(_read_exactly(fd, HEADER.size))
    if size > max_bytes:
        raise ProtocolError(f"frame of {size} bytes exceeds the limit of {max_bytes}")
    return _decode(_read_exactly(fd, size))


class FrameReader:
    """Reads frames from a non-blocking pipe with a deadline (the parent side)."""

    def __init__(self, fd: int, max_bytes: int) -> None:
        os.set_blocking(fd, False)
        self.fd = fd
        self.max_bytes = max_bytes
        self._buffer = bytearray()

    def read(self, deadline: float) -> dict[str, Any] | None:
        """The next frame, or None when `deadline` (time.monotonic) passes first."""
        while True:
            frame = self._take()
            if frame is not None:
                return frame
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            # poll, not select: a busy server may have descriptors above select's FD_SETSIZE.
            poller = select.poll()
            poller.register(self.fd, select.POLLIN | select.POLLHUP | select.POLLERR)
            if not poller.poll(max(1, int(remaining * 1000))):
                return None
            try:
                chunk = os.read(self.fd, 1 << 20)
            except BlockingIOError:
                continue
            if not chunk:
                raise ProtocolError("the pipe was closed")
            self._buffer += chunk

    def _take(self) -> dict[str, Any] | None:
        if len(self._buffer) < HEADER.size:
            return None
        (size,) = HEADER.unpack_from(self._buffer)
        if size > self.max_bytes:
            raise ProtocolError(f"frame of {size} bytes exceeds the limit of {self.max_bytes}")
        end = HEADER.size + size
        if len(self._buffer) < end:
            return None
        body = bytes(self._buffer[HEADER.size : end])
        del self._buffer[:end]
        return _decode(body)
