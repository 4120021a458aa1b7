"""codewell.authz: the rule table, the credential table, the refusals, and the per-request and role caches."""

from __future__ import annotations

import logging

import pytest

from codewell import authz
from codewell.accounts.permissions import MCP_ACCESS
from codewell.accounts.role_permissions import setup as accounts_setup
from codewell.accounts.roles import RoleService
from codewell.accounts.tokens import SCOPES
from codewell.analytics.tokens import SCOPE_ANALYTICS
from codewell.authz import RULES, SCOPE_ACTIONS, Action, IssuedTo, SignInRequired, UserRef
from codewell.core.actors import ANONYMOUS, INTERNAL, Actor
from codewell.core.errors import PermissionDenied, Unauthenticated
from codewell.runtime import Runtime
from tests.factories import make_user


def user(user_id: int = 1, *, admin: bool = False, via: str = "session", scopes: frozenset[str] = frozenset()) -> Actor:
    return Actor.user(user_id, f"u{user_id}", site_admin=admin, via=via, scopes=scopes)


ALICE = user(1)
ADMIN = user(9, admin=True)
OAUTH_ADMIN = user(9, admin=True, via="oauth", scopes=frozenset({"mcp"}))
MCP_TOKEN_ADMIN = user(9, admin=True, via="access_token", scopes=frozenset({"mcp"}))
ANALYTICS_ADMIN = user(9, admin=True, via="access_token", scopes=frozenset({SCOPE_ANALYTICS}))
SUDO_ONLY_ADMIN = user(9, admin=True, via="access_token", scopes=frozenset({"site-admin:sudo"}))


def test_every_action_has_one_rule_and_every_scope_a_row() -> None:
    assert set(RULES) == set(Action)
    assert set(SCOPE_ACTIONS) == {*SCOPES, SCOPE_ANALYTICS}


@pytest.mark.parametrize(
    ("actor", "action", "resource", "expected"),
    [
        (ALICE, Action.USERS_READ, None, True),
        (ALICE, Action.USERS_MANAGE, None, False),
        (ADMIN, Action.USERS_MANAGE, None, True),
        (INTERNAL, Action.USERS_MANAGE, None, True),
        (ANONYMOUS, Action.USERS_READ, None, False),
        # self or admin
        (ALICE, Action.USER_MANAGE, UserRef(1), True),
        (ALICE, Action.USER_MANAGE, UserRef(2), False),
        (ADMIN, Action.USER_MANAGE, UserRef(2), True),
        (ANONYMOUS, Action.USER_MANAGE, UserRef(1), False),
        # only the service itself reads provider tokens, site admins included
        (ADMIN, Action.IDENTITY_SECRETS_READ, None, False),
        (INTERNAL, Action.IDENTITY_SECRETS_READ, None, True),
        # one rule for repository administration: site admins and internal work (repos and search agreed)
        (INTERNAL, Action.REPOS_MANAGE, None, True),
        (ADMIN, Action.SEARCH_INDEX, None, True),
        (ALICE, Action.SEARCH_INDEX, None, False),
        # OAuth tokens: read, navigation and the MCP server only
        (OAUTH_ADMIN, Action.REPOS_READ_ALL, None, True),
        (OAUTH_ADMIN, Action.MCP_ACCESS, None, True),
        (OAUTH_ADMIN, Action.ROLES_MANAGE, None, False),
        (OAUTH_ADMIN, Action.USERS_MANAGE, None, False),
        (MCP_TOKEN_ADMIN, Action.MCP_ACCESS, None, True),
        (MCP_TOKEN_ADMIN, Action.REPOS_MANAGE, None, False),
        # analytics tokens: the analytics API only, reading
        (ANALYTICS_ADMIN, Action.ANALYTICS_READ, None, True),
        (ANALYTICS_ADMIN, Action.USERS_EXPORT, None, True),
        (ANALYTICS_ADMIN, Action.CREDITS_MANAGE, None, False),
        (ANALYTICS_ADMIN, Action.ANALYTICS_TOKENS_MANAGE, UserRef(9), False),
        (ANALYTICS_ADMIN, Action.MCP_ACCESS, None, False),
        (ANALYTICS_ADMIN, Action.REPOS_READ_ALL, None, False),
        # a token with only the sudo scope may only be used for sudo
        (SUDO_ONLY_ADMIN, Action.SUDO, None, True),
        (SUDO_ONLY_ADMIN, Action.REPOS_READ_ALL, None, False),
        (user(1, via="access_token", scopes=frozenset({"site-admin:sudo"})), Action.SUDO, None, False),
        # token introspection: the client the token was issued to, whoever is behind the request
        (ANONYMOUS, Action.OAUTH_TOKENS_INTROSPECT, IssuedTo("c1", "c1"), True),
        (ANONYMOUS, Action.OAUTH_TOKENS_INTROSPECT, IssuedTo("c1", "c2"), False),
        (ANONYMOUS, Action.OAUTH_TOKENS_INTROSPECT, IssuedTo("", ""), False),
        (ALICE, Action.OAUTH_TOKENS_INTROSPECT, None, False),
        (ADMIN, Action.OAUTH_TOKENS_INTROSPECT, None, True),
    ],
)
def test_decisions_follow_the_tables(
    actor: Actor, action: Action, resource: authz.Resource | None, expected: bool
) -> None:
    assert authz.allowed(actor, action, resource) is expected


def test_refusals_name_the_reason_and_anonymous_callers_get_401() -> None:
    with pytest.raises(SignInRequired) as anonymous:
        authz.ensure(ANONYMOUS, Action.REPOS_MANAGE)
    assert isinstance(anonymous.value, Unauthenticated)
    assert isinstance(anonymous.value, PermissionDenied)
    assert anonymous.value.http_status == 401
    assert anonymous.value.code == "unauthenticated"
    assert anonymous.value.message == "only site admins may do this"
    with pytest.raises(PermissionDenied, match="only site admins may do this") as user_refused:
        authz.ensure(ALICE, Action.REPOS_MANAGE)
    assert user_refused.value.http_status == 403
    assert user_refused.value.hint == "ask a site admin"
    with pytest.raises(PermissionDenied, match="OAuth tokens cannot change accounts, roles or settings"):
        authz.ensure(OAUTH_ADMIN, Action.ROLES_MANAGE)
    with pytest.raises(PermissionDenied, match="analytics access tokens are read-only"):
        authz.ensure(ANALYTICS_ADMIN, Action.CREDITS_MANAGE)
    authz.ensure(ADMIN, Action.ROLES_MANAGE)  # no exception


def test_each_decision_is_logged_once_per_scope(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="codewell.authz.decisions")
    with authz.scope(None):
        assert authz.allowed(ALICE, Action.USER_READ, UserRef(1))
        assert authz.allowed(ALICE, Action.USER_READ, UserRef(1))
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "authz user 1 via session user:read UserRef(user_id=1): True",
        "authz user 1 via session user:read UserRef(user_id=1): True (cached)",
    ]


def _wired(runtime: Runtime) -> Actor:
    """Accounts' role lookup installed (as wiring does) and a user holding MCP#ACCESS through the User role."""
    accounts_setup(runtime)
    bob = make_user(runtime, "bob")
    return Actor.user(bob.id, "bob", via="session")


def test_role_permissions_are_cached_per_request_and_dropped_on_role_changes(runtime: Runtime) -> None:
    bob = _wired(runtime)
    roles = runtime.get(RoleService)
    with authz.scope(runtime):
        assert authz.allowed(bob, Action.MCP_ACCESS)
        roles.set_permission(INTERNAL, "User", MCP_ACCESS, granted=False)
        # Within one request the answer stays what it was (one decision per request) ...
        assert authz.allowed(bob, Action.MCP_ACCESS)
    # ... and the next request sees the change at once: the role change cleared the role cache.
    with authz.scope(runtime):
        assert not authz.allowed(bob, Action.MCP_ACCESS)
    # Site admins hold every role permission without a lookup.
    with authz.scope(runtime):
        assert authz.allowed(Actor.user(bob.user_id or 0, "bob", site_admin=True), Action.MCP_ACCESS)


def test_changes_from_another_process_apply_on_the_next_request(runtime: Runtime) -> None:
    bob = _wired(runtime)
    with authz.scope(runtime):
        assert authz.allowed(bob, Action.MCP_ACCESS)
    with authz.scope(runtime):
        assert authz.allowed(bob, Action.MCP_ACCESS)  # remembered: no change meanwhile
    # Another process (the CLI) changes the role: this process hears nothing, but the change bumped the
    # accounts cache epoch in its transaction, which the next scope reads (codewell/db/epochs.py).
    other = Runtime.open(runtime.settings)
    try:
        other.get(RoleService).set_permission(INTERNAL, "User", MCP_ACCESS, granted=False)
    finally:
        other.close()
    with authz.scope(runtime):
        assert not authz.allowed(bob, Action.MCP_ACCESS)


def test_outside_a_scope_role_permissions_fail_closed(runtime: Runtime) -> None:
    bob = _wired(runtime)
    assert not authz.allowed(bob, Action.MCP_ACCESS)
    assert authz.allowed(INTERNAL, Action.MCP_ACCESS)
