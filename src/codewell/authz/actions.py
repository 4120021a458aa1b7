"""What can be asked for (`Action`), what a decision may depend on (`Resource`), and who may do each action.

Every permission decision in the house names one `Action`; `RULES` says, once, who may do it (before the
credential limits of `codewell.authz.credentials` apply) and the message a refusal shows. docs/security.md
has the same table in words.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Action(StrEnum):
    """One permission decision, named `area:verb` (the area is the thing acted on, not the capability)."""

    # Site-wide policies that have no narrower action (`auth.accessTokens.allow: site-admin-create`, sign-up).
    SITE_ADMIN = "site:admin"
    USERS_READ = "users:read"
    USERS_MANAGE = "users:manage"
    USERS_EXPORT = "users:export"
    USER_READ = "user:read"
    USER_MANAGE = "user:manage"
    ROLES_READ = "roles:read"
    ROLE_MEMBERS_READ = "roles:read-members"
    ROLES_MANAGE = "roles:manage"
    AUDIT_READ = "audit:read"
    TOKENS_MANAGE = "tokens:manage"
    TOKENS_SUDO = "tokens:sudo"
    # Acting as another user with the token-sudo header.
    SUDO = "site:sudo"
    IDENTITY_SECRETS_READ = "identities:read-secrets"
    REPOS_READ_ALL = "repos:read-all"
    REPOS_MANAGE = "repos:manage"
    SEARCH_INDEX = "search:index"
    # The background job queue: reading it (queue depth, failures with their reasons) and acting on it.
    JOBS_READ = "jobs:read"
    JOBS_MANAGE = "jobs:manage"
    METRICS_READ = "metrics:read"
    MCP_ACCESS = "mcp:access"
    SCRIPTS_RUN = "scripts:run"
    ANALYTICS_API = "analytics:api"
    ANALYTICS_READ = "analytics:read"
    ANALYTICS_TOKENS_MANAGE = "analytics-tokens:manage"
    CREDITS_READ = "credits:read"
    CREDITS_MANAGE = "credits:manage"
    LICENSE_READ = "license:read"
    LICENSE_MANAGE = "license:manage"
    OAUTH_CLIENTS_MANAGE = "oauth-clients:manage"
    OAUTH_TOKENS_INTROSPECT = "oauth-tokens:introspect"
    # The agents: code_finder, asking deep search questions (and follow-ups) as oneself.
    AGENTS_ASK = "agents:ask"
    # A deep search conversation by its own address (UserRef of the owner) and the caller's own list.
    DEEPSEARCH_READ = "deepsearch:read"
    # A conversation through its shared link (while `deepSearch.sharing.enabled`).
    DEEPSEARCH_READ_SHARED = "deepsearch:read-shared"
    # Cancel, delete, share and reset the share link of a conversation (UserRef of the owner).
    DEEPSEARCH_MANAGE = "deepsearch:manage"


@dataclass(frozen=True, slots=True)
class UserRef:
    """The user an object belongs to (the user themself, a token's or an analytics token's owner)."""

    user_id: int


@dataclass(frozen=True, slots=True)
class IssuedTo:
    """An OAuth token issued to `token_client`, asked about by the authenticated client `caller_client`
    ("" when the caller did not authenticate as a client)."""

    token_client: str
    caller_client: str


Resource = UserRef | IssuedTo


class Who(StrEnum):
    """Who may do an action (internal work of the service may do everything)."""

    SIGNED_IN = "signed-in user"
    SITE_ADMIN = "site admin"
    SELF_OR_ADMIN = "the user themself (UserRef) or a site admin"
    CLIENT_OR_ADMIN = "the client the token was issued to (IssuedTo) or a site admin"
    ROLE = "holder of the role permission (site admins hold all)"
    INTERNAL = "the service itself only"


class Kind(StrEnum):
    """Whether an action only reads or changes state: limited credentials (OAuth, `mcp` tokens) only read."""

    READ = "read"
    CHANGE = "change"


@dataclass(frozen=True, slots=True)
class Rule:
    who: Who
    kind: Kind
    # Shown to a refused caller (anonymous callers get it too, as a 401); never names a hidden object.
    message: str
    hint: str | None = None
    # The role permission (`NAMESPACE#ACTION`, held through accounts' roles) for `Who.ROLE`.
    permission: str = ""


_ASK_ADMIN = "ask a site admin"
R, C = Kind.READ, Kind.CHANGE

RULES: dict[Action, Rule] = {
    Action.SITE_ADMIN: Rule(Who.SITE_ADMIN, C, "only site admins can do this", _ASK_ADMIN),
    Action.USERS_READ: Rule(Who.SIGNED_IN, R, "sign in to list users"),
    Action.USERS_MANAGE: Rule(Who.SITE_ADMIN, C, "only site admins can manage users", _ASK_ADMIN),
    Action.USERS_EXPORT: Rule(Who.SITE_ADMIN, R, "only site admins can export the user directory", _ASK_ADMIN),
    Action.USER_READ: Rule(Who.SELF_OR_ADMIN, R, "only the user themself or a site admin can see this"),
    Action.USER_MANAGE: Rule(Who.SELF_OR_ADMIN, C, "only the user themself or a site admin can change this"),
    Action.ROLES_READ: Rule(Who.SIGNED_IN, R, "sign in to see roles"),
    Action.ROLE_MEMBERS_READ: Rule(Who.SITE_ADMIN, R, "only site admins can see who holds a role", _ASK_ADMIN),
    Action.ROLES_MANAGE: Rule(Who.SITE_ADMIN, C, "only site admins can manage roles", _ASK_ADMIN),
    Action.AUDIT_READ: Rule(Who.SITE_ADMIN, R, "only site admins can read the audit log", _ASK_ADMIN),
    Action.TOKENS_MANAGE: Rule(Who.SELF_OR_ADMIN, C, "only the owner or a site admin can manage access tokens"),
    Action.TOKENS_SUDO: Rule(
        Who.SITE_ADMIN, C, "only site admins can create tokens with the site-admin:sudo scope", _ASK_ADMIN
    ),
    Action.SUDO: Rule(Who.SITE_ADMIN, C, "The subject user of a sudo access token must be a site admin."),
    Action.IDENTITY_SECRETS_READ: Rule(Who.INTERNAL, R, "provider tokens are only readable by the service itself"),
    Action.REPOS_READ_ALL: Rule(Who.SITE_ADMIN, R, "only site admins can read every repository", _ASK_ADMIN),
    Action.REPOS_MANAGE: Rule(Who.SITE_ADMIN, C, "only site admins may do this", _ASK_ADMIN),
    Action.SEARCH_INDEX: Rule(Who.SITE_ADMIN, C, "only site admins may index repositories", _ASK_ADMIN),
    Action.JOBS_READ: Rule(Who.SITE_ADMIN, R, "only site admins can see background jobs", _ASK_ADMIN),
    Action.JOBS_MANAGE: Rule(Who.SITE_ADMIN, C, "only site admins can cancel or retry background jobs", _ASK_ADMIN),
    Action.METRICS_READ: Rule(Who.SITE_ADMIN, R, "Only site admins and the metrics token can read /metrics."),
    Action.MCP_ACCESS: Rule(
        Who.ROLE,
        R,
        "the MCP#ACCESS permission is required to use the MCP server",
        "ask a site admin to grant MCP#ACCESS to one of your roles",
        permission="MCP#ACCESS",
    ),
    Action.SCRIPTS_RUN: Rule(
        Who.SIGNED_IN, R, "sign in to run scripts", "send an access token: Authorization: token <token>"
    ),
    Action.ANALYTICS_API: Rule(
        Who.SIGNED_IN, R, "Missing analytics access token.", "send it as `Authorization: Bearer <ACCESS_TOKEN>`"
    ),
    Action.ANALYTICS_READ: Rule(
        Who.SITE_ADMIN, R, "only site admins can read instance-wide analytics", "use a token created by a site admin"
    ),
    Action.ANALYTICS_TOKENS_MANAGE: Rule(
        Who.SELF_OR_ADMIN, C, "only the owner or a site admin can manage these analytics access tokens"
    ),
    Action.CREDITS_READ: Rule(Who.SITE_ADMIN, R, "only site admins can see credit buckets", _ASK_ADMIN),
    Action.CREDITS_MANAGE: Rule(Who.SITE_ADMIN, C, "only site admins can allocate credits", _ASK_ADMIN),
    Action.LICENSE_READ: Rule(Who.SITE_ADMIN, R, "only site admins can see the license", _ASK_ADMIN),
    Action.LICENSE_MANAGE: Rule(Who.SITE_ADMIN, C, "only site admins can install license keys", _ASK_ADMIN),
    Action.OAUTH_CLIENTS_MANAGE: Rule(Who.SITE_ADMIN, C, "only site admins can manage OAuth clients", _ASK_ADMIN),
    Action.OAUTH_TOKENS_INTROSPECT: Rule(
        Who.CLIENT_OR_ADMIN, R, "a client may only introspect its own tokens", "authenticate as the token's client"
    ),
    Action.AGENTS_ASK: Rule(
        Who.SIGNED_IN, R, "sign in to ask the agents", "send an access token: Authorization: token <token>"
    ),
    Action.DEEPSEARCH_READ: Rule(Who.SELF_OR_ADMIN, R, "only the owner can read this deep search conversation"),
    Action.DEEPSEARCH_READ_SHARED: Rule(Who.SIGNED_IN, R, "sign in to read shared deep search conversations"),
    Action.DEEPSEARCH_MANAGE: Rule(Who.SELF_OR_ADMIN, C, "only the owner can change this deep search conversation"),
}

READ_ACTIONS = frozenset(a for a, rule in RULES.items() if rule.kind is Kind.READ)
