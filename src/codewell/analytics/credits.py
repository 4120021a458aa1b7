"""Credit buckets: site admins allocate credits for an active period; metered features consume them.

`consume(actor, feature, amount)` takes credits from the active buckets, soonest-ending first, all or
nothing, and can never take a bucket below zero on SQLite or PostgreSQL: each take is a conditional
`UPDATE ... WHERE consumed + :take <= amount` (PostgreSQL re-checks the condition after waiting for the row
lock; SQLite serialises writers and refuses a stale snapshot's write), a lost race rolls the whole
transaction back and retries, and a CHECK constraint backs it up. A bucket pays for every feature, or for
one (`feature`: licensing allocates per feature from a license key). Metering of a feature starts with the
first bucket that pays for it: until then the feature is unmetered.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from datetime import date, datetime
from typing import TYPE_CHECKING, Self

from sqlalchemy import and_, or_, select, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from codewell.accounts.audit import AuditService
from codewell.analytics.models import CreditBucketRow, CreditUsageRow
from codewell.analytics.rollup import upsert_increments
from codewell.authz import Action, ensure
from codewell.core.actors import Actor
from codewell.core.errors import InvalidInput, QuotaExceeded, Unavailable
from codewell.db.base import utcnow

if TYPE_CHECKING:
    from codewell.runtime import Runtime

log = logging.getLogger(__name__)
MAX_AMOUNT = 10**15
MAX_NOTE = 255
MAX_ATTEMPTS = 20


@dataclass(frozen=True, slots=True)
class CreditBucket:
    """One allocation and how much of it is used, overall and per feature."""

    id: int
    amount: int
    consumed: int
    starts_on: date
    ends_on: date
    note: str
    created_at: datetime
    consumption_by_feature: dict[str, int]
    # The one feature this bucket pays for; "" for every metered feature.
    feature: str = ""

    @property
    def remaining(self) -> int:
        return self.amount - self.consumed

    def is_active(self, on: date) -> bool:
        return self.starts_on <= on <= self.ends_on

    def as_json(self) -> dict[str, object]:
        """The documented JSON shape of a bucket (docs/analytics.md, "Credits")."""
        return {
            "id": self.id,
            "allocation": self.amount,
            "activePeriod": {"startDate": self.starts_on.isoformat(), "endDate": self.ends_on.isoformat()},
            "active": self.is_active(utcnow().date()),
            "note": self.note,
            "feature": self.feature or None,
            "createdAt": self.created_at.isoformat(),
            "consumed": self.consumed,
            "consumptionByFeature": dict(sorted(self.consumption_by_feature.items())),
            "remaining": self.remaining,
        }


@dataclass(frozen=True, slots=True)
class Consumption:
    """What one `consume` call took: (bucket ID, credits) pairs; empty when the instance is unmetered."""

    taken: tuple[tuple[int, int], ...]
    metered: bool


class _LostRace(Exception):
    """A bucket changed between reading and taking from it: roll back and try again."""


class CreditService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.audit = runtime.get(AuditService)

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    def allocate(
        self, actor: Actor, amount: int, starts_on: date, ends_on: date, note: str = "", feature: str = ""
    ) -> CreditBucket:
        """Create a bucket of `amount` credits usable from `starts_on` to `ends_on` (UTC, inclusive) for
        `feature` ("": every metered feature); admins only."""
        ensure(actor, Action.CREDITS_MANAGE)
        if isinstance(amount, bool) or not isinstance(amount, int) or not 0 < amount <= MAX_AMOUNT:
            raise InvalidInput(f"amount must be a whole number between 1 and {MAX_AMOUNT}")
        if ends_on < starts_on:
            raise InvalidInput("endDate is before startDate", hint="the active period's end must not precede its start")
        if len(note) > MAX_NOTE:
            raise InvalidInput(f"note must be at most {MAX_NOTE} characters")
        if len(feature) > 50:
            raise InvalidInput("feature must be a name of at most 50 characters")
        row = CreditBucketRow(
            amount=amount,
            consumed=0,
            starts_on=starts_on,
            ends_on=ends_on,
            note=note.strip(),
            created_by=actor.user_id,
            created_at=utcnow(),
            feature=feature,
        )
        with self.runtime.db.session() as session:
            session.add(row)
            session.flush()
            bucket = CreditBucket(row.id, amount, 0, starts_on, ends_on, row.note, row.created_at, {}, feature)
        self.audit.record(
            "analytics.credits",
            "allocated",
            actor=actor,
            details={
                "bucketID": bucket.id,
                "amount": amount,
                "startDate": str(starts_on),
                "endDate": str(ends_on),
                **({"feature": feature} if feature else {}),
            },
        )
        return bucket

    def list_buckets(self, actor: Actor, start: date | None = None, end: date | None = None) -> list[CreditBucket]:
        """Buckets whose active period overlaps [start, end] (each bound optional; neither: all), oldest
        start first, with their consumption by feature; site admins only."""
        ensure(actor, Action.CREDITS_READ)
        stmt = select(CreditBucketRow)
        if start is not None:
            stmt = stmt.where(CreditBucketRow.ends_on >= start)
        if end is not None:
            stmt = stmt.where(CreditBucketRow.starts_on <= end)
        with self.runtime.db.session() as session:
            rows = list(session.scalars(stmt.order_by(CreditBucketRow.starts_on, CreditBucketRow.id)))
            usage: dict[int, dict[str, int]] = {row.id: {} for row in rows}
            if rows:
                found = session.execute(select(CreditUsageRow).where(CreditUsageRow.bucket_id.in_(list(usage))))
                for (item,) in found:
                    usage[item.bucket_id][item.feature] = item.amount
            return [
                CreditBucket(
                    r.id, r.amount, r.consumed, r.starts_on, r.ends_on, r.note, r.created_at, usage[r.id], r.feature
                )
                for r in rows
            ]

    def consume(self, actor: Actor, feature: str, amount: int) -> Consumption:
        """Take `amount` credits for `feature` from the active buckets that pay for it (soonest-ending first,
        spilling into the next), all or nothing; QuotaExceeded (429) when they hold less. Unmetered (nothing
        taken) while no bucket paying for `feature` was ever allocated. `actor` is whoever the work is done
        for (kept in the audit log only for refusals, to keep the hot path to one transaction)."""
        if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
            raise InvalidInput("credits to consume must be a positive whole number")
        if not feature or len(feature) > 50:
            raise InvalidInput("feature must be a name of at most 50 characters")
        for attempt in range(MAX_ATTEMPTS):
            try:
                with self.runtime.db.session() as session:
                    return self._consume_once(session, feature, amount)
            except (_LostRace, DBAPIError) as exc:
                if isinstance(exc, DBAPIError) and not _is_contention(exc):
                    raise
                # Another consumer won: back off a little (jittered) and re-read the buckets.
                time.sleep(random.uniform(0, 0.002 * (attempt + 1)))
        raise Unavailable("credit buckets are too busy; try again", hint="retry the request")

    def _consume_once(self, session: Session, feature: str, amount: int) -> Consumption:
        today = utcnow().date()
        pays = or_(CreditBucketRow.feature == "", CreditBucketRow.feature == feature)
        active = list(
            session.execute(
                select(CreditBucketRow.id, CreditBucketRow.amount - CreditBucketRow.consumed)
                .where(pays, CreditBucketRow.starts_on <= today, CreditBucketRow.ends_on >= today)
                .where(CreditBucketRow.consumed < CreditBucketRow.amount)
                .order_by(CreditBucketRow.ends_on, CreditBucketRow.id)
            )
        )
        if not active and session.scalar(select(CreditBucketRow.id).where(pays).limit(1)) is None:
            return Consumption((), metered=False)
        if sum(remaining for _, remaining in active) < amount:
            raise QuotaExceeded(
                f"not enough credits left for {feature}: {amount} needed",
                hint="a site admin can allocate more credits (codewell credits allocate)",
            )
        taken: list[tuple[int, int]] = []
        wanted = amount
        for bucket_id, remaining in active:
            take = min(wanted, remaining)
            result = session.execute(
                update(CreditBucketRow)
                .where(and_(CreditBucketRow.id == bucket_id, CreditBucketRow.consumed + take <= CreditBucketRow.amount))
                .values(consumed=CreditBucketRow.consumed + take)
            )
            if result.rowcount != 1:  # type: ignore[attr-defined]
                raise _LostRace()
            taken.append((bucket_id, take))
            wanted -= take
            if wanted == 0:
                break
        upsert_increments(
            session,
            CreditUsageRow.__table__,  # type: ignore[arg-type]
            [{"bucket_id": b, "feature": feature, "amount": t} for b, t in taken],
            ("amount",),
        )
        return Consumption(tuple(taken), metered=True)


def _is_contention(exc: DBAPIError) -> bool:
    """Whether a database error means "someone else holds or changed this" (retryable)."""
    text = str(exc.orig).lower()
    return any(s in text for s in ("database is locked", "could not serialize", "deadlock", "busy"))
