"""Plans as data: what each plan includes, in one table (docs/licensing.md has the same table in words).

A feature is a name the gates ask about (`LicensingService.require_feature`); a limit is a number or None
(unlimited). A license key names a plan and may add features or raise limits for one licensee; the trial
of a fresh install is the `trial` plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from codewell.core.errors import InvalidInput

# Features a plan may include. `mcp` is the tool server (the spec: "feature-gated (enterprise plans)").
MCP = "mcp"
DEEPSEARCH = "deepsearch"
CODE_FINDER = "code_finder"
SAML = "saml"
PERMISSION_SYNC = "permission-sync"
ANALYTICS_API = "analytics-api"
FEATURES: tuple[str, ...] = (MCP, DEEPSEARCH, CODE_FINDER, SAML, PERMISSION_SYNC, ANALYTICS_API)

# Limits a plan sets (None: unlimited). Code finder calls and deep search credits are spent from credit
# buckets (analytics): a license key allocates one bucket per feature and calendar month with these amounts.
USERS = "users"
CODE_FINDER_CALLS = "codeFinderCallsPerMonth"
DEEPSEARCH_CREDITS = "deepSearchCreditsPerMonth"
LIMITS: tuple[str, ...] = (USERS, CODE_FINDER_CALLS, DEEPSEARCH_CREDITS)


@dataclass(frozen=True, slots=True)
class Plan:
    name: str
    title: str
    features: frozenset[str]
    limits: MappingProxyType[str, int | None]
    # Plans a license key may name (the trial is never sold: it is what a fresh install runs).
    purchasable: bool = True


def _limits(users: int | None, code_finder: int | None, deepsearch: int | None) -> MappingProxyType[str, int | None]:
    return MappingProxyType({USERS: users, CODE_FINDER_CALLS: code_finder, DEEPSEARCH_CREDITS: deepsearch})


FREE = Plan("free", "Free", frozenset(), _limits(10, 0, 0))
TEAM = Plan("team", "Team", frozenset({CODE_FINDER, DEEPSEARCH, ANALYTICS_API}), _limits(200, 2_000, 5_000))
ENTERPRISE = Plan("enterprise", "Enterprise", frozenset(FEATURES), _limits(None, None, None))
# The trial allocates no credits: metered features are unmetered unless a site admin allocates buckets.
TRIAL = Plan("trial", "Trial", frozenset(FEATURES), _limits(None, None, None), purchasable=False)

# Cheapest first: the plan a refused feature names is the first purchasable plan that includes it.
PLANS: MappingProxyType[str, Plan] = MappingProxyType({p.name: p for p in (FREE, TEAM, ENTERPRISE, TRIAL)})
TRIAL_DAYS = 30


def plan_named(name: str) -> Plan:
    plan = PLANS.get(name)
    if plan is None:
        raise InvalidInput(f"unknown plan {name[:40]!r}", hint=f"one of: {', '.join(PLANS)}")
    return plan


def cheapest_plan_with(feature: str) -> Plan:
    """The first purchasable plan that includes `feature` (every feature is in enterprise)."""
    for plan in PLANS.values():
        if plan.purchasable and feature in plan.features:
            return plan
    return ENTERPRISE
