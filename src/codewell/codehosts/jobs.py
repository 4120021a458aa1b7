"""Code hosts' background work as jobs (codewell.jobs): discovery and permission syncs as they fall due, and a
user's permission sync when they sign in or link an account at a host.

- `codehosts.schedule` (periodic, every 5 s, one row for the whole site) reads what is due, as `run_due` does,
  and only enqueues: `codehosts.discover` and `codehosts.permissions` of a connection (resource
  `codehost:<id>`). Whichever process claims a job runs it: two `codewell serve` processes (or workers) no
  longer both discover one connection, and one connection's discovery and permission sync never overlap (one
  lock). A connection whose job is queued or running gets no second one (its next time is recorded only when
  the job ends).
- `codehosts.user_permissions` (resource `user:<id>`) syncs one user at every connection where they have a
  linked account. The sign-in listener enqueues it ahead of other work and waits for it at most
  SIGN_IN_WAIT_SECONDS, so that the page after the sign-in shows what the host grants: a job runner of this or
  another process runs it; when no live runner takes that kind (a command-line process, `codewell serve
  --no-jobs` without workers) the sign-in runs it itself (`drain`), as the listener did before.
- Handing the connections' git credentials to repos (`git_credential`, a credential source) is per process and
  stays in setup.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Self

from sqlalchemy import select

from codewell.auth.service import Identity
from codewell.capability import JobKind, JobRun
from codewell.codehosts.models import ConnectionStateRow
from codewell.codehosts.service import SIGN_IN_WAIT_SECONDS, CodeHostService
from codewell.config.codehosts import CodeHostConnection
from codewell.core.actors import INTERNAL
from codewell.db.base import utcnow
from codewell.jobs.runner import drain
from codewell.jobs.service import PRIORITY_PERSON, PRIORITY_SCHEDULED, JobService

if TYPE_CHECKING:
    from codewell.runtime import Runtime

log = logging.getLogger(__name__)

SCHEDULE = "codehosts.schedule"
DISCOVER = "codehosts.discover"
PERMISSIONS = "codehosts.permissions"
USER_PERMISSIONS = "codehosts.user_permissions"
TICK_SECONDS = 5.0
# A connection's discovery and its permission sync never run at the same time.
LOCK = "codehosts"
_ACTIVE = ("queued", "running")


def connection_resource(connection_id: str) -> str:
    return f"codehost:{connection_id}"


def user_resource(user_id: int) -> str:
    return f"user:{user_id}"


def _connection(runtime: Runtime, job: JobRun) -> CodeHostConnection | None:
    wanted = str(job.payload.get("connection_id", ""))
    return next((c for c in runtime.get(CodeHostService).connections() if c.id == wanted), None)


def _due(at: datetime | None, now: datetime) -> bool:
    if at is None:
        return True
    if at.tzinfo is None:  # SQLite hands naive UTC back
        at = at.replace(tzinfo=now.tzinfo)
    return at <= now


def schedule(runtime: Runtime, _job: JobRun) -> Mapping[str, Any]:
    """Enqueue the discoveries and permission syncs that are due (the old serve loop's `run_due`, as jobs)."""
    service = runtime.get(CodeHostService)
    jobs = runtime.get(JobService)
    now = utcnow()
    with runtime.db.session() as session:
        states = {row.connection_id: row for row in session.scalars(select(ConnectionStateRow))}
        session.expunge_all()
    discover: list[tuple[str, Mapping[str, Any]]] = []
    permissions: list[tuple[str, Mapping[str, Any]]] = []
    for connection in service.connections():
        resource = connection_resource(connection.id)
        latest = jobs.latest_by_kind(resource)
        if any(latest[kind].state in _ACTIVE for kind in (DISCOVER, PERMISSIONS) if kind in latest):
            continue  # its job has not finished yet: it records the next time when it does
        state = states.get(connection.id)
        if state is None or _due(state.next_sync_at, now):
            discover.append((resource, {"connection_id": connection.id}))
            continue  # permissions after a successful discovery, at a later tick
        if not service.permissions_enabled(connection):
            if connection.authorization:
                # Switched off by the plan (or a lapsed license): what this connection synced must stop granting
                # access at once; it is synced again, from the host, once the feature is back.
                service.repos.clear_permission_source(INTERNAL, connection.source)
            continue
        if _due(state.perms_next_at, now) or service._due_users(connection, now):
            permissions.append((resource, {"connection_id": connection.id}))
    jobs.enqueue_many(DISCOVER, discover, priority=PRIORITY_SCHEDULED, cause="schedule")
    jobs.enqueue_many(PERMISSIONS, permissions, priority=PRIORITY_SCHEDULED, cause="schedule")
    return {"discover": len(discover), "permissions": len(permissions)} if discover or permissions else {}


def discover(runtime: Runtime, job: JobRun) -> Mapping[str, Any]:
    """Discover one connection's repositories: register, update, remove (a host error is recorded on the
    connection, retried by the schedule within a minute, and does not fail the job)."""
    connection = _connection(runtime, job)
    if connection is None:
        return {"skipped": "the connection is no longer configured"}
    report = runtime.get(CodeHostService).discover(connection)
    return report.as_json()


def permissions(runtime: Runtime, job: JobRun) -> Mapping[str, Any]:
    """One connection's due permission syncs: every private repository's members when due, then the linked
    users whose sync is due."""
    connection = _connection(runtime, job)
    if connection is None:
        return {"skipped": "the connection is no longer configured"}
    service = runtime.get(CodeHostService)
    if not service.permissions_enabled(connection):
        return {"skipped": "permission sync is off for this connection"}
    now = utcnow()
    with runtime.db.session() as session:
        state = session.get(ConnectionStateRow, connection.id)
        repos_due = state is None or _due(state.perms_next_at, now)
    repos = service.sync_repos_permissions(connection) if repos_due else 0
    users = service.sync_users_permissions(connection, service._due_users(connection, now))
    return {"repositories": repos, "users": users}


def user_permissions(runtime: Runtime, job: JobRun) -> Mapping[str, Any]:
    """One user's permissions at every connection where they have a linked account (sign-in, link)."""
    user_id = int(job.payload["user_id"])
    service = runtime.get(CodeHostService)
    synced = []
    for connection in service.connections():
        if not service.permissions_enabled(connection):
            continue
        if not service.auth.linked_identities(INTERNAL, connection.kind, connection.url, user_id):
            continue
        service.sync_users_permissions(connection, [user_id])
        synced.append(connection.id)
    return {"connections": synced}


class SignInSync:
    """The identity listener: a user's permission sync as a job, waited for briefly by the sign-in."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    def identity_linked(self, identity: Identity) -> None:
        service = self.runtime.get(CodeHostService)
        if not any(
            c.kind == identity.kind and c.url == identity.service_id and service.permissions_enabled(c)
            for c in service.connections()
        ):
            return
        resource = user_resource(identity.user_id)
        jobs = self.runtime.get(JobService)
        jobs.enqueue(
            USER_PERMISSIONS, resource, {"user_id": identity.user_id}, priority=PRIORITY_PERSON, cause="sign-in"
        )
        if not any(w.kinds == "*" or USER_PERMISSIONS in w.kinds.split(",") for w in jobs.live_workers()):
            # Nobody else would run it soon: the sign-in does (it did before jobs existed).
            drain(self.runtime, resource, timeout=SIGN_IN_WAIT_SECONDS)
            return
        # A runner takes it at once; a slow host must not hold the sign-in: it finishes there.
        deadline = time.monotonic() + SIGN_IN_WAIT_SECONDS
        while time.monotonic() < deadline:
            active, _later = jobs.pending(resource)
            if active == 0:
                return
            time.sleep(0.1)
        log.info("permission sync of user %d still running after the sign-in", identity.user_id)


JOB_KINDS: list[JobKind] = [
    JobKind(
        SCHEDULE,
        schedule,
        "enqueue the code host discoveries and permission syncs that are due",
        every=TICK_SECONDS,
        lease_seconds=120.0,
    ),
    JobKind(
        DISCOVER,
        discover,
        "discover a code host connection's repositories",
        lock=LOCK,
        enqueued_by="`codehosts.schedule`",
    ),
    JobKind(
        PERMISSIONS,
        permissions,
        "sync a code host connection's repository and user permissions",
        lock=LOCK,
        enqueued_by="`codehosts.schedule`",
    ),
    JobKind(
        USER_PERMISSIONS,
        user_permissions,
        "sync one user's repository permissions at their code hosts",
        enqueued_by="a sign-in or account link at a code host",
    ),
]
