"""Running jobs: the worker threads of `codewell serve` / `codewell worker`, and draining one resource in the
caller's thread (`codewell repos add`, `RepoService.sync_repo`: "do it now, and wait for what it causes").

Every execution goes through a claim, whoever runs it, so two processes never run the same job (or two jobs
of one lock key) at once: the race of a `codewell repos add` beside a running server is gone by construction.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
import weakref
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from codewell.capability import JobGiveUp, JobKind
from codewell.core.errors import CodewellError, StorageUnavailable
from codewell.core.storage import report
from codewell.jobs import metrics
from codewell.jobs.service import SEARCHER_HEARTBEAT_SECONDS, Claimed, JobService, set_current_job

if TYPE_CHECKING:
    from codewell.runtime import Runtime

log = logging.getLogger(__name__)

# An idle worker looks for due jobs after this, then a little later each time (jobs enqueued by this process
# wake it at once; another process's within IDLE_MAX_SECONDS).
POLL_SECONDS = 0.5
IDLE_MAX_SECONDS = 5.0
# How often a worker process says it is alive (and `drain` re-reads what it waits for).
HEARTBEAT_SECONDS = 10.0
# A worker thread that met a storage fault (a locked or full database) looks for work again after this.
STORAGE_BACKOFF_SECONDS = 5.0


def new_owner(role: str) -> str:
    """A lease owner name unique to this process and runner: host, pid, role and a random suffix."""
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{role}:{uuid.uuid4().hex[:8]}"


class LeaseKeeper:
    """One thread per process renewing the leases of every job this process runs, and noticing cancels.

    A thread per job cost more than a small job itself (2 ms to start one on a busy machine).
    """

    def __init__(self, service: JobService) -> None:
        self.service = service
        self._jobs: dict[int, tuple[Claimed, float]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    @contextmanager
    def holding(self, job: Claimed, lease_seconds: float) -> Iterator[None]:
        with self._lock:
            self._jobs[job.id] = (job, max(0.2, min(5.0, lease_seconds / 3)))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="job-leases", daemon=True)
                self._thread.start()
        self._wake.set()
        try:
            yield
        finally:
            with self._lock:
                self._jobs.pop(job.id, None)

    def _run(self) -> None:
        due: dict[int, float] = {}
        while True:
            with self._lock:
                held = dict(self._jobs)
            if not held:
                with self._lock:
                    if not self._jobs:
                        self._thread = None
                        return
                continue
            now = time.monotonic()
            for job_id, (_job, interval) in held.items():
                due.setdefault(job_id, now + interval)
            renew = [job for job_id, (job, _interval) in held.items() if due[job_id] <= now]
            if renew:
                try:
                    self.service.renew(renew)
                except Exception:
                    log.exception("renewing job leases failed")
                for job in renew:
                    due[job.id] = now + held[job.id][1]
            for job_id in [j for j in due if j not in held]:
                del due[job_id]
            self._wake.wait(max(0.05, min(due.values()) - time.monotonic()) if due else 0.05)
            self._wake.clear()


# One keeper per JobService (per runtime: tests open many in one process), gone with it.
_KEEPERS: weakref.WeakKeyDictionary[JobService, LeaseKeeper] = weakref.WeakKeyDictionary()
_KEEPERS_LOCK = threading.Lock()


def _keeper(service: JobService) -> LeaseKeeper:
    with _KEEPERS_LOCK:
        keeper = _KEEPERS.get(service)
        if keeper is None:
            keeper = _KEEPERS[service] = LeaseKeeper(service)
        return keeper


def execute(runtime: Runtime, job: Claimed, *, batch: bool = True) -> str:
    """Run one claimed job's handler (with more due jobs of its kind when it batches) and record the outcome;
    returns the new state of `job`."""
    service = runtime.get(JobService)
    kind = service.kinds.get(job.kind)
    if kind is None:
        return service.fail(job, f"no capability declares the job kind {job.kind!r} in this version", final=True)
    if job.attempt > job.max_attempts:
        return _interrupted(service, job)
    jobs = _with_batch(service, kind, job) if batch else [job]
    started = time.monotonic()
    log.debug("job %s (%s %s) started, attempt %s, batch of %s", job.id, job.kind, job.resource, job.attempt, len(jobs))
    results: Mapping[int, Mapping[str, Any] | Exception | None]
    try:
        with contextlib.ExitStack() as held:
            for each in jobs:
                held.enter_context(_keeper(service).holding(each, kind.lease_seconds))
            set_current_job(job)
            if len(jobs) > 1 and kind.run_batch is not None:
                results = kind.run_batch(runtime, jobs)
            else:
                results = {job.id: kind.run(runtime, job)}
    except JobGiveUp as exc:
        states = [service.fail(each, str(exc), final=True) for each in jobs]
        log.warning("job %s (%s %s) failed: %s", job.id, job.kind, job.resource, exc)
    except CodewellError as exc:
        states = [service.fail(each, f"{exc.message}; {exc.hint}" if exc.hint else exc.message) for each in jobs]
        log.warning("job %s (%s %s) failed: %s", job.id, job.kind, job.resource, exc.message)
    except Exception as exc:
        log.exception("job %s (%s %s) failed", job.id, job.kind, job.resource)
        states = [service.fail(each, f"{type(exc).__name__}: {exc}") for each in jobs]
    else:
        states = []
        for each in jobs:
            result = results.get(each.id)
            if isinstance(result, Exception):  # a batch handler failing one job of the batch
                states.append(service.fail(each, _reason(result)))
                continue
            service.succeed(each, result)
            states.append("cancelled" if each.cancelled else "succeeded")
    finally:
        set_current_job(None)
        metrics.DURATION.labels(job.kind).observe(time.monotonic() - started)
    return states[0]


def _reason(exc: Exception) -> str:
    if isinstance(exc, CodewellError):
        return f"{exc.message}; {exc.hint}" if exc.hint else exc.message
    return f"{type(exc).__name__}: {exc}"


def _with_batch(service: JobService, kind: JobKind, job: Claimed) -> list[Claimed]:
    """`job` and, for a kind that batches, up to `kind.batch - 1` more due jobs of its kind, claimed now."""
    jobs = [job]
    if kind.run_batch is None:
        return jobs
    while len(jobs) < kind.batch:
        more = service.claim(job.owner, frozenset({kind.name}), target=job.target)
        if more is None:
            break
        if more.attempt > more.max_attempts:
            _interrupted(service, more)
            continue
        jobs.append(more)
    return jobs


def _interrupted(service: JobService, job: Claimed) -> str:
    return service.fail(
        job,
        f"interrupted: {job.attempt - 1} attempts were cut short (process killed or lease lost) and it was given up",
        final=True,
    )


class JobRunner:
    """Worker threads claiming and running jobs in this process, until `stop`.

    `kinds` restricts what it claims (`codewell worker --kinds`); None means every declared kind. It registers
    itself in `job_workers` with a heartbeat, so that operators and `drain` can see live workers.
    """

    def __init__(
        self,
        runtime: Runtime,
        *,
        role: str,
        kinds: frozenset[str] | None = None,
        concurrency: int = 2,
        poll_seconds: float = POLL_SECONDS,
        replica: str = "",
        address: str = "",
    ) -> None:
        self.runtime = runtime
        self.service = runtime.get(JobService)
        self.role = role
        self.kinds = kinds
        self.concurrency = max(1, concurrency)
        self.poll_seconds = poll_seconds
        # A searcher replica runs the jobs placed on it under its stable name (its membership row), and says it
        # is alive more often: its queries and its share of the repositories depend on it.
        self.replica = replica
        self.address = address
        self.owner = replica or new_owner(role)
        self.heartbeat_seconds = SEARCHER_HEARTBEAT_SECONDS if replica else HEARTBEAT_SECONDS
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._busy = 0
        self._long = 0  # threads running a long_running kind now
        self._running: Counter[str] = Counter()  # jobs running now per kind (JobKind.per_runner)
        self._lock = threading.Lock()

    def start(self) -> None:
        if self._threads:
            return
        unknown = (self.kinds or frozenset()) - frozenset(self.service.kinds)
        if unknown:
            raise CodewellError(
                f"unknown job kinds: {', '.join(sorted(unknown))}",
                hint="known kinds: " + ", ".join(sorted(self.service.kinds)),
            )
        self.service.register_worker(self.owner, self.role, self.kinds, self.concurrency, address=self.address)
        self.service.runners.add(self)
        periodic = [k for k in self.service.kinds.values() if self.kinds is None or k.name in self.kinds]
        if self.replica:
            self.service.ensure_periodic([k for k in periodic if k.placed], replica=self.replica)
        else:
            # In a cluster a placed kind's periodic work runs on every replica, over what it holds, not here.
            self.service.ensure_periodic([k for k in periodic if not (k.placed and self.service.clustered)])
        for n in range(self.concurrency):
            self._threads.append(threading.Thread(target=self._work, name=f"jobs-{self.role}-{n}", daemon=True))
        self._threads.append(threading.Thread(target=self._heartbeat, name=f"jobs-{self.role}-heartbeat", daemon=True))
        for thread in self._threads:
            thread.start()
        log.info("job runner %s started (%s threads, kinds: %s)", self.owner, self.concurrency, self.kinds or "all")

    def stop(self, grace_seconds: float = 10.0) -> None:
        """Stop claiming; wait up to `grace_seconds` for running jobs (the others' leases expire and any worker
        takes them over)."""
        if not self._threads:
            return
        self._stop.set()
        self.service.enqueued.set()
        self.service.runners.discard(self)
        deadline = time.monotonic() + grace_seconds
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        if not self.replica:
            # A searcher replica keeps its row: restarted under the same name it comes back to the same share, so
            # a rolling restart moves nothing; gone for good, its heartbeat goes stale and the others take over.
            try:
                self.service.unregister_worker(self.owner)
            except Exception:
                log.exception("unregistering job worker %s failed", self.owner)
        self._threads = []

    @property
    def busy(self) -> int:
        with self._lock:
            return self._busy

    def run_one(self) -> bool:
        """Claim and run one due job in this thread; False when there was none."""
        kinds = self.service.kinds
        wanted = frozenset(kinds) if self.kinds is None else self.kinds
        with self._lock:
            if self._long >= max(1, self.concurrency // 2):
                # Half the threads already run long jobs: this one takes only the others.
                wanted = frozenset(name for name in wanted if name in kinds and not kinds[name].long_running)
            full = {name for name, n in self._running.items() if name in kinds and 0 < kinds[name].per_runner <= n}
            if full:
                wanted = wanted - full
                if not wanted:
                    return False
        job = self.service.claim(self.owner, wanted, target=self.replica)
        if job is None:
            return False
        long_running = job.kind in kinds and kinds[job.kind].long_running
        with self._lock:
            self._busy += 1
            self._long += long_running
            self._running[job.kind] += 1
        try:
            execute(self.runtime, job)
        finally:
            with self._lock:
                self._busy -= 1
                self._long -= long_running
                self._running[job.kind] -= 1
        return True

    def _work(self) -> None:
        idle = 0
        while not self._stop.is_set():
            try:
                ran = self.run_one()
            except StorageUnavailable as fault:
                # A locked, full or read-only database: said once per cause, then looked at again a little later
                # (a traceback per thread per poll said nothing more and flooded the log).
                report(fault)
                ran = False
                self._stop.wait(STORAGE_BACKOFF_SECONDS)
            except Exception:
                log.exception("job worker failed; retrying")
                ran = False
                self._stop.wait(self.poll_seconds)
            if ran:
                idle = 0
            elif not self._stop.is_set():
                # An idle thread looks again later and later (up to IDLE_MAX_SECONDS): an idle server does not
                # spend its CPU asking the database. A job enqueued by this process wakes it at once.
                idle += 1
                self.service.enqueued.wait(min(IDLE_MAX_SECONDS, self.poll_seconds * idle))
                self.service.enqueued.clear()

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.heartbeat_seconds):
            try:
                self.service.worker_heartbeat(self.owner)
            except StorageUnavailable as fault:
                report(fault)
            except Exception:
                log.exception("job worker heartbeat failed")


def drain(
    runtime: Runtime,
    resource: str,
    *,
    timeout: float = 3600.0,
    on_wait: Callable[[], None] | None = None,
) -> None:
    """Run the due jobs of `resource` in this thread until none is queued or running, wherever they run.

    Jobs another process is running are waited for (a dead process's lease expires and this thread takes
    the job over); jobs waiting for a retry later are not waited for (their failure is recorded on them).
    """
    service = runtime.get(JobService)
    owner = new_owner("drain")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = service.claim(owner, None, resource)
        if job is not None:
            execute(runtime, job, batch=False)  # this resource's jobs only: the caller waits for them
            continue
        active, _later = service.pending(resource)
        if active == 0:
            return
        if on_wait is not None:
            on_wait()
        time.sleep(0.1)
    log.warning("stopped waiting for the jobs of %s after %.0f s", resource, timeout)
