"""The frame protocol between the evaluator and its workers, over real pipes."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator

import pytest

from codewell.evaluator import protocol


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read_fd, write_fd = os.pipe()
    yield read_fd, write_fd
    for fd in (read_fd, write_fd):
        with contextlib.suppress(OSError):
            os.close(fd)


def test_frames_round_trip_in_order(pipe: tuple[int, int]) -> None:
    read_fd, write_fd = pipe
    protocol.write_frame(write_fd, {"type": "call", "name": "search", "args": ["héllo"]})
    protocol.write_frame(write_fd, {"type": "done", "outcome": {"kind": "ok"}})
    reader = protocol.FrameReader(read_fd, 1024)
    deadline = time.monotonic() + 1
    assert reader.read(deadline) == {"type": "call", "name": "search", "args": ["héllo"]}
    assert reader.read(deadline) == {"type": "done", "outcome": {"kind": "ok"}}


def test_reader_returns_none_at_the_deadline(pipe: tuple[int, int]) -> None:
    reader = protocol.FrameReader(pipe[0], 1024)
    started = time.monotonic()
    assert reader.read(started + 0.1) is None
    assert 0.09 <= time.monotonic() - started < 1


def test_partial_frame_waits_for_the_rest(pipe: tuple[int, int]) -> None:
    read_fd, write_fd = pipe
    data = protocol.encode({"type": "ready"})
    os.write(write_fd, data[:3])
    reader = protocol.FrameReader(read_fd, 1024)
    assert reader.read(time.monotonic() + 0.05) is None
    os.write(write_fd, data[3:])
    assert reader.read(time.monotonic() + 1) == {"type": "ready"}


def test_oversized_frame_is_refused(pipe: tuple[int, int]) -> None:
    read_fd, write_fd = pipe
    protocol.write_frame(write_fd, {"type": "done", "outcome": "x" * 2000})
    with pytest.raises(protocol.ProtocolError, match="exceeds the limit of 1024"):
        protocol.FrameReader(read_fd, 1024).read(time.monotonic() + 1)


def test_malformed_and_closed_pipes_are_protocol_errors(pipe: tuple[int, int]) -> None:
    read_fd, write_fd = pipe
    os.write(write_fd, protocol.HEADER.pack(5) + b"[1,2]")
    with pytest.raises(protocol.ProtocolError, match="not a message object"):
        protocol.read_frame(read_fd, 1024)
    os.close(write_fd)
    with pytest.raises(protocol.ProtocolError, match="closed"):
        protocol.FrameReader(read_fd, 1024).read(time.monotonic() + 1)
