"""Storage faults as the file system shows them: immutable files, read-only or full disks, I/O errors.

The database layer and the HTTP kit both turn these into `StorageUnavailable` (503 + Retry-After); this module
holds what they share: the classification of an `OSError`, the immutable-flag check that keeps SQLite away from
a memory mapping the kernel would answer with SIGBUS, a write probe for /readyz, and the limiter that logs each
cause once per interval instead of once per failed request.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path

from codewell.core.errors import StorageUnavailable

log = logging.getLogger("codewell.storage")

# _IOR('f', 1, long) on 64-bit Linux; the kernel reads and writes an int through it.
FS_IOC_GETFLAGS = 0x80086601
# chattr +i (immutable) and +a (append only): the kernel refuses writes to such a file, and answers a write to
# a shared memory mapping of it with SIGBUS, which no Python code can catch.
_UNWRITABLE_FLAGS = 0x00000010 | 0x00000020

# How long a cause stays quiet in the log after it was logged; the suppressed count is logged with the next line.
LOG_INTERVAL = 60.0
# How long /readyz reuses a probe's answer: probes are cheap, but a load balancer may ask many times a second.
PROBE_TTL = 2.0

_CAUSES = {
    errno.EROFS: ("read-only file system", 30),
    errno.ENOSPC: ("no space left on device", 30),
    errno.EDQUOT: ("disk quota exceeded", 30),
    errno.EIO: ("I/O error", 30),
}


def unwritable_flag(path: Path) -> bool:
    """Whether `path` carries the immutable or append-only attribute (False when it does not exist, or on a
    file system without attributes). One open, one ioctl, one close: never for a file this process holds POSIX
    locks on (closing a descriptor drops them all; `FlagProbe` keeps one open instead)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        return _flags_unwritable(fd)
    finally:
        os.close(fd)


def _flags_unwritable(fd: int) -> bool:
    try:
        raw = fcntl.ioctl(fd, FS_IOC_GETFLAGS, b"\0" * 8)
    except OSError:  # ENOTTY: the file system keeps no such flags
        return False
    (flags,) = struct.unpack("i", raw[:4])
    return bool(flags & _UNWRITABLE_FLAGS)


class FlagProbe:
    """`unwritable_flag` of one file that other code in this process holds POSIX locks on (SQLite's `-shm`),
    through a descriptor kept open.

    Closing any descriptor of a file drops every fcntl lock the process holds on that file: a probe that opened
    and closed `codewell.db-shm` on each connection use released SQLite's own locks on it, and under load another
    process then wrote the WAL index under this one (`database disk image is malformed`) or truncated its mapping
    (SIGBUS). So the descriptor stays open; `os.stat` (which opens nothing) tells when the path names another file
    (SQLite recreates `-shm` once every connection to it has closed), and only then is a new one opened (the old
    one is closed at the next such change): no lock of SQLite's is on the old file any more. A probe of the
    current file takes no lock.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        # (the file's (device, inode), the descriptor open on it): one attribute, read without the lock.
        self._open: tuple[tuple[int, int], int] | None = None
        # The descriptor the last replacement took out of use, closed at the next one (see `__call__`).
        self._retired: int | None = None
        self._lock = threading.Lock()

    def __call__(self) -> bool:
        try:
            st = os.stat(self.path, follow_symlinks=False)
        except OSError:
            return False
        file = (st.st_dev, st.st_ino)
        current = self._open
        if current is not None and current[0] == file:
            # The common case, without the lock: every connection checkout of every request thread probes, and a
            # lock held across the ioctl made them queue (~10% of an MCP call's server CPU, bench/mcp_bench.py).
            return _flags_unwritable(current[1])
        with self._lock:
            current = self._open
            if current is None or current[0] != file:
                try:
                    fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
                except OSError:
                    return False
                # The replaced descriptor stays open until the next replacement: a thread that read it without
                # the lock may still be in its ioctl (closed now, its number could name another file by then).
                if self._retired is not None:
                    os.close(self._retired)
                self._retired = current[1] if current is not None else None
                self._open = current = (file, fd)
            return _flags_unwritable(current[1])

    def close(self) -> None:
        """Once no connection of this process uses the file (its locks are gone with them)."""
        with self._lock:
            for fd in (self._retired, self._open[1] if self._open is not None else None):
                if fd is not None:
                    os.close(fd)
            self._open = self._retired = None


def storage_error(exc: OSError, data_dir: Path | None = None) -> StorageUnavailable | None:
    """The `StorageUnavailable` an OSError stands for, or None when it is not a storage fault.

    EROFS, ENOSPC, EDQUOT and EIO are storage faults wherever they happen. EPERM and EACCES are only when the
    file is inside the data directory (an immutable or unwritable data directory): elsewhere they are a bug or a
    configuration error, which stays a 500.
    """
    where = "data directory"
    if exc.errno in _CAUSES:
        cause, retry_after = _CAUSES[exc.errno]
        return StorageUnavailable(f"{where}: {cause}", exc.strerror or "", retry_after=retry_after)
    if exc.errno in (errno.EPERM, errno.EACCES) and data_dir is not None and exc.filename:
        with contextlib.suppress(ValueError, OSError):
            if Path(os.fsdecode(exc.filename)).absolute().is_relative_to(data_dir):
                return StorageUnavailable(f"{where}: not writable", exc.strerror or "", retry_after=30)
    return None


class LogOnce:
    """Logs each cause at most once per `interval` seconds, then the number of repeats it held back."""

    def __init__(self, interval: float = LOG_INTERVAL) -> None:
        self.interval = interval
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def __call__(
        self,
        cause: str,
        message: str,
        *,
        level: int = logging.ERROR,
        logger: logging.Logger = log,
        exc_info: BaseException | None = None,
    ) -> bool:
        """Log `message` for `cause` unless it was logged less than `interval` ago; True when it was logged."""
        now = time.monotonic()
        with self._lock:
            last = self._last.get(cause)
            if last is not None and now - last < self.interval:
                self._held[cause] = self._held.get(cause, 0) + 1
                return False
            self._last[cause] = now
            held = self._held.pop(cause, 0)
        suffix = f" ({held} more since the last report)" if held else ""
        logger.log(level, "%s%s", message, suffix, extra={"storage_cause": cause}, exc_info=exc_info)
        return True

    def reset(self) -> None:
        with self._lock:
            self._last.clear()
            self._held.clear()


# One limiter for the process: the database layer, the HTTP error mapping and the bookkeeping writers report the
# same fault under the same cause, so an outage costs one log line a minute, not one per request or per layer.
log_storage_fault = LogOnce()


def report(fault: StorageUnavailable) -> None:
    """Log a storage fault (once per cause and interval)."""
    log_storage_fault(fault.cause, fault.message)


def probe_directory(path: Path) -> str | None:
    """Create, write (one 4 KiB block, so that a full disk shows) and delete a file in `path`; None when that
    works, else what went wrong."""
    probe = path / f".write-probe-{os.getpid()}-{threading.get_ident()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, b"\0" * 4096)
        finally:
            os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        with contextlib.suppress(OSError):
            probe.unlink()
        fault = storage_error(exc, path)
        return f"cannot write to {path}: {fault.cause if fault else exc.strerror}"
    return None


class CachedProbe:
    """A probe's answer, reused for `ttl` seconds; one probe runs at a time, callers meanwhile wait for it."""

    def __init__(self, probe: Callable[[], str | None], ttl: float = PROBE_TTL) -> None:
        self._probe = probe
        self.ttl = ttl
        self._lock = threading.Lock()
        self._at = -float("inf")
        self._answer: str | None = None

    def __call__(self) -> str | None:
        with self._lock:
            if time.monotonic() - self._at >= self.ttl:
                self._answer = self._probe()
                self._at = time.monotonic()
            return self._answer
