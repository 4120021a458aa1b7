"""JobService: the durable queue of background work (enqueue, claim, finish, and what operators see).

Why our own table rather than procrastinate or pgqueuer (both measured against the needs of #28): both are
PostgreSQL-only, and the embedded default (SQLite, one `codewell serve`, nothing else installed) must run the
same job definitions; both enqueue through their own connection, where a job must be enqueued in the
transaction of the change that causes it (a repository row and its first sync commit together or not at all);
and their de-duplication refuses a second job, where a newer request must supersede a queued one (a newer
commit). What a queue needs from the engine is small and standard, so it rests on the database itself:

- **Claiming** is one `UPDATE ... WHERE id = (SELECT ... FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING` statement.
  On PostgreSQL the row lock and SKIP LOCKED let any number of workers claim without blocking each other; on
  SQLite the statement takes the database's write lock before it reads, so claims are serialized.
- **One running job per key** (`<lock group>:<resource>`) is a partial unique index, so even two claimers
  racing past the `NOT EXISTS` check cannot both run a repository's index: the loser's claim fails and it
  tries the next job. **One queued job per kind and key** is another partial unique index: enqueueing again
  supersedes the queued job's payload (`INSERT ... ON CONFLICT DO UPDATE`).
- **Leases**: a claimed job is leased to its process, renewed by a heartbeat; when a process dies
  (`kill -9`) the lease expires and any worker takes the job over. A job claimed more than `max_attempts`
  times fails with the reason `interrupted`, so a job that kills its worker never loops forever.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Self, cast

from sqlalchemy import Table, and_, bindparam, delete, exists, func, or_, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from codewell.authz import Action, ensure
from codewell.capability import JobKind
from codewell.core.actors import Actor
from codewell.core.errors import InvalidInput, NotFound
from codewell.db.base import utcnow
from codewell.jobs import metrics
from codewell.jobs.models import CANCELLED, FAILED, QUEUED, RUNNING, STATES, SUCCEEDED, JobRow, JobWorkerRow
from codewell.jobs.placement import SEARCHER, Replica, owner

if TYPE_CHECKING:
    from codewell.runtime import Runtime

__all__ = [
    "PRIORITY_EVENT",
    "PRIORITY_PERSON",
    "PRIORITY_SCHEDULED",
    "Claimed",
    "Job",
    "JobService",
    "KindStats",
    "WorkerInfo",
    "current_job",
    "set_current_job",
]

log = logging.getLogger(__name__)

# Lower runs first (as with nice values): what a person asked for before what an event caused, before scheduled
# work. Lower-first lets the claim walk a plain ascending index in order on both engines.
PRIORITY_PERSON = 0
PRIORITY_EVENT = 50
PRIORITY_SCHEDULED = 100
# Retry back-off: 5 s, 20 s, 80 s, ... at most an hour.
BACKOFF_BASE_SECONDS = 5.0
BACKOFF_MAX_SECONDS = 3600.0
# A worker whose heartbeat is older than this is not counted as alive.
WORKER_STALE_SECONDS = 60.0
MAX_ERROR_CHARS = 4000
LIST_MAX = 1000
# Resource of site-wide work (periodic jobs, reconciles).
SITE = "site"
# The lease a claim sets; a kind with another lease gets it in a second statement.
DEFAULT_LEASE_SECONDS = 600.0
# A searcher replica says it is alive this often; one silent for SEARCHER_STALE_SECONDS is out of the cluster
# (its queries answer partial meanwhile, naming what it holds), and its repositories move to the others.
SEARCHER_HEARTBEAT_SECONDS = 2.0
SEARCHER_STALE_SECONDS = 8.0
# How long a process trusts the replica list it read (every enqueue of a placed kind asks for it).
_REPLICAS_TTL_SECONDS = 1.0
# Resource of a placed periodic kind's row on one replica.
REPLICA_PREFIX = "replica:"


def backoff(attempts: int) -> float:
    return float(min(BACKOFF_MAX_SECONDS, BACKOFF_BASE_SECONDS * 4 ** max(0, attempts - 1)))


@dataclass(frozen=True)
class Job:
    """A job as operators see it."""

    id: int
    kind: str
    resource: str
    state: str
    priority: int
    cause: str
    payload: dict[str, Any]
    attempts: int
    max_attempts: int
    run_after: datetime
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    lease_owner: str | None
    lease_until: datetime | None
    cancel_requested: bool
    progress_done: int
    progress_total: int | None
    progress_message: str
    last_error: str | None
    result: dict[str, Any] | None

    @classmethod
    def of(cls, row: JobRow) -> Job:
        return cls(
            id=row.id,
            kind=row.kind,
            resource=row.resource,
            state=row.state,
            priority=row.priority,
            cause=row.cause,
            payload=json.loads(row.payload or "{}"),
            attempts=row.attempts,
            max_attempts=row.max_attempts,
            run_after=row.run_after,
            created_at=row.created_at,
            started_at=row.started_at,
            finished_at=row.finished_at,
            lease_owner=row.lease_owner,
            lease_until=row.lease_until,
            cancel_requested=row.cancel_requested,
            progress_done=row.progress_done,
            progress_total=row.progress_total,
            progress_message=row.progress_message,
            last_error=row.last_error,
            result=json.loads(row.result) if row.result else None,
        )


@dataclass
class Claimed:
    """A job this process claimed (the `JobRun` its handler gets)."""

    service: JobService
    id: int
    kind: str
    resource: str
    payload: Mapping[str, Any]
    attempt: int
    max_attempts: int
    priority: int
    owner: str
    # The searcher replica it was placed on ("" for any runner).
    target: str = ""
    cancel_flag: threading.Event = field(default_factory=threading.Event)

    @property
    def cancelled(self) -> bool:
        return self.cancel_flag.is_set()

    def progress(self, done: int, total: int | None = None, message: str = "") -> None:
        self.service.set_progress(self, done, total, message)


_CURRENT = threading.local()


def current_job() -> Claimed | None:
    """The job this thread is running, if any (set by the runner around a handler)."""
    job: Claimed | None = getattr(_CURRENT, "job", None)
    return job


def set_current_job(job: Claimed | None) -> None:
    _CURRENT.job = job


@dataclass(frozen=True)
class KindStats:
    """Queue figures of one job kind (site admin page, `codewell jobs list --stats`, metrics)."""

    kind: str
    queued: int
    running: int
    failed: int
    oldest_queued_seconds: float | None


@dataclass(frozen=True)
class WorkerInfo:
    owner: str
    role: str
    kinds: str
    concurrency: int
    started_at: datetime
    heartbeat_at: datetime
    alive: bool


class JobService:
    """Enqueue, claim and finish jobs; list, cancel and retry them for operators."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.db = runtime.db
        # Set whenever this process enqueues: its idle runner threads wake at once instead of polling.
        self.enqueued = threading.Event()
        self._kinds: tuple[object, dict[str, JobKind]] | None = None
        # Runners started on this runtime, stopped when it closes (`stop()` callables, weakly held).
        self.runners: weakref.WeakSet[Any] = weakref.WeakSet()
        self._replicas: tuple[float, list[Replica]] | None = None

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    def close(self) -> None:
        """Stop the runners of this runtime (before its database goes): their running jobs keep their leases."""
        for runner in list(self.runners):
            runner.stop(grace_seconds=5.0)

    # --- declared kinds ---------------------------------------------------------------------------------

    @property
    def kinds(self) -> dict[str, JobKind]:
        """Every job kind the capabilities declare, by name."""
        capabilities = self.runtime.capabilities
        if self._kinds is None or self._kinds[0] is not capabilities:
            self._kinds = (capabilities, {kind.name: kind for c in capabilities for kind in c.jobs})
        return self._kinds[1]

    def kind(self, name: str) -> JobKind:
        found = self.kinds.get(name)
        if found is None:
            raise InvalidInput(f"unknown job kind {name!r}", hint="known kinds: " + ", ".join(sorted(self.kinds)))
        return found

    def subscribers(self, event: str) -> list[JobKind]:
        """The kinds an event enqueues (only once the capabilities are wired, as listeners were before)."""
        if not self.runtime.capabilities_ready:
            return []
        return [
            kind for kind in self.kinds.values() if event in kind.on and (kind.when is None or kind.when(self.runtime))
        ]

    # --- enqueueing -------------------------------------------------------------------------------------

    def enqueue(
        self,
        kind: str,
        resource: str,
        payload: Mapping[str, Any] | None = None,
        *,
        priority: int = PRIORITY_EVENT,
        cause: str = "",
        delay: float = 0.0,
        session: Session | None = None,
        target: str | None = None,
    ) -> None:
        """Queue `kind` for `resource`; a queued job of the same kind and lock key is superseded (new payload,
        the more urgent priority, the earlier start). Pass `session` to enqueue in the caller's transaction.
        `target` names the searcher replica that must run it (default: the owner of the resource for a placed
        kind in a cluster, else any runner)."""
        self.enqueue_many(
            kind,
            [(resource, payload or {})],
            priority=priority,
            cause=cause,
            delay=delay,
            session=session,
            target=target,
        )

    def enqueue_many(
        self,
        kind: str,
        items: Sequence[tuple[str, Mapping[str, Any]]],
        *,
        priority: int = PRIORITY_EVENT,
        cause: str = "",
        delay: float = 0.0,
        session: Session | None = None,
        target: str | None = None,
    ) -> None:
        """`enqueue` for many resources in one statement (a schedule tick over thousands of repositories)."""
        if not items:
            return
        declared = self.kind(kind)
        now = utcnow()
        place = self.placement_of(declared)
        rows = [
            {
                "kind": kind,
                "resource": resource,
                "key": f"{declared.lock_name}:{resource}",
                "payload": json.dumps(dict(payload), sort_keys=True),
                "cause": cause[:64],
                "state": QUEUED,
                "priority": priority,
                "attempts": 0,
                "max_attempts": declared.max_attempts,
                "run_after": now + timedelta(seconds=delay),
                "cancel_requested": False,
                "progress_done": 0,
                "progress_message": "",
                "created_at": now,
                "target": place(resource) if target is None else target,
            }
            for resource, payload in items
        ]
        if session is not None:
            self._insert(session, rows)
        else:
            with self.db.session() as own:
                self._insert(own, rows)
        metrics.ENQUEUED.labels(kind).inc(len(rows))
        self.enqueued.set()

    def _insert(self, session: Session, rows: list[dict[str, Any]]) -> None:
        # One compiled statement, executed for all rows at once (the driver batches them).
        session.execute(_upsert_statement(self.db.is_sqlite), rows)

    def emit(
        self,
        event: str,
        resource: str,
        payload: Mapping[str, Any] | None = None,
        *,
        priority: int | None = None,
        session: Session | None = None,
    ) -> list[str]:
        """Enqueue every kind that declared `on=(event, ...)`; returns their names.

        Without a priority, what a job causes is one step more urgent than that job: a repository's chain (sync,
        index, symbols) finishes before the next repository's sync starts, so the first ones are searchable
        soon instead of all of them late. Outside a job it is PRIORITY_EVENT.
        """
        if priority is None:
            running = current_job()
            priority = running.priority - 1 if running is not None else PRIORITY_EVENT
        kinds = self.subscribers(event)
        for kind in kinds:
            self.enqueue(
                kind.name, resource, payload, priority=priority, cause=event, delay=kind.delay, session=session
            )
        return [kind.name for kind in kinds]

    def ensure_periodic(self, kinds: Iterable[JobKind], *, replica: str = "") -> None:
        """Make sure each periodic kind has its one row (queued or running): the site's, or with `replica` that
        replica's own row of each placed kind (`replica:<name>`, run only there)."""
        for kind in kinds:
            if kind.every is None:
                continue
            resource, target = (REPLICA_PREFIX + replica, replica) if replica else (SITE, "")
            with self.db.session() as session:
                present = session.scalar(
                    select(JobRow.id)
                    .where(JobRow.kind == kind.name, JobRow.resource == resource, JobRow.state.in_((QUEUED, RUNNING)))
                    .limit(1)
                )
                if present is None:
                    priority = PRIORITY_SCHEDULED if kind.priority is None else kind.priority
                    self.enqueue(
                        kind.name, resource, priority=priority, cause="schedule", session=session, target=target
                    )

    # --- placement on searcher replicas -------------------------------------------------------------------

    @property
    def clustered(self) -> bool:
        return self.runtime.settings.clustered

    def replicas(self, *, fresh: bool = False) -> list[Replica]:
        """The live searcher replicas (heartbeat within SEARCHER_STALE_SECONDS), by name; read at most once a
        second per process unless `fresh`."""
        now = time.monotonic()
        cached = self._replicas
        if not fresh and cached is not None and now - cached[0] < _REPLICAS_TTL_SECONDS:
            return cached[1]
        cutoff = utcnow() - timedelta(seconds=SEARCHER_STALE_SECONDS)
        with self.db.engine.connect() as connection:
            rows = connection.execute(
                select(JobWorkerRow.owner, JobWorkerRow.address, JobWorkerRow.draining)
                .where(JobWorkerRow.role == SEARCHER, JobWorkerRow.heartbeat_at >= cutoff)
                .order_by(JobWorkerRow.owner)
            ).all()
        found = [Replica(name, address, bool(draining)) for name, address, draining in rows]
        self._replicas = (now, found)
        return found

    def owner_of(self, resource: str) -> str:
        """The live, non-draining replica that owns `resource` ("" outside a cluster or with none alive)."""
        if not self.clustered:
            return ""
        return owner(resource, [r.name for r in self.replicas() if not r.draining]) or ""

    def placement_of(self, kind: JobKind) -> Any:
        """resource → target for the jobs of `kind`: its owner for a placed kind in a cluster, else ""."""
        if not (kind.placed and self.clustered):
            return lambda resource: ""
        names = [r.name for r in self.replicas() if not r.draining]
        return lambda resource: owner(resource, names) or ""

    def placed_kinds(self) -> frozenset[str]:
        return frozenset(name for name, kind in self.kinds.items() if kind.placed)

    def retarget(self) -> int:
        """Place the queued jobs of placed kinds that wait for no live replica (queued with none alive, or for a
        replica that left or drains) on their owner now; returns how many moved. Periodic rows of replicas that
        left are removed (a replica queues its own when it starts)."""
        live = [r.name for r in self.replicas(fresh=True)]
        owners = [r.name for r in self.replicas() if not r.draining]
        if not owners:
            return 0
        placed = sorted(self.placed_kinds())
        moved = 0
        with self.db.session() as session:
            rows = session.execute(
                select(JobRow.id, JobRow.resource, JobRow.target).where(
                    JobRow.state == QUEUED, JobRow.kind.in_(placed), JobRow.target.not_in(owners)
                )
            ).all()
            for job_id, resource, current in rows:
                if resource.startswith(REPLICA_PREFIX):
                    if current not in live:
                        session.execute(delete(JobRow).where(JobRow.id == job_id, JobRow.state == QUEUED))
                    continue
                new = owner(resource, owners) or ""
                try:
                    with session.begin_nested():
                        session.execute(
                            update(JobRow).where(JobRow.id == job_id, JobRow.state == QUEUED).values(target=new)
                        )
                    moved += 1
                except IntegrityError:
                    pass
        return moved

    # --- claiming and finishing -------------------------------------------------------------------------

    def _bookkeeping(self, connection: Connection | Session) -> None:
        """Commit a claim, a renewal or a success without waiting for PostgreSQL's WAL flush.

        What a server crash could lose is the last fraction of a second of such updates: a claim lost puts the
        job back in the queue (its handlers are idempotent) and a success lost runs it once more. Enqueueing
        keeps its synchronous commit: a job, once accepted, is never lost. This took PostgreSQL from 77 to
        several hundred jobs per second on this machine's disk.
        """
        if not self.db.is_sqlite:
            connection.execute(text("SET LOCAL synchronous_commit TO OFF"))

    def claim(
        self,
        owner: str,
        kinds: frozenset[str] | None = None,
        resource: str | None = None,
        *,
        target: str = "",
    ) -> Claimed | None:
        """Claim the most urgent due job (of `kinds`, of `resource`), or None; leases it to `owner`.

        `target` is the searcher replica claiming the jobs placed on it; "" claims the jobs any runner may run.
        In a cluster the others never run a placed kind (its files would land in the wrong data dir): one
        queued while no replica was alive waits for a replica to place it (`retarget`).
        """
        declared = self.kinds
        names = frozenset(declared) if kinds is None else kinds & frozenset(declared)
        if not target and self.clustered:
            names -= self.placed_kinds()
        if not names:
            return None
        # Only kinds this process knows: a job of a newer version's kind waits for a process that has it.
        # Parameter names differ from column names: an UPDATE would add a parameter named like a column to its SET.
        params: dict[str, Any] = {
            "p_owner": owner,
            "p_kinds": sorted(names),
            "p_resource": resource,
            "p_target": target,
        }
        # First the jobs of dead processes (their lease ran out), then queued ones, most urgent first.
        phases = (RUNNING, QUEUED, QUEUED, QUEUED, QUEUED, QUEUED)
        for phase in phases:
            now = utcnow()
            params.update(p_now=now, p_lease=now + timedelta(seconds=DEFAULT_LEASE_SECONDS))
            try:
                row = self._take(phase, resource is not None, params)
            except IntegrityError:
                # Another claimer started a job of the same key between our check and our update: try again.
                continue
            if row is _TAKEN or (row is None and phase == RUNNING):
                continue  # another claimer won this one / no dead process's job: look further
            if row is None:
                return None
            kind = declared[row.kind]
            if kind.lease_seconds != DEFAULT_LEASE_SECONDS:
                with self.db.engine.begin() as connection:
                    self._bookkeeping(connection)
                    lease = now + timedelta(seconds=kind.lease_seconds)
                    connection.execute(_SET_LEASE, {"p_id": row.id, "p_lease": lease})
            metrics.CLAIMED.labels(row.kind).inc()
            return Claimed(
                self,
                id=row.id,
                kind=row.kind,
                resource=row.resource,
                payload=json.loads(row.payload or "{}"),
                attempt=row.attempts,
                max_attempts=row.max_attempts,
                priority=row.priority,
                owner=owner,
                target=target,
            )
        return None

    def _take(self, phase: str, by_resource: bool, params: dict[str, Any]) -> Any:
        """Claim one job of `phase` (the claim's row, None when there is none, _TAKEN when another claimer won).

        PostgreSQL: one `UPDATE ... WHERE id = (SELECT ... FOR UPDATE SKIP LOCKED)`. SQLite: the candidate is
        read first (a read takes no lock in WAL mode) and taken by an UPDATE of that row only if it is still
        free. Idle workers polling and claims finding nothing never queue for SQLite's single write lock, which
        the jobs doing the work need.
        """
        if not self.db.is_sqlite:
            with self.db.engine.begin() as connection:
                self._bookkeeping(connection)
                return connection.execute(_claim_statement(phase, by_resource), params).first()
        with self.db.engine.connect() as connection:
            candidate = connection.execute(_candidate_statement(phase, by_resource), params).scalar()
        if candidate is None:
            return None
        with self.db.engine.begin() as connection:
            row = connection.execute(_take_statement(phase), {**params, "p_id": candidate}).first()
        return row if row is not None else _TAKEN

    def renew(self, claimed: Sequence[Claimed]) -> None:
        """Extend the leases of `claimed` (while still theirs) and raise the cancel flag of those an operator
        cancelled."""
        if not claimed:
            return
        now = utcnow()
        kinds = self.kinds
        with self.db.engine.begin() as connection:
            self._bookkeeping(connection)
            for job in claimed:
                lease = kinds[job.kind].lease_seconds if job.kind in kinds else 600.0
                connection.execute(
                    _RENEW, {"p_id": job.id, "p_owner": job.owner, "p_lease": now + timedelta(seconds=lease)}
                )
            cancelled = set(
                connection.scalars(
                    select(_JOBS.c.id).where(_JOBS.c.id.in_([j.id for j in claimed]), _JOBS.c.cancel_requested)
                )
            )
        for job in claimed:
            if job.id in cancelled:
                job.cancel_flag.set()

    def release_process(self, host: str, pid: int) -> int:
        """End the leases of a process known to be dead (a worker child its server saw exit after `kill -9`):
        its running jobs are taken over at the next claim instead of when their leases run out (10 minutes and
        more, the repository's other jobs held back meanwhile). Returns how many were released."""
        prefix = f"{host[:40]}:{pid}:"  # runner.new_owner's host:pid:role:suffix
        with self.db.engine.begin() as connection:
            released = connection.execute(
                update(_JOBS)
                .where(_JOBS.c.state == RUNNING, _JOBS.c.lease_owner.startswith(prefix, autoescape=True))
                .values(lease_until=utcnow() - timedelta(seconds=1))
            )
        return int(released.rowcount or 0)

    def set_progress(self, job: Claimed, done: int, total: int | None, message: str) -> None:
        with self.db.session() as session:
            session.execute(
                update(JobRow)
                .where(JobRow.id == job.id, JobRow.lease_owner == job.owner)
                .values(progress_done=done, progress_total=total, progress_message=message[:500])
            )

    def succeed(self, job: Claimed, result: Mapping[str, Any] | None) -> None:
        """Record success; a periodic job is queued again `every` seconds later instead."""
        kind = self.kinds.get(job.kind)
        now = utcnow()
        with self.db.session() as session:
            self._bookkeeping(session)
            if kind is not None and kind.every is not None:
                self._requeue_periodic(session, job, kind, now, error=None)
            else:
                session.execute(
                    _SUCCEED,
                    {
                        "p_id": job.id,
                        "p_owner": job.owner,
                        "p_state": CANCELLED if job.cancelled else SUCCEEDED,
                        "p_now": now,
                        "p_result": json.dumps(dict(result)) if result else None,
                        "p_error": "cancelled by an operator" if job.cancelled else None,
                    },
                )
        metrics.FINISHED.labels(job.kind, "cancelled" if job.cancelled else "succeeded").inc()

    def fail(self, job: Claimed, error: str, *, final: bool = False) -> str:
        """Record a failed attempt: queued again after a back-off, or failed for good after `max_attempts`
        (or when `final`); returns the new state."""
        kind = self.kinds.get(job.kind)
        now = utcnow()
        error = error[:MAX_ERROR_CHARS]
        with self.db.session() as session:
            if kind is not None and kind.every is not None:
                self._requeue_periodic(session, job, kind, now, error=error)
                state = QUEUED
            elif job.cancelled:
                state = CANCELLED
                self._finish(session, job, CANCELLED, now, f"cancelled by an operator ({error})")
            elif final or job.attempt >= job.max_attempts:
                state = FAILED
                self._finish(session, job, FAILED, now, error)
            else:
                newer = session.scalar(
                    select(JobRow.id).where(
                        JobRow.kind == job.kind, JobRow.resource == job.resource, JobRow.state == QUEUED
                    )
                )
                if newer is not None:
                    # A newer job for the same resource is queued: it does what this retry would have done.
                    state = CANCELLED
                    self._finish(session, job, CANCELLED, now, f"{error} (superseded by job {newer})")
                else:
                    state = QUEUED
                    session.execute(
                        update(JobRow)
                        .where(JobRow.id == job.id, JobRow.lease_owner == job.owner)
                        .values(
                            state=QUEUED,
                            run_after=now + timedelta(seconds=backoff(job.attempt)),
                            lease_owner=None,
                            lease_until=None,
                            last_error=error,
                        )
                    )
        metrics.FINISHED.labels(job.kind, "retried" if state == QUEUED else state).inc()
        return state

    @staticmethod
    def _finish(session: Session, job: Claimed, state: str, now: datetime, error: str | None) -> None:
        session.execute(
            update(JobRow)
            .where(JobRow.id == job.id, JobRow.lease_owner == job.owner)
            .values(state=state, finished_at=now, lease_owner=None, lease_until=None, last_error=error)
        )

    def _requeue_periodic(
        self, session: Session, job: Claimed, kind: JobKind, now: datetime, error: str | None
    ) -> None:
        assert kind.every is not None
        delay = kind.every if error is None else max(kind.every, backoff(min(job.attempt, 4)))
        other = session.scalar(
            select(JobRow.id)
            .where(
                JobRow.kind == job.kind, JobRow.resource == job.resource, JobRow.state == QUEUED, JobRow.id != job.id
            )
            .limit(1)
        )
        if other is not None:
            session.execute(delete(JobRow).where(JobRow.id == job.id))
            return
        try:
            # In a savepoint: another process may queue the kind's row between the check above and this update
            # (its start-up `ensure_periodic`, an event); then that row is the next run and this one goes.
            with session.begin_nested():
                session.execute(
                    update(JobRow)
                    .where(JobRow.id == job.id)
                    .values(
                        state=QUEUED,
                        run_after=now + timedelta(seconds=delay),
                        priority=PRIORITY_SCHEDULED if kind.priority is None else kind.priority,
                        attempts=0 if error is None else JobRow.attempts,
                        lease_owner=None,
                        lease_until=None,
                        finished_at=now,
                        last_error=error,
                    )
                )
        except IntegrityError:
            session.execute(delete(JobRow).where(JobRow.id == job.id))

    # --- workers ----------------------------------------------------------------------------------------

    def register_worker(
        self, owner: str, role: str, kinds: frozenset[str] | None, concurrency: int, *, address: str = ""
    ) -> None:
        now = utcnow()
        with self.db.session() as session:
            session.execute(delete(JobWorkerRow).where(JobWorkerRow.owner == owner))
            session.add(
                JobWorkerRow(
                    owner=owner,
                    role=role,
                    kinds=",".join(sorted(kinds)) if kinds is not None else "*",
                    concurrency=concurrency,
                    started_at=now,
                    heartbeat_at=now,
                    address=address,
                )
            )
            # Workers gone for a day are forgotten.
            session.execute(delete(JobWorkerRow).where(JobWorkerRow.heartbeat_at < now - timedelta(days=1)))

    def worker_heartbeat(self, owner: str) -> None:
        with self.db.session() as session:
            session.execute(update(JobWorkerRow).where(JobWorkerRow.owner == owner).values(heartbeat_at=utcnow()))

    def set_draining(self, name: str, draining: bool = True) -> bool:
        """Mark a searcher replica draining (its repositories move to the others; it answers for what it holds
        until they have); False when no such replica is registered."""
        with self.db.session() as session:
            done = session.execute(
                update(JobWorkerRow)
                .where(JobWorkerRow.owner == name, JobWorkerRow.role == SEARCHER)
                .values(draining=draining)
            )
            found = bool(cast(Any, done).rowcount)
        self._replicas = None
        return found

    def unregister_worker(self, owner: str) -> None:
        with self.db.session() as session:
            session.execute(delete(JobWorkerRow).where(JobWorkerRow.owner == owner))

    def pending(self, resource: str) -> tuple[int, int]:
        """(due, running or held back for a batch; waiting for a retry later) jobs of `resource` (what `drain`
        waits for, and what it does not)."""
        now = utcnow()
        with self.db.session() as session:
            active = session.scalar(
                select(func.count())
                .select_from(JobRow)
                .where(
                    JobRow.resource == resource,
                    or_(
                        JobRow.state == RUNNING,
                        and_(JobRow.state == QUEUED, or_(JobRow.run_after <= now, JobRow.attempts == 0)),
                    ),
                )
            )
            later = session.scalar(
                select(func.count())
                .select_from(JobRow)
                .where(JobRow.resource == resource, JobRow.state == QUEUED, JobRow.run_after > now, JobRow.attempts > 0)
            )
        return int(active or 0), int(later or 0)

    def latest_by_kind(self, resource: str) -> dict[str, Job]:
        """The newest job of each kind for `resource` (per-repository stage status)."""
        with self.db.session() as session:
            rows = session.scalars(select(JobRow).where(JobRow.resource == resource).order_by(JobRow.id)).all()
            return {row.kind: Job.of(row) for row in rows}

    def stage_kinds(self) -> dict[str, str]:
        """Job kind → the per-resource stage it shows ("mirror", "search", ...), in declaration order."""
        return {name: kind.stage for name, kind in self.kinds.items() if kind.stage}

    def stages(self, resources: Sequence[str]) -> dict[str, dict[str, str]]:
        """Per resource, each stage's latest job as a short text ("done", "running 40%", "failed: ...")."""
        kinds = self.stage_kinds()
        out: dict[str, dict[str, str]] = {resource: {} for resource in resources}
        if not kinds or not resources:
            return out
        with self.db.session() as session:
            for start in range(0, len(resources), 500):
                rows = session.execute(
                    select(
                        JobRow.resource,
                        JobRow.kind,
                        JobRow.state,
                        JobRow.progress_done,
                        JobRow.progress_total,
                        JobRow.last_error,
                    )
                    .where(JobRow.resource.in_(resources[start : start + 500]), JobRow.kind.in_(list(kinds)))
                    .order_by(JobRow.id)
                ).all()
                for resource, kind, state, done, total, error in rows:
                    out[resource][kinds[kind]] = _stage_text(state, done, total, error)
        return out

    def prune(self, *, keep_finished: timedelta, keep_failed: timedelta) -> int:
        """Delete finished jobs older than `keep_finished` (failed ones after `keep_failed`); how many went."""
        now = utcnow()
        with self.db.session() as session:
            done = session.execute(
                delete(JobRow).where(JobRow.state.in_((SUCCEEDED, CANCELLED)), JobRow.finished_at < now - keep_finished)
            )
            failed = session.execute(
                delete(JobRow).where(JobRow.state == FAILED, JobRow.finished_at < now - keep_failed)
            )
        return int(getattr(done, "rowcount", 0) or 0) + int(getattr(failed, "rowcount", 0) or 0)

    def cancel_resource(self, resource: str, *, session: Session | None = None) -> None:
        """Cancel the queued jobs of `resource` and ask its running ones to stop (it is being removed)."""

        def run(own: Session) -> None:
            now = utcnow()
            own.execute(
                update(JobRow)
                .where(JobRow.resource == resource, JobRow.state == QUEUED)
                .values(state=CANCELLED, finished_at=now, last_error="the resource was removed")
            )
            own.execute(
                update(JobRow).where(JobRow.resource == resource, JobRow.state == RUNNING).values(cancel_requested=True)
            )

        if session is not None:
            run(session)
        else:
            with self.db.session() as own:
                run(own)

    # --- operators --------------------------------------------------------------------------------------

    def list_jobs(
        self,
        actor: Actor,
        *,
        state: str | None = None,
        kind: str | None = None,
        resource: str | None = None,
        limit: int = 100,
    ) -> list[Job]:
        """Jobs, newest first, filtered by state, kind and resource."""
        ensure(actor, Action.JOBS_READ)
        if state is not None and state not in STATES:
            raise InvalidInput(f"unknown job state {state!r}", hint="one of " + ", ".join(STATES))
        if not 1 <= limit <= LIST_MAX:
            raise InvalidInput(f"limit must be between 1 and {LIST_MAX} (got {limit})")
        statement = select(JobRow)
        if state is not None:
            statement = statement.where(JobRow.state == state)
        if kind is not None:
            statement = statement.where(JobRow.kind == kind)
        if resource is not None:
            statement = statement.where(JobRow.resource == resource)
        with self.db.session() as session:
            rows = session.scalars(statement.order_by(JobRow.id.desc()).limit(limit)).all()
            return [Job.of(row) for row in rows]

    def get(self, actor: Actor, job_id: int) -> Job:
        ensure(actor, Action.JOBS_READ)
        with self.db.session() as session:
            row = session.get(JobRow, job_id)
            if row is None:
                raise NotFound(f"job {job_id} not found", hint="list jobs with `codewell jobs list`")
            return Job.of(row)

    def cancel(self, actor: Actor, job_id: int) -> Job:
        """Cancel a queued job now, or ask a running one to stop at its next safe point."""
        ensure(actor, Action.JOBS_MANAGE)
        now = utcnow()
        with self.db.session() as session:
            row = session.get(JobRow, job_id)
            if row is None:
                raise NotFound(f"job {job_id} not found", hint="list jobs with `codewell jobs list`")
            if row.state == QUEUED:
                row.state, row.finished_at, row.last_error = CANCELLED, now, "cancelled by an operator"
            elif row.state == RUNNING:
                row.cancel_requested = True
            else:
                raise InvalidInput(
                    f"job {job_id} is already {row.state}", hint="only queued or running jobs can be cancelled"
                )
            return Job.of(row)

    def retry(self, actor: Actor, job_id: int) -> Job:
        """Queue a failed or cancelled job again now (attempts start over), ahead of scheduled work."""
        ensure(actor, Action.JOBS_MANAGE)
        with self.db.session() as session:
            row = session.get(JobRow, job_id)
            if row is None:
                raise NotFound(f"job {job_id} not found", hint="list jobs with `codewell jobs list`")
            if row.state not in (FAILED, CANCELLED):
                raise InvalidInput(f"job {job_id} is {row.state}", hint="only failed or cancelled jobs can be retried")
            newer = session.scalar(
                select(JobRow).where(JobRow.kind == row.kind, JobRow.key == row.key, JobRow.state == QUEUED)
            )
            if newer is not None:
                newer.priority = min(newer.priority, PRIORITY_PERSON)
                return Job.of(newer)
            row.state, row.attempts, row.run_after = QUEUED, 0, utcnow()
            row.finished_at, row.cancel_requested, row.priority = None, False, min(row.priority, PRIORITY_PERSON)
            row.cause, row.last_error = "retry", None
            job = Job.of(row)
        self.enqueued.set()
        return job

    def stats(self, actor: Actor) -> list[KindStats]:
        """Per kind: queued, running and failed jobs, and how long the oldest due job has waited."""
        ensure(actor, Action.JOBS_READ)
        return self.queue_stats()

    def queue_stats(self) -> list[KindStats]:
        """`stats` without a permission check (the /metrics collector runs as the service)."""
        now = utcnow()
        with self.db.session() as session:
            counts = session.execute(
                select(JobRow.kind, JobRow.state, func.count()).group_by(JobRow.kind, JobRow.state)
            ).all()
            oldest = dict(
                session.execute(
                    select(JobRow.kind, func.min(JobRow.run_after))
                    .where(JobRow.state == QUEUED, JobRow.run_after <= now)
                    .group_by(JobRow.kind)
                ).all()
            )
        table: dict[str, dict[str, int]] = {name: {} for name in self.kinds}
        for kind, state, count in counts:
            table.setdefault(kind, {})[state] = int(count)
        out = []
        for kind in sorted(table):
            first = oldest.get(kind)
            if first is not None and first.tzinfo is None:
                first = first.replace(tzinfo=now.tzinfo)
            out.append(
                KindStats(
                    kind,
                    queued=table[kind].get(QUEUED, 0),
                    running=table[kind].get(RUNNING, 0),
                    failed=table[kind].get(FAILED, 0),
                    oldest_queued_seconds=(now - first).total_seconds() if first is not None else None,
                )
            )
        return out

    def workers(self, actor: Actor) -> list[WorkerInfo]:
        ensure(actor, Action.JOBS_READ)
        return self.live_workers(include_stale=True)

    def live_workers(self, *, include_stale: bool = False) -> list[WorkerInfo]:
        now = utcnow()
        with self.db.session() as session:
            rows = session.scalars(select(JobWorkerRow).order_by(JobWorkerRow.started_at)).all()
            infos = [
                WorkerInfo(
                    row.owner,
                    row.role,
                    row.kinds,
                    row.concurrency,
                    row.started_at,
                    row.heartbeat_at,
                    alive=(now - row.heartbeat_at).total_seconds() < WORKER_STALE_SECONDS,
                )
                for row in rows
            ]
        return infos if include_stale else [w for w in infos if w.alive]


def _stage_text(state: str, done: int, total: int | None, error: str | None) -> str:
    if state == RUNNING:
        return f"running {100 * done // total}%" if total else "running"
    if state == SUCCEEDED:
        return "done"
    if state == FAILED:
        return f"failed: {(error or '')[:100]}"
    if state == QUEUED and error:
        return f"retrying: {error[:100]}"
    return state


_JOBS = cast(Table, JobRow.__table__)
_SET_LEASE = update(_JOBS).where(_JOBS.c.id == bindparam("p_id")).values(lease_until=bindparam("p_lease"))
_RENEW = (
    update(_JOBS)
    .where(_JOBS.c.id == bindparam("p_id"), _JOBS.c.lease_owner == bindparam("p_owner"), _JOBS.c.state == RUNNING)
    .values(lease_until=bindparam("p_lease"))
)
_SUCCEED = (
    update(_JOBS)
    .where(_JOBS.c.id == bindparam("p_id"), _JOBS.c.lease_owner == bindparam("p_owner"))
    .values(
        state=bindparam("p_state"),
        finished_at=bindparam("p_now"),
        lease_owner=None,
        lease_until=None,
        result=bindparam("p_result"),
        last_error=bindparam("p_error"),
    )
)
_CLAIMS: dict[tuple[str, bool], Any] = {}


# `_take`'s answer when another claimer got the candidate first.
_TAKEN = object()


def _candidate_statement(phase: str, by_resource: bool) -> Any:
    """The id of the job a claim would take: the subquery of `_claim_statement`, on its own (SQLite)."""
    key = ("candidate:" + phase, by_resource)
    found = _CLAIMS.get(key)
    if found is None:
        found = _CLAIMS[key] = _candidate(phase, by_resource, lock=False)
    return found


def _take_statement(phase: str) -> Any:
    """Take the job `p_id` if it is still what the candidate query saw (SQLite's second step)."""
    key = ("take:" + phase, False)
    found = _CLAIMS.get(key)
    if found is not None:
        return found
    jobs = _JOBS
    if phase == RUNNING:
        still = and_(jobs.c.state == RUNNING, jobs.c.lease_until < bindparam("p_now"))
    else:
        still = jobs.c.state == QUEUED
    found = _CLAIMS[key] = _claim_update(jobs.c.id == bindparam("p_id"), still)
    return found


def _candidate(phase: str, by_resource: bool, *, lock: bool) -> Any:
    jobs = _JOBS
    running = _JOBS.alias("running")
    busy = exists().where(running.c.key == jobs.c.key, running.c.state == RUNNING, running.c.id != jobs.c.id)
    if phase == RUNNING:
        due = and_(jobs.c.state == RUNNING, jobs.c.lease_until < bindparam("p_now"))
    else:
        due = and_(jobs.c.state == QUEUED, jobs.c.run_after <= bindparam("p_now"))
        if by_resource:
            # Draining one resource (a caller waits for it): a job held back only to gather a batch
            # (`JobKind.delay`, never attempted) is due at once; a retry still waits for its back-off.
            due = and_(jobs.c.state == QUEUED, or_(jobs.c.run_after <= bindparam("p_now"), jobs.c.attempts == 0))
    candidate = select(jobs.c.id).where(
        due,
        jobs.c.target == bindparam("p_target"),
        ~busy,
        jobs.c.kind.in_(bindparam("p_kinds", expanding=True)),
    )
    if by_resource:
        candidate = candidate.where(jobs.c.resource == bindparam("p_resource"))
    candidate = candidate.order_by(jobs.c.state, jobs.c.target, jobs.c.priority, jobs.c.run_after, jobs.c.id).limit(1)
    return candidate.with_for_update(skip_locked=True, of=jobs) if lock else candidate


def _claim_update(*where: Any) -> Any:
    jobs = _JOBS
    return (
        update(jobs)
        .where(*where)
        .values(
            state=RUNNING,
            attempts=jobs.c.attempts + 1,
            lease_owner=bindparam("p_owner"),
            # The kind's own lease is set right after.
            lease_until=bindparam("p_lease"),
            started_at=bindparam("p_now"),
        )
        .returning(
            jobs.c.id,
            jobs.c.kind,
            jobs.c.resource,
            jobs.c.payload,
            jobs.c.attempts,
            jobs.c.max_attempts,
            jobs.c.priority,
        )
    )


def _claim_statement(phase: str, by_resource: bool) -> Any:
    """The claim as one prebuilt statement (building it per call cost more than running it).

    `UPDATE jobs SET state='running', ... WHERE id = (SELECT id FROM jobs WHERE <due> AND NOT EXISTS (a running
    job of the same key) AND kind IN (...) ORDER BY state, priority, run_after, id LIMIT 1 FOR UPDATE SKIP
    LOCKED) RETURNING ...`: the subquery walks `ix_jobs_claim_order` in order and stops at the first job it may
    run, so a claim costs the same with ten or ten thousand jobs waiting.
    """
    key = (phase, by_resource)
    found = _CLAIMS.get(key)
    if found is None:
        candidate = _candidate(phase, by_resource, lock=True)
        found = _CLAIMS[key] = _claim_update(_JOBS.c.id == candidate.scalar_subquery())
    return found


_UPSERTS: dict[bool, Any] = {}


def _upsert_statement(is_sqlite: bool) -> Any:
    """`INSERT ... ON CONFLICT (kind, key) WHERE state = 'queued' DO UPDATE`: enqueueing supersedes a queued job
    of the same kind and key (its payload, the more urgent priority, the earlier start) instead of adding one."""
    found = _UPSERTS.get(is_sqlite)
    if found is not None:
        return found
    statement = (sqlite if is_sqlite else postgresql).insert(_JOBS)
    excluded = statement.excluded
    least = func.min if is_sqlite else func.least
    statement = statement.on_conflict_do_update(
        index_elements=[_JOBS.c.kind, _JOBS.c.key],
        # A literal predicate: PostgreSQL matches a partial index only against the same text.
        index_where=text("state = 'queued'"),
        set_={
            "payload": excluded.payload,
            # The newest placement wins: a repository that moved is indexed by its new owner.
            "target": excluded.target,
            "priority": least(_JOBS.c.priority, excluded.priority),
            "run_after": least(_JOBS.c.run_after, excluded.run_after),
        },
    )
    _UPSERTS[is_sqlite] = statement
    return statement
