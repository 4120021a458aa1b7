"""`codewell users|tokens|roles|audit` and the first-run bootstrap, run as commands against a real database."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import update

from codewell.accounts.models import AccessTokenRow
from codewell.accounts.service import AccountService
from codewell.accounts.tokens import TokenService
from codewell.auth.service import AuthService, ClientInfo
from codewell.cli.bootstrap import run_bootstrap
from codewell.cli.main import cli
from codewell.core.errors import Unauthenticated
from codewell.core.settings import Settings
from codewell.db.base import utcnow
from codewell.runtime import Runtime
from tests.factories import set_site_config

pytestmark = pytest.mark.database


@pytest.fixture
def codewell(settings: Settings, runtime: Runtime) -> CliRunnerCall:
    return CliRunnerCall(settings)


class CliRunnerCall:
    def __init__(self, settings: Settings) -> None:
        self.base = ["--data-dir", str(settings.data_dir), "--database-url", settings.database_url]

    def __call__(self, *args: str, input: str | None = None, ok: bool = True) -> Result:
        result = CliRunner().invoke(cli, [*self.base, *args], input=input, catch_exceptions=False)
        if ok:
            assert result.exit_code == 0, result.output
        return result


def test_users_create_list_set_admin_delete(codewell: CliRunnerCall, runtime: Runtime) -> None:
    created = codewell("users", "create", "alice", "--email", "alice@example.com")
    assert "created user alice" in created.output
    assert "/password-reset?userID=" in created.output
    codewell("users", "create", "ci-bot", "--service-account")
    codewell("users", "create", "root", "--site-admin", "--password-stdin", input="a long enough password\n")
    listing = codewell("users", "list").output
    assert re.search(r"alice\s+user\s+User", listing)
    assert re.search(r"ci-bot\s+service account", listing)
    assert re.search(r"root\s+user\s+User, Site Administrator", listing)
    assert runtime.get(AuthService).sign_in_password("root", "a long enough password", ClientInfo()).site_admin
    assert "site admin yes" in codewell("users", "set-admin", "alice", "true").output
    codewell("users", "delete", "alice")
    assert runtime.get(AccountService).find_by_username("alice") is None


def test_cli_errors_are_one_clear_line(codewell: CliRunnerCall) -> None:
    codewell("users", "create", "root", "--site-admin")
    duplicate = codewell("users", "create", "ROOT", ok=False)
    assert duplicate.exit_code == 1
    assert "error: the username 'ROOT' is already taken" in duplicate.output
    last = codewell("users", "delete", "root", ok=False)
    assert "last site admin" in last.output
    bad = codewell("users", "create", "--", ".x", ok=False)
    assert "must not start with '-' or '.'" in bad.output
    missing = codewell("tokens", "list", "ghost", ok=False)
    assert "user 'ghost' not found" in missing.output


def test_tokens_create_list_revoke(codewell: CliRunnerCall, runtime: Runtime) -> None:
    codewell("users", "create", "ci-bot", "--service-account")
    created = codewell("tokens", "create", "ci-bot", "--note", "deploy", "--scope", "mcp")
    raw = created.stdout.strip().splitlines()[0]
    assert re.fullmatch(r"cwp_[0-9a-f]{40}", raw)
    actor = runtime.get(TokenService).authenticate(raw)
    assert actor is not None
    assert actor.scopes == frozenset({"mcp"})
    listing = codewell("tokens", "list", "ci-bot").output
    assert "deploy" in listing
    assert raw not in listing
    token_id = listing.split()[0]
    codewell("tokens", "revoke", token_id)
    assert runtime.get(TokenService).authenticate(raw) is None
    assert "revoked" in codewell("tokens", "list", "ci-bot", "--all").output


def test_tokens_list_shows_each_token_state(codewell: CliRunnerCall, runtime: Runtime) -> None:
    """Issue #22 (security 10): an expired token was listed as active and revoked ones were left out."""
    codewell("users", "create", "ci-bot", "--service-account")
    ids = {}
    for note in ("live", "stale", "gone"):
        codewell("tokens", "create", "ci-bot", "--note", note)
    for line in codewell("tokens", "list", "ci-bot").output.splitlines():
        ids[line.split()[-1]] = int(line.split()[0])
    with runtime.db.session() as session:
        session.execute(
            update(AccessTokenRow)
            .where(AccessTokenRow.id == ids["stale"])
            .values(expires_at=utcnow() - timedelta(minutes=1))
        )
    codewell("tokens", "revoke", str(ids["gone"]))
    states = {line.split()[-1]: line.split()[1] for line in codewell("tokens", "list", "ci-bot").output.splitlines()}
    assert states == {"live": "active", "stale": "expired", "gone": "revoked"}
    active = codewell("tokens", "list", "ci-bot", "--active").output
    assert [line.split()[-1] for line in active.splitlines()] == ["live"]


def test_roles_recipe_and_audit(codewell: CliRunnerCall, runtime: Runtime) -> None:
    codewell("users", "create", "alice")
    codewell("users", "create", "bob")
    assert "User: (no permissions)" in codewell("roles", "revoke", "User", "MCP#ACCESS").output
    codewell("roles", "create", "MCP users", "--permission", "MCP#ACCESS")
    codewell("roles", "assign", "MCP users", "alice")
    accounts = runtime.get(AccountService)
    alice = accounts.actor_for(accounts.get_by_username("alice"), via="session")
    bob = accounts.actor_for(accounts.get_by_username("bob"), via="session")
    assert accounts.has_permission(alice, "MCP#ACCESS")
    assert not accounts.has_permission(bob, "MCP#ACCESS")
    assert "MCP users (custom): MCP#ACCESS  members: alice" in codewell("roles", "list").output
    assert "MCP#ACCESS" in codewell("roles", "permissions").output
    unknown = codewell("roles", "grant", "User", "NOPE#NOPE", ok=False)
    assert "unknown permission" in unknown.output
    audit = codewell("audit", "--entity", "accounts.role").output
    assert "accounts.role assigned" in audit
    assert "accounts.role permissionRemoved" in audit


def test_unlock_ends_a_lockout(codewell: CliRunnerCall, runtime: Runtime) -> None:

    codewell("users", "create", "alice", "--password-stdin", input="a long enough password\n")
    set_site_config(runtime, {"auth.lockout": {"failedAttemptThreshold": 1}})
    auth = runtime.get(AuthService)
    with pytest.raises(Unauthenticated):
        auth.sign_in_password("alice", "wrong password!!", ClientInfo())
    with pytest.raises(Unauthenticated, match="locked"):
        auth.sign_in_password("alice", "a long enough password", ClientInfo())
    assert "alice: unlocked" in codewell("users", "unlock", "alice").output
    assert auth.sign_in_password("alice", "a long enough password", ClientInfo()).username == "alice"


def test_first_run_bootstrap_creates_admin_once(runtime: Runtime) -> None:
    lines = run_bootstrap(runtime, False)
    password = re.search(r"sign in as admin with password (\S+)", lines[0])
    token = re.search(r"access token: (cwp_[0-9a-f]{40})", lines[1])
    assert password
    assert token
    admin = runtime.get(AuthService).sign_in_password("admin", password.group(1), ClientInfo())
    assert admin.site_admin
    actor = runtime.get(TokenService).authenticate(token.group(1))
    assert actor is not None
    assert actor.scopes == frozenset({"user:all", "mcp"})
    # A new instance refuses sign-up and the first-run output says how people get in.
    assert any(line.startswith("sign-up is off: add users with `codewell users create") for line in lines)
    assert not any("admin" in line for line in run_bootstrap(runtime, False))
