"""Usage events: one cheap call, `record_usage(runtime, event)`, that never raises into the caller.

Events are buffered in memory and written in batches by one background thread per runtime (at most
`FLUSH_INTERVAL` seconds late, or sooner when `BATCH_SIZE` events are waiting). The buffer is bounded: under
a database outage the oldest events are dropped (and counted) rather than growing memory without limit.
Each batch also updates the daily rollup (`codewell.analytics.rollup`) in the same transaction, so the
reports and the raw events never disagree. What is buffered is written on shutdown: `Runtime.close()`
closes the recorder, and `codewell serve` flushes when its background loops stop (`analytics.setup`).

Under a storage fault (a write lock held by another process, a read-only or full disk) the events stay in the
buffer and the next flush retries; a flush waits at most FLUSH_LOCK_TIMEOUT for the write lock (so that a
shutdown never waits the busy timeout for it), and the failure is logged once a minute, not once a second.

Other capabilities record a use in one line (issue #9):

    record_feature(runtime, actor, FEATURE_SEARCH, client="web", language=top_language)

or time it with `with track_usage(runtime, actor, FEATURE_CODENAV, client="rest") as usage: ...`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Self

from sqlalchemy import insert

from codewell.analytics.models import UsageEventRow
from codewell.analytics.rollup import (
    FEATURE_CODE_FINDER,
    FEATURE_CODENAV,
    FEATURE_DEEPSEARCH,
    FEATURE_MCP,
    FEATURE_SEARCH,
    aggregate,
    apply_rollup,
)
from codewell.core.actors import Actor
from codewell.core.errors import CodewellError, StorageUnavailable
from codewell.core.storage import LogOnce
from codewell.db.base import utcnow

if TYPE_CHECKING:
    from codewell.runtime import Runtime

log = logging.getLogger(__name__)

__all__ = [
    "FEATURE_CODENAV",
    "FEATURE_CODE_FINDER",
    "FEATURE_DEEPSEARCH",
    "FEATURE_MCP",
    "FEATURE_SEARCH",
    "UsageEvent",
    "UsageRecorder",
    "UsageTracker",
    "record_feature",
    "record_usage",
    "track_usage",
]

BATCH_SIZE = 200
FLUSH_INTERVAL = 1.0
MAX_BUFFERED = 50_000
FLUSH_LOCK_TIMEOUT = 2.0
_log_once = LogOnce()


@dataclass(frozen=True, slots=True)
class UsageEvent:
    """One use of a feature. `error` is "" on success, else a short error code."""

    user_id: int | None
    client: str
    feature: str
    tool: str = ""
    endpoint: str = ""
    duration_ms: int = 0
    result_bytes: int = 0
    error: str = ""
    language: str = ""
    created_at: datetime = field(default_factory=utcnow)


class UsageRecorder:
    """Buffers events and writes them in batches from a daemon thread started on first use."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._buffer: deque[UsageEvent] = deque()
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.dropped = 0
        self.written = 0

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    def add(self, event: UsageEvent) -> None:
        """Queue one event; O(1), no I/O on the caller's thread."""
        with self._lock:
            if len(self._buffer) >= MAX_BUFFERED:
                self._buffer.popleft()
                self.dropped += 1
            self._buffer.append(event)
            size = len(self._buffer)
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._run, name="usage-events", daemon=True)
                self._thread.start()
        if size >= BATCH_SIZE:
            self._wake.set()

    def flush(self) -> int:
        """Write everything buffered now; return the number of events written (0 on failure, kept for retry).

        Flushes are serialised, so when this returns every event recorded before the call is written (or
        kept for retry), including a batch the background writer was writing at the time.
        """
        with self._flush_lock:
            return self._flush()

    def _flush(self) -> int:
        with self._lock:
            batch = list(self._buffer)
            self._buffer.clear()
        if not batch:
            return 0
        rows = [
            {
                "created_at": e.created_at,
                "user_id": e.user_id,
                "client": e.client[:200],
                "feature": e.feature[:50],
                "tool": e.tool[:100],
                "endpoint": e.endpoint[:100],
                "duration_ms": max(0, min(e.duration_ms, 2**31 - 1)),
                "result_bytes": max(0, min(e.result_bytes, 2**31 - 1)),
                "error": e.error[:100],
                "language": e.language[:50],
            }
            for e in batch
        ]
        try:
            with self._runtime.db.session(lock_timeout=FLUSH_LOCK_TIMEOUT) as session:
                session.execute(insert(UsageEventRow), rows)
                apply_rollup(session, aggregate(batch))
        except Exception as exc:
            # Keep the events for the next attempt (bounded by MAX_BUFFERED); analytics must never break callers.
            # One line a minute per cause: the writer retries every second for as long as an outage lasts.
            cause = exc.cause if isinstance(exc, StorageUnavailable) else type(exc).__name__
            _log_once(
                f"usage events: {cause}",
                f"could not write {len(batch)} usage events ({exc}); kept for retry, {self.dropped} dropped so far",
                level=logging.WARNING,
                logger=log,
                exc_info=None if isinstance(exc, StorageUnavailable) else exc,  # a bug's traceback, not an outage's
            )
            with self._lock:
                self._buffer.extendleft(reversed(batch))
                while len(self._buffer) > MAX_BUFFERED:
                    self._buffer.popleft()
                    self.dropped += 1
            return 0
        self.written += len(batch)
        return len(batch)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(FLUSH_INTERVAL)
            self._wake.clear()
            self.flush()

    def close(self) -> None:
        """Stop the writer thread and write what is left (called by Runtime.close)."""
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=5)
        try:
            self.flush()
        except Exception:
            log.warning("could not write the last usage events", exc_info=True)


def record_usage(runtime: Runtime, event: UsageEvent) -> None:
    """Record one usage event. Cheap (buffered, batched writes) and never raises."""
    try:
        runtime.get(UsageRecorder).add(event)
    except Exception:
        log.warning("usage event dropped", exc_info=True)


def record_feature(
    runtime: Runtime,
    actor: Actor,
    feature: str,
    *,
    client: str = "",
    language: str = "",
    tool: str = "",
    endpoint: str = "",
    duration_ms: int = 0,
    result_bytes: int = 0,
    error: str = "",
) -> None:
    """Record one use of `feature` by `actor` (client defaults to the actor's, else "web"); never raises."""
    record_usage(
        runtime,
        UsageEvent(
            user_id=actor.user_id,
            client=client or actor.client or "web",
            feature=feature,
            tool=tool,
            endpoint=endpoint,
            duration_ms=duration_ms,
            result_bytes=result_bytes,
            error=error,
            language=language,
        ),
    )


@dataclass(slots=True)
class UsageTracker:
    """What a `track_usage` block may fill in before it ends (the language of the results, their size)."""

    language: str = ""
    result_bytes: int = 0


@contextlib.contextmanager
def track_usage(
    runtime: Runtime, actor: Actor, feature: str, *, client: str = "", tool: str = "", endpoint: str = ""
) -> Iterator[UsageTracker]:
    """Time the block and record it as one use of `feature`; an exception is recorded by its error code
    (`CodewellError.code`, else "internal") and re-raised unchanged."""
    tracker = UsageTracker()
    started = time.perf_counter()
    error = ""
    try:
        yield tracker
    except CodewellError as exc:
        error = exc.code
        raise
    except BaseException:
        error = "internal"
        raise
    finally:
        record_feature(
            runtime,
            actor,
            feature,
            client=client,
            language=tracker.language,
            tool=tool,
            endpoint=endpoint,
            duration_ms=round((time.perf_counter() - started) * 1000),
            result_bytes=tracker.result_bytes,
            error=error,
        )
