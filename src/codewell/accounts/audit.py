"""The security audit log: an append-only table plus one structured log line per entry.

An entry is never lost silently. When it cannot be written (a storage fault: the write lock held past the
busy timeout, a read-only or full disk) `record` raises `StorageUnavailable`, so the request that needed the
entry answers 503 and does not go ahead unaudited (a sign-in hands out no session), and the entry's log line says
that it is missing from the table. Callers record before they act where they can; docs/security.md, "Storage
faults".
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Self

from sqlalchemy import select

from codewell.accounts.models import AuditEntryRow
from codewell.authz import Action, ensure
from codewell.core.actors import Actor
from codewell.core.errors import InvalidInput, StorageUnavailable
from codewell.db.base import utcnow

if TYPE_CHECKING:
    from codewell.runtime import Runtime

log = logging.getLogger("codewell.audit")

# Keys whose values must never reach the log, whatever a caller passes in `details`.
_SECRET_KEYS = frozenset({"password", "token", "raw", "secret", "code", "cookie", "authorization"})
MAX_AUDIT_PAGE = 1000


@dataclass(frozen=True, slots=True)
class AuditEntry:
    id: int
    created_at: datetime
    entity: str
    action: str
    actor_user_id: int | None
    actor_username: str
    reason: str
    ip: str
    user_agent: str
    details: dict[str, Any]

    def as_json(self) -> dict[str, Any]:
        """The entry as the REST API returns it."""
        return {
            "id": self.id,
            "createdAt": self.created_at.isoformat(),
            "entity": self.entity,
            "action": self.action,
            "actor": {"userID": self.actor_user_id, "username": self.actor_username},
            "reason": self.reason,
            "ip": self.ip,
            "userAgent": self.user_agent,
            "details": self.details,
        }


def _scrub(details: dict[str, Any] | None) -> dict[str, Any]:
    if not details:
        return {}
    return {k: ("[redacted]" if k.lower() in _SECRET_KEYS else v) for k, v in details.items()}


class AuditService:
    """Records security events (never secrets) and lets site admins read them back, newest first."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    def record(
        self,
        entity: str,
        action: str,
        *,
        actor: Actor | None = None,
        reason: str = "",
        ip: str = "",
        user_agent: str = "",
        details: dict[str, Any] | None = None,
    ) -> None:
        """Append one entry and log it. Raises StorageUnavailable when the entry cannot be written (after
        logging it as an error, with the entry's fields): the caller must not go ahead unaudited."""
        clean = _scrub(details)
        row = AuditEntryRow(
            created_at=utcnow(),
            entity=entity[:100],
            action=action[:100],
            actor_user_id=actor.user_id if actor else None,
            actor_username=(actor.username if actor else "")[:255],
            reason=reason[:500],
            ip=ip[:64],
            user_agent=user_agent[:512],
            details=json.dumps(clean, sort_keys=True, default=str),
        )
        log.info(
            "audit %s %s%s",
            entity,
            action,
            f": {reason}" if reason else "",
            extra={"audit": {"entity": entity, "action": action, "actor": row.actor_username, "ip": ip, **clean}},
        )
        try:
            with self.runtime.db.session() as session:
                session.add(row)
        except Exception as exc:
            # One line per lost entry, not rate-limited: each names an event that is in no table. Then the
            # error goes up: a storage fault answers 503, anything else is a bug and answers 500.
            log.error(
                "audit entry %s %s NOT written to the database: %s",
                entity,
                action,
                exc.cause if isinstance(exc, StorageUnavailable) else type(exc).__name__,
                extra={"audit": {"entity": entity, "action": action, "actor": row.actor_username, "ip": ip, **clean}},
            )
            raise

    def list(
        self,
        actor: Actor,
        *,
        entity: str = "",
        action: str = "",
        user_id: int | None = None,
        before_id: int | None = None,
        limit: int = 100,
    ) -> list[AuditEntry]:
        """Entries newest first, filtered; site admins only. Page with `before_id` (the last ID seen)."""
        ensure(actor, Action.AUDIT_READ)
        if not 1 <= limit <= MAX_AUDIT_PAGE:
            raise InvalidInput(f"limit must be between 1 and {MAX_AUDIT_PAGE}")
        query = select(AuditEntryRow).order_by(AuditEntryRow.id.desc()).limit(limit)
        if entity:
            query = query.where(AuditEntryRow.entity == entity)
        if action:
            query = query.where(AuditEntryRow.action == action)
        if user_id is not None:
            query = query.where(AuditEntryRow.actor_user_id == user_id)
        if before_id is not None:
            query = query.where(AuditEntryRow.id < before_id)
        with self.runtime.db.session() as session:
            return [_entry(row) for row in session.scalars(query)]


def _entry(row: AuditEntryRow) -> AuditEntry:
    return AuditEntry(
        id=row.id,
        created_at=row.created_at,
        entity=row.entity,
        action=row.action,
        actor_user_id=row.actor_user_id,
        actor_username=row.actor_username,
        reason=row.reason,
        ip=row.ip,
        user_agent=row.user_agent,
        details=json.loads(row.details or "{}"),
    )
