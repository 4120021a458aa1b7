"""The licensing service: which plan is in force, the feature gates and metering built on it.

The plan in force is, in order: the plan of a valid license key (site config `licenseKey`, else the key
installed with `codewell license set`); the trial (every feature) for `TRIAL_DAYS` days from the database's
creation; the free plan. A key that is malformed, tampered with, issued for another instance or expired is
reported with one message (`status().problem`, the audit log once per key and problem) and the instance
runs the plan it is otherwise entitled to: nothing is deleted, and a valid key restores everything.

Gates call `require_feature` / `feature_refusal` per request: the signature is verified once per key text
(cached), the stored key is re-read at most every `STORED_KEY_TTL` seconds (so a key installed by another
process applies within seconds), and the clock is read every time (injected in tests).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Self

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from codewell.accounts.audit import AuditService
from codewell.accounts.service import AccountService
from codewell.analytics.credits import Consumption, CreditService
from codewell.authz import Action, ensure
from codewell.core.actors import Actor
from codewell.core.errors import InvalidInput, PermissionDenied
from codewell.db.base import utcnow
from codewell.licensing import keys, plans
from codewell.licensing.keys import KeyProblem, LicenseDocument
from codewell.licensing.models import LicenseKeyRow
from codewell.licensing.plans import FREE, PLANS, TRIAL, TRIAL_DAYS, USERS, Plan, cheapest_plan_with

if TYPE_CHECKING:
    from codewell.runtime import Runtime

Clock = Callable[[], datetime]
# The feature the tool server needs (re-exported: other capabilities import only this module).
MCP_FEATURE = plans.MCP
STORED_KEY_TTL = 5.0
AUDIT_ENTITY = "licensing.key"
FEATURE_TITLES = {
    "mcp": "the MCP tool server",
    "deepsearch": "deep search",
    "code_finder": "code_finder",
    "saml": "SAML sign-in",
    "permission-sync": "permission sync",
    "analytics-api": "the analytics API",
}
_LICENSE_HINT = "a site admin can install a license key (codewell license set, see docs/licensing.md)"


class FeatureNotLicensed(PermissionDenied):
    """A feature outside the plan in force; names the plan that includes it."""

    code = "feature_not_licensed"

    def __init__(self, feature: str, required: Plan, current: Plan, trial_ended: datetime | None) -> None:
        ended = f" (the trial ended on {trial_ended:%Y-%m-%d})" if trial_ended is not None else ""
        super().__init__(
            f"{FEATURE_TITLES.get(feature, feature)} needs the {required.title} plan; "
            f"this instance runs the {current.title} plan{ended}",
            hint=_LICENSE_HINT,
        )
        self.feature, self.required, self.current = feature, required, current

    def data(self) -> dict[str, str]:
        """Machine-readable details (the JSON-RPC error's `data` of the MCP gate)."""
        return {
            "code": self.code,
            "feature": self.feature,
            "requiredPlan": self.required.name,
            "currentPlan": self.current.name,
            "hint": self.hint or "",
        }


@dataclass(frozen=True, slots=True)
class LicenseStatus:
    """The plan in force and why."""

    plan: Plan
    # "license" (a valid key), "trial" or "free".
    source: str
    licensee: str
    instance_id: str
    features: frozenset[str]
    limits: dict[str, int | None]
    # When the plan in force ends: the key's expiry or the trial's end (None: the free plan never ends).
    expires_at: datetime | None
    trial_ends_at: datetime
    # Where the key came from ("config", "cli"; "" without a key) and what is wrong with it (None: nothing).
    key_source: str
    problem: KeyProblem | None
    now: datetime

    def has(self, feature: str) -> bool:
        return feature in self.features

    def as_json(self) -> dict[str, Any]:
        days_left = None if self.expires_at is None else max(0, (self.expires_at - self.now).days)
        problem = None
        if self.problem is not None:
            problem = {"code": self.problem.kind, "message": self.problem.message, "hint": self.problem.hint}
        return {
            "plan": self.plan.name,
            "planTitle": self.plan.title,
            "source": self.source,
            "licensee": self.licensee,
            "instanceID": self.instance_id,
            "features": sorted(self.features),
            "limits": self.limits,
            "expiresAt": self.expires_at.isoformat() if self.expires_at else None,
            "daysLeft": days_left,
            "trialEndsAt": self.trial_ends_at.isoformat(),
            "key": {"source": self.key_source or None, "problem": problem},
        }


@dataclass(frozen=True, slots=True)
class LicenseReport:
    """What admins see: the status plus usage against the limits."""

    status: LicenseStatus
    users: int
    credits_allocated: int
    credits_consumed: int

    def as_json(self) -> dict[str, Any]:
        return {
            **self.status.as_json(),
            "usage": {
                "users": self.users,
                "credits": {
                    "allocated": self.credits_allocated,
                    "consumed": self.credits_consumed,
                    "remaining": self.credits_allocated - self.credits_consumed,
                },
            },
        }


class LicensingService:
    def __init__(self, runtime: Runtime, *, clock: Clock = utcnow, public_key: Ed25519PublicKey | None = None) -> None:
        self.runtime = runtime
        self.clock = clock
        self.public_key = public_key or keys.public_key_from_text(keys.RELEASE_PUBLIC_KEY)
        self._lock = threading.Lock()
        self._stored: tuple[float, str] | None = None  # (monotonic time read, key text or "")
        self._documents: dict[str, LicenseDocument | KeyProblem] = {}
        self._noted: set[tuple[str, str]] = set()
        self._instance: tuple[str, datetime] | None = None

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    # -- the plan in force --------------------------------------------------------------------------------
    def status(self) -> LicenseStatus:
        """The plan in force now (no permission check: the gates of every caller read it)."""
        now = self.clock()
        instance_id, created_at = self._instance_facts()
        trial_ends = created_at + timedelta(days=TRIAL_DAYS)
        key, key_source = self._current_key()
        document, problem = None, None
        if key:
            try:
                document = self._verified(key)
                keys.check_applies(document, instance_id, now)
            except KeyProblem as exc:
                document, problem = None, exc
                self._note_problem(key, key_source, exc)
        if document is not None:
            plan = PLANS[document.plan]
            limits = {**plan.limits, **document.limits}
            if document.user_limit is not None:
                limits[USERS] = document.user_limit
            features = plan.features | document.features
            return LicenseStatus(
                plan, "license", document.licensee, instance_id, features, limits, document.expires_at,
                trial_ends, key_source, None, now,
            )  # fmt: skip
        plan, source, expires = (TRIAL, "trial", trial_ends) if now < trial_ends else (FREE, "free", None)
        return LicenseStatus(
            plan, source, "", instance_id, plan.features, dict(plan.limits), expires, trial_ends, key_source,
            problem, now,
        )  # fmt: skip

    def feature_refusal(self, feature: str) -> FeatureNotLicensed | None:
        """The error to answer with when the plan in force lacks `feature`, else None."""
        status = self.status()
        if status.has(feature):
            return None
        trial_ended = status.trial_ends_at if status.source == "free" else None
        return FeatureNotLicensed(feature, cheapest_plan_with(feature), status.plan, trial_ended)

    def require_feature(self, feature: str) -> None:
        refusal = self.feature_refusal(feature)
        if refusal is not None:
            raise refusal

    def consume(self, actor: Actor, feature: str, amount: int) -> Consumption:
        """Meter one use of a licensed feature: FeatureNotLicensed when the plan lacks it, else `amount`
        credits from the active credit bucket, all or nothing (analytics' CreditService: QuotaExceeded when
        exhausted, unmetered while no bucket was ever allocated)."""
        self.require_feature(feature)
        return self.runtime.get(CreditService).consume(actor, feature, amount)

    def report(self, actor: Actor) -> LicenseReport:
        """The status with usage (users, this period's credits); site admins only."""
        ensure(actor, Action.LICENSE_READ)
        status = self.status()
        today = status.now.date()
        buckets = self.runtime.get(CreditService).list_buckets(actor, today, today)
        return LicenseReport(
            status,
            self.runtime.get(AccountService).count_users(),
            sum(b.amount for b in buckets),
            sum(b.consumed for b in buckets),
        )

    # -- installing keys ----------------------------------------------------------------------------------
    def set_key(self, actor: Actor, key: str) -> LicenseStatus:
        """Install `key` (site admins): InvalidInput with the key's problem, audited, when it cannot be used."""
        ensure(actor, Action.LICENSE_MANAGE)
        text = key.strip()
        fingerprint = keys.fingerprint(text)
        instance_id, _ = self._instance_facts()
        try:
            document = keys.verify_signature(text, self.public_key)
            keys.check_applies(document, instance_id, self.clock())
        except KeyProblem as exc:
            self._audit().record(
                AUDIT_ENTITY,
                "rejected",
                actor=actor,
                reason=exc.message,
                details={"problem": exc.kind, "fingerprint": fingerprint[:16]},
            )
            raise InvalidInput(exc.message, hint=exc.hint) from None
        with self.runtime.db.session() as session:
            session.execute(update(LicenseKeyRow).values(active=False))
            row = session.get(LicenseKeyRow, fingerprint)
            if row is None:
                row = LicenseKeyRow(fingerprint=fingerprint, key=text, source="cli")
                session.add(row)
            row.active, row.problem, row.source = True, "", "cli"
            row.installed_at, row.installed_by = utcnow(), actor.user_id
        self._audit().record(
            AUDIT_ENTITY,
            "installed",
            actor=actor,
            details={
                "fingerprint": fingerprint[:16],
                "plan": document.plan,
                "licensee": document.licensee,
                "expiresAt": document.expires_at.isoformat(),
            },
        )
        self._forget_stored()
        return self.status()

    def clear_key(self, actor: Actor) -> None:
        """Stop using the installed key (site admins); the instance runs the trial or the free plan."""
        ensure(actor, Action.LICENSE_MANAGE)
        with self.runtime.db.session() as session:
            session.execute(update(LicenseKeyRow).values(active=False))
        self._audit().record(AUDIT_ENTITY, "removed", actor=actor)
        self._forget_stored()

    # -- internals ----------------------------------------------------------------------------------------
    def _audit(self) -> AuditService:
        return self.runtime.get(AuditService)

    def _instance_facts(self) -> tuple[str, datetime]:
        if self._instance is None:
            self._instance = (self.runtime.db.instance_id(), self.runtime.db.created_at())
        return self._instance

    def _current_key(self) -> tuple[str, str]:
        configured = self.runtime.config.license_key
        if configured and configured.strip():
            return configured.strip(), "config"
        with self._lock:
            stored = self._stored
        if stored is None or time.monotonic() - stored[0] > STORED_KEY_TTL:
            with self.runtime.db.session() as session:
                text = session.scalar(select(LicenseKeyRow.key).where(LicenseKeyRow.active.is_(True)).limit(1))
            stored = (time.monotonic(), text or "")
            with self._lock:
                self._stored = stored
        return stored[1], "cli" if stored[1] else ""

    def _forget_stored(self) -> None:
        with self._lock:
            self._stored = None

    def _verified(self, key: str) -> LicenseDocument:
        """The key's document, the signature verified once per key text (KeyProblem when it fails)."""
        with self._lock:
            known = self._documents.get(key)
        if known is None:
            try:
                known = keys.verify_signature(key, self.public_key)
            except KeyProblem as exc:
                known = exc
            with self._lock:
                if len(self._documents) > 16:  # keys change rarely; a bound keeps a flood of bad ones cheap
                    self._documents.clear()
                self._documents[key] = known
        if isinstance(known, KeyProblem):
            raise known
        return known

    def _note_problem(self, key: str, source: str, problem: KeyProblem) -> None:
        """Audit a key's problem once (across processes: the row's `problem` changes once)."""
        fingerprint = keys.fingerprint(key)
        with self._lock:
            if (fingerprint, problem.kind) in self._noted:
                return
        try:
            with self.runtime.db.session() as session:
                if session.get(LicenseKeyRow, fingerprint) is None:
                    session.add(LicenseKeyRow(fingerprint=fingerprint, key=key, source=source, active=False))
        except IntegrityError:
            pass  # another process recorded the key first
        with self.runtime.db.session() as session:
            changed = session.execute(
                update(LicenseKeyRow)
                .where(LicenseKeyRow.fingerprint == fingerprint, LicenseKeyRow.problem != problem.kind)
                .values(problem=problem.kind)
            ).rowcount  # type: ignore[attr-defined]
        if changed == 1:
            self._audit().record(
                AUDIT_ENTITY,
                problem.kind,
                reason=problem.message,
                details={"fingerprint": fingerprint[:16], "source": source},
            )
        with self._lock:
            self._noted.add((fingerprint, problem.kind))
