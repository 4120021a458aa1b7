"""Real storage faults for tests (docs/security.md, "Storage faults"): another process holding SQLite's write lock,
an immutable directory (chattr +i), a tiny tmpfs filled up. Tests run as root, which ignores permission bits, so
read-only means the immutable attribute here. When a mechanism is missing the test fails and says which one."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from codewell.core.storage import unwritable_flag

_HOLD_LOCK = """
import sqlite3, sys
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.readline()
"""


@contextmanager
def write_lock_held(database: Path) -> Iterator[None]:
    """Another process holds SQLite's write lock on `database` (BEGIN IMMEDIATE) until the block ends."""
    with subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(database)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as holder:
        assert holder.stdout is not None
        assert holder.stdin is not None
        try:
            assert holder.stdout.readline().strip() == "held", "the lock holder did not take the write lock"
            yield
        finally:
            holder.stdin.close()  # its readline returns: it exits and SQLite releases the lock
            holder.wait(10)


def _chattr(flag: str, path: Path) -> None:
    if shutil.which("chattr") is None:
        pytest.fail("chattr (e2fsprogs) is needed to make the data directory immutable")
    result = subprocess.run(["chattr", "-R", flag, str(path)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        pytest.fail(f"chattr -R {flag} {path} failed ({result.stderr.strip()}): the test needs root on ext4 or tmpfs")


@contextmanager
def immutable(path: Path) -> Iterator[None]:
    """`path` and everything under it immutable (chattr -R +i) until the block ends."""
    _chattr("+i", path)
    try:
        if not unwritable_flag(path):
            pytest.fail(f"chattr +i did not make {path} immutable on this file system")
        subprocess.run(["sync"], check=True)  # written-back pages fault again on the next write: the SIGBUS case
        yield
    finally:
        _chattr("-i", path)


@contextmanager
def tmpfs(path: Path, size: str = "4m") -> Iterator[Path]:
    """A tmpfs of `size` mounted at `path` (created) until the block ends."""
    path.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs at {path} ({result.stderr.strip()}): the test needs root")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(directory: Path) -> Path:
    """Fill the file system of `directory` with one file until it is full; return that file."""
    filler = directory / "filler"
    with filler.open("wb", buffering=0) as out:
        try:
            while out.write(b"\0" * 65536):
                pass
        except OSError:  # ENOSPC: full
            pass
    return filler
