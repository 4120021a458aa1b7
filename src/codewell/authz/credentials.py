"""What each kind of credential may do, whoever holds it: one table (docs/security.md, "Credentials").

A decision passes this table first and the action's rule (`codewell.authz.actions.RULES`) second, so a site
admin signed in through an OAuth client still cannot change roles: admin and role changes need a session,
an access token with `user:all`, or sudo. The path limits of token scopes (`AuthService.scopes_allow`) stay
in front of the routes; this table is what the services and the MCP transport decide with.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from codewell.authz.actions import READ_ACTIONS, Action
from codewell.core.actors import Actor


class Credential(StrEnum):
    INTERNAL = "internal"
    ANONYMOUS = "anonymous"
    # A session cookie, a sign-in provider's proxy header, or sudo: the user's full rights.
    INTERACTIVE = "interactive"
    ACCESS_TOKEN = "access_token"
    ANALYTICS_TOKEN = "analytics_token"
    OAUTH = "oauth"


ALL_ACTIONS = frozenset(Action)
# Scope names as the credentials carry them (declared by accounts.tokens and analytics.tokens, which this
# kit may not import; tests/unit/authz checks the two lists agree).
SCOPE_USER_ALL = "user:all"
SCOPE_MCP = "mcp"
SCOPE_SUDO = "site-admin:sudo"
SCOPE_ANALYTICS = "analytics"

# Read and navigation actions plus the MCP server: what a client acting for a user (OAuth) or a token
# limited to the MCP server may do.
MCP_CLIENT_ACTIONS = READ_ACTIONS | {Action.MCP_ACCESS}
# Analytics access tokens reach the analytics API only, and only read there.
ANALYTICS_ACTIONS = frozenset({Action.ANALYTICS_API, Action.ANALYTICS_READ, Action.USERS_EXPORT, Action.CREDITS_READ})

# What a token may do, by each scope it carries (a token may do the union over its scopes).
SCOPE_ACTIONS: dict[str, frozenset[Action]] = {
    SCOPE_USER_ALL: ALL_ACTIONS,
    SCOPE_MCP: MCP_CLIENT_ACTIONS,
    # Only enables the token-sudo header (the sudo actor then acts with user:all), nothing else.
    SCOPE_SUDO: frozenset({Action.SUDO}),
    SCOPE_ANALYTICS: ANALYTICS_ACTIONS,
}

# What each credential kind may do at most, before its scopes narrow it further.
CREDENTIAL_ACTIONS: dict[Credential, frozenset[Action]] = {
    Credential.INTERNAL: ALL_ACTIONS,
    Credential.ANONYMOUS: ALL_ACTIONS,  # the rules refuse anonymous callers (401) where they must sign in
    Credential.INTERACTIVE: ALL_ACTIONS,
    Credential.ACCESS_TOKEN: ALL_ACTIONS,
    Credential.ANALYTICS_TOKEN: ANALYTICS_ACTIONS,
    Credential.OAUTH: MCP_CLIENT_ACTIONS,
}


@dataclass(frozen=True, slots=True)
class Refusal:
    message: str
    hint: str | None = None


# The refusal a caller gets when the credential, not the user, is the reason.
CREDENTIAL_REFUSALS: dict[Credential, Refusal] = {
    Credential.OAUTH: Refusal(
        "OAuth tokens cannot change accounts, roles or settings.",
        "use a session or an access token with the user:all scope",
    ),
    Credential.ANALYTICS_TOKEN: Refusal(
        "analytics access tokens are read-only and reach the analytics API only",
        "use the analytics pages, a session or an instance access token",
    ),
    Credential.ACCESS_TOKEN: Refusal(
        "this access token's scopes do not allow this", "use a token with the user:all scope"
    ),
}


def credential_of(actor: Actor) -> Credential:
    """The kind of credential the actor authenticated with."""
    if actor.is_internal:
        return Credential.INTERNAL
    if actor.is_anonymous:
        return Credential.ANONYMOUS
    if actor.via == "oauth":
        return Credential.OAUTH
    if actor.via == "access_token":
        return Credential.ANALYTICS_TOKEN if SCOPE_ANALYTICS in actor.scopes else Credential.ACCESS_TOKEN
    return Credential.INTERACTIVE


def credential_actions(actor: Actor) -> frozenset[Action]:
    """Every action the actor's credential allows (its kind, narrowed by its scopes when it carries any)."""
    credential = credential_of(actor)
    actions = CREDENTIAL_ACTIONS[credential]
    if actor.scopes and credential is not Credential.INTERNAL:
        by_scopes: frozenset[Action] = frozenset()
        for scope in actor.scopes:
            by_scopes |= SCOPE_ACTIONS.get(scope, frozenset())
        actions &= by_scopes
    return actions


def credential_allows(actor: Actor, action: Action) -> bool:
    """Whether the credential (not the user) may do `action`; the MCP transport answers `insufficient_scope`
    when this is false."""
    return action in credential_actions(actor)
