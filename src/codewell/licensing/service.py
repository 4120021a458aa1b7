"""The licensing service: which plan is in force, the feature gates and metering built on it.

The plan in force is, in order: the plan of a valid license key (site config `licenseKey`, else the key
installed with `codewell license set`); the trial (every feature) for `TRIAL_DAYS` days from the database's
creation; the free plan. A key that is malformed, tampered with, issued for another instance or expired is
reported with one message (`status().problem`, the audit log once per key and problem) and the instance
runs the plan it is otherwise entitled to: nothing is deleted, and a valid key restores everything.

Gates call `require_feature` / `feature_refusal` per request: the signature is verified once per key text
(cached), the stored key is re-read at most every `STORED_KEY_TTL` seconds (so a key installed by another
process applies within seconds), and the clock is read every time (injected in tests). The gates lower
capabilities ask (the user limit, SAML sign-in, the analytics API) are registered by `setup.py`.

The key a license is verified against is the build's release key (`keys.load_release_key`, package data
set by the distributor). A build without one verifies no license key: it says so (`status().release_key_problem`)
and runs the trial, then the free plan, as any instance without a valid key does.

A license key also allocates credits: each calendar month (UTC) it is in force, one credit bucket per metered
feature of the plan (`METERED`) with the key's monthly limit (`allocate_credits`, idempotent through
`license_credit_allocations`).
"""

from __future__ import annotations

import calendar
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, Self

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from codewell.accounts.audit import AuditService
from codewell.accounts.service import AccountService
from codewell.analytics.credits import Consumption, CreditBucket, CreditService
from codewell.authz import Action, ensure
from codewell.core.actors import INTERNAL, Actor
from codewell.core.errors import InvalidInput, PermissionDenied
from codewell.db.base import utcnow
from codewell.licensing import keys, plans
from codewell.licensing.keys import KeyProblem, LicenseDocument
from codewell.licensing.models import LicenseCreditRow, LicenseKeyRow
from codewell.licensing.plans import FREE, PLANS, TRIAL, TRIAL_DAYS, USERS, Plan, cheapest_plan_with

if TYPE_CHECKING:
    from codewell.runtime import Runtime

Clock = Callable[[], datetime]
# The feature the tool server needs (re-exported: other capabilities import only this module).
MCP_FEATURE = plans.MCP
# The feature code host permission sync needs (codehosts' `permissions_enabled` asks `has_feature`).
PERMISSION_SYNC_FEATURE = plans.PERMISSION_SYNC
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
# Metered features and the plan limit saying how many credits a key allocates for each per month.
METERED: dict[str, str] = {plans.CODE_FINDER: plans.CODE_FINDER_CALLS, plans.DEEPSEARCH: plans.DEEPSEARCH_CREDITS}
# Banners: the trial's end is announced this many days before; a key's expiry (to site admins) too.
TRIAL_WARNING_DAYS = 7
KEY_WARNING_DAYS = 14
# Pages that use a licensed feature (path prefix → feature): their banner says when the plan lacks it.
PAGE_FEATURES: tuple[tuple[str, str], ...] = (
    ("/settings/mcp", plans.MCP),
    ("/site-admin/mcp", plans.MCP),
    ("/deepsearch", plans.DEEPSEARCH),
    ("/analytics/", plans.ANALYTICS_API),
)
LICENSE_PAGE = "/site-admin/license"


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


class UserLimitReached(PermissionDenied):
    """A new account beyond the licensed user limit (existing accounts keep working)."""

    code = "user_limit_reached"

    def __init__(self, limit: int, plan: Plan) -> None:
        super().__init__(
            f"this instance is licensed for at most {limit} users ({plan.title} plan): no new account can be created",
            hint="a site admin can install a license key with a higher user limit (docs/licensing.md)",
        )
        self.limit, self.plan = limit, plan


@dataclass(frozen=True, slots=True)
class Notice:
    """A banner about the license for the pages (the web kit renders it): level is info, warning or error."""

    text: str
    level: Literal["info", "warning", "error"]
    link: str | None = None
    link_text: str | None = None


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
    # Why this build verifies no license key at all ("" when it has a release key: keys.NO_RELEASE_KEY).
    release_key_problem: str = ""

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
            "releaseKey": {"present": not self.release_key_problem, "problem": self.release_key_problem or None},
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
        """`public_key` is for tests (their own pair); the product always trusts the build's release key."""
        self.runtime = runtime
        self.clock = clock
        release = keys.ReleaseKey(public_key) if public_key is not None else keys.load_release_key()
        self.public_key, self.release_key_problem = release.public_key, release.problem
        self._lock = threading.Lock()
        self._stored: tuple[float, str] | None = None  # (monotonic time read, key text or "")
        self._documents: dict[str, LicenseDocument | KeyProblem] = {}
        self._noted: set[tuple[str, str]] = set()
        self._instance: tuple[str, datetime] | None = None
        self._allocated: dict[tuple[date, str], int] = {}  # (month, feature) → credits known allocated

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
                trial_ends, key_source, None, now, self.release_key_problem,
            )  # fmt: skip
        plan, source, expires = (TRIAL, "trial", trial_ends) if now < trial_ends else (FREE, "free", None)
        return LicenseStatus(
            plan, source, "", instance_id, plan.features, dict(plan.limits), expires, trial_ends, key_source,
            problem, now, self.release_key_problem,
        )  # fmt: skip

    def feature_refusal(self, feature: str) -> FeatureNotLicensed | None:
        """The error to answer with when the plan in force lacks `feature`, else None."""
        return self._refusal(self.status(), feature)

    @staticmethod
    def _refusal(status: LicenseStatus, feature: str) -> FeatureNotLicensed | None:
        if status.has(feature):
            return None
        trial_ended = status.trial_ends_at if status.source == "free" else None
        return FeatureNotLicensed(feature, cheapest_plan_with(feature), status.plan, trial_ended)

    def has_feature(self, feature: str) -> bool:
        """Whether the plan in force includes `feature` (for gates that switch something off rather than
        refuse a request, e.g. permission sync)."""
        return self.status().has(feature)

    def require_feature(self, feature: str) -> None:
        refusal = self.feature_refusal(feature)
        if refusal is not None:
            raise refusal

    def consume(self, actor: Actor, feature: str, amount: int) -> Consumption:
        """Meter one use of a licensed feature: FeatureNotLicensed when the plan lacks it, else `amount`
        credits from the active credit bucket, all or nothing (analytics' CreditService: QuotaExceeded when
        exhausted, unmetered while no bucket paying for the feature was ever allocated). The key's buckets
        for this month are allocated first when they are not yet."""
        status = self.status()
        refusal = self._refusal(status, feature)
        if refusal is not None:
            raise refusal
        self._allocate(status)
        return self.runtime.get(CreditService).consume(actor, feature, amount)

    # -- credits from license keys ------------------------------------------------------------------------
    def allocate_credits(self) -> list[CreditBucket]:
        """Allocate this month's credit buckets of the key in force (one per metered feature with a finite,
        positive monthly limit), idempotently: what earlier calls (of any process) allocated for this month
        and feature is subtracted, so applying a key twice allocates nothing and a key entitling more
        allocates the difference. Nothing without a valid key (the trial and free plans allocate none)."""
        return self._allocate(self.status())

    def _allocate(self, status: LicenseStatus) -> list[CreditBucket]:
        if status.source != "license":
            return []
        today = status.now.date()
        period = today.replace(day=1)
        period_end = today.replace(day=calendar.monthrange(today.year, today.month)[1])
        made: list[CreditBucket] = []
        for feature, limit_name in METERED.items():
            limit = status.limits.get(limit_name)
            if feature not in status.features or limit is None or limit <= 0:
                continue
            with self._lock:
                if self._allocated.get((period, feature), -1) >= limit:
                    continue
            bucket = self._allocate_one(period, period_end, feature, limit, status.licensee)
            if bucket is not None:
                made.append(bucket)
            with self._lock:
                self._allocated[(period, feature)] = limit
        return made

    def _allocate_one(
        self, period: date, period_end: date, feature: str, limit: int, licensee: str
    ) -> CreditBucket | None:
        """Claim `limit` for (period, feature) in the ledger, then allocate what the claim added; None when
        the ledger already holds as much (another call or process allocated it)."""
        with self.runtime.db.session() as session:
            row = session.get(LicenseCreditRow, (period, feature))
            had = row.amount if row is not None else 0
        if had >= limit:
            return None
        try:
            with self.runtime.db.session() as session:
                if had == 0 and row is None:
                    session.add(LicenseCreditRow(period=period, feature=feature, amount=limit, updated_at=utcnow()))
                    session.flush()
                else:
                    claimed = session.execute(
                        update(LicenseCreditRow)
                        .where(
                            LicenseCreditRow.period == period,
                            LicenseCreditRow.feature == feature,
                            LicenseCreditRow.amount == had,
                        )
                        .values(amount=limit, updated_at=utcnow())
                    ).rowcount  # type: ignore[attr-defined]
                    if claimed != 1:
                        return None  # another process claimed it first
        except IntegrityError:
            return None  # another process claimed it first
        note = f"license ({licensee or 'key'}): {feature}, {period:%Y-%m}"[:255]
        try:
            return self.runtime.get(CreditService).allocate(
                INTERNAL, limit - had, period, period_end, note, feature=feature
            )
        except Exception:
            with self.runtime.db.session() as session:  # give the claim back: the next call allocates
                session.execute(
                    update(LicenseCreditRow)
                    .where(LicenseCreditRow.period == period, LicenseCreditRow.feature == feature)
                    .values(amount=had)
                )
            raise

    # -- gates asked from below ---------------------------------------------------------------------------
    def check_user_limit(self, existing: int) -> None:
        """UserLimitReached when `existing` accounts already fill the licensed user limit (accounts asks
        before creating any account)."""
        status = self.status()
        limit = status.limits.get(USERS)
        if limit is not None and existing >= limit:
            self._audit().record("licensing.userLimit", "refused", details={"limit": limit, "plan": status.plan.name})
            raise UserLimitReached(limit, status.plan)

    def check_sign_in_provider(self, kind: str) -> None:
        """FeatureNotLicensed for SAML sign-in when the plan lacks `saml` (auth asks before every external
        sign-in starts and completes)."""
        if kind == "saml":
            self.require_feature(plans.SAML)

    def check_analytics_api(self) -> None:
        """FeatureNotLicensed when the plan lacks the analytics API (analytics asks on every API call)."""
        self.require_feature(plans.ANALYTICS_API)

    # -- banners ------------------------------------------------------------------------------------------
    def notices(self, path: str, *, signed_in: bool, site_admin: bool) -> list[Notice]:
        """The banners of a page at `path`: the trial ending or ended, a key that is unusable or (to site
        admins) expiring, and the plan lacking a feature the page uses. Nothing for anonymous visitors (the
        license is not revealed before sign-in), nor on the license page (it shows all of it)."""
        if not signed_in or path == LICENSE_PAGE:
            return []
        status = self.status()
        link, link_text = (LICENSE_PAGE, "License") if site_admin else (None, None)
        found: list[Notice] = []
        # Without a release key no license key can be installed, so asking for one would send admins in circles.
        installable = not status.release_key_problem
        if status.problem is not None:
            until = " until a valid key is installed" if installable else ""
            text = (
                f"The license key cannot be used: {status.problem.message}. This instance runs the "
                f"{status.plan.title} plan{until}."
                if site_admin
                else f"This instance's license key cannot be used; it runs the {status.plan.title} plan. "
                "A site admin can fix it."
            )
            found.append(Notice(text, "error", link, link_text))
        left = None if status.expires_at is None else status.expires_at - status.now
        if not installable:
            act = " This build has no release key, so no license key can be installed." if site_admin else ""
        elif site_admin:
            act = " Install a license key to keep every feature."
        else:
            act = " A site admin can install a license key."
        if status.source == "trial" and left is not None and left <= timedelta(days=TRIAL_WARNING_DAYS):
            text = f"The trial ends on {status.trial_ends_at:%Y-%m-%d} ({_days(left)} left); then this instance runs"
            found.append(Notice(f"{text} the Free plan.{act}", "warning", link, link_text))
        if status.source == "free" and status.problem is None:
            text = f"The trial ended on {status.trial_ends_at:%Y-%m-%d}: this instance runs the Free plan."
            found.append(Notice(f"{text}{act}", "warning", link, link_text))
        if status.source == "license" and site_admin and left is not None and left <= timedelta(days=KEY_WARNING_DAYS):
            found.append(
                Notice(
                    f"The license key expires on {status.expires_at:%Y-%m-%d} ({_days(left)} left): install "
                    "a renewed key to keep the plan.",
                    "warning",
                    link,
                    link_text,
                )
            )
        for prefix, feature in PAGE_FEATURES:
            if path.startswith(prefix) and not status.has(feature):
                refusal = self._refusal(status, feature)
                if refusal is not None:
                    found.append(Notice(refusal.message + ".", "error", link, link_text))
        return found

    def report(self, actor: Actor) -> LicenseReport:
        """The status with usage (users, this period's credits); site admins only."""
        ensure(actor, Action.LICENSE_READ)
        status = self.status()
        self._allocate(status)
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
        self._forget_stored()
        self.allocate_credits()
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


def _days(left: timedelta) -> str:
    days = max(0, left.days)
    return "less than a day" if days == 0 else f"{days} day{'s' if days != 1 else ''}"
