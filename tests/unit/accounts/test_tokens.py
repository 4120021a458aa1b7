"""Access tokens: format, storage, life cycle (revoke, expiry, deleted user), scopes and site policy."""

from __future__ import annotations

import hashlib
import re
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from codewell.accounts.models import AccessTokenRow
from codewell.accounts.service import AccountService
from codewell.accounts.tokens import TokenService
from codewell.core.actors import INTERNAL
from codewell.core.errors import InvalidInput, NotFound, PermissionDenied
from codewell.db.base import utcnow
from codewell.runtime import Runtime
from tests.factories import actor_of_user, make_token, make_user, set_site_config

pytestmark = pytest.mark.database


@pytest.fixture
def tokens(runtime: Runtime) -> TokenService:
    return runtime.get(TokenService)


def test_token_format_and_storage(runtime: Runtime, tokens: TokenService) -> None:
    alice = make_user(runtime, "alice")
    raw, info = tokens.create(actor_of_user(runtime, alice), alice.id, "laptop", ["user:all"], None)
    assert re.fullmatch(r"cwp_[0-9a-f]{40}", raw)
    with runtime.db.session() as session:
        row = session.scalars(select(AccessTokenRow)).one()
        assert row.token_sha256 == hashlib.sha256(bytes.fromhex(raw[4:])).digest()
        assert raw[4:] not in repr(vars(row))  # only the digest is stored
    assert info.note == "laptop"
    assert info.scopes == ("user:all",)


def test_contract_create_is_both_factory_and_token_creation(runtime: Runtime) -> None:
    service = TokenService.create(runtime)
    assert isinstance(service, TokenService)
    alice = make_user(runtime, "alice")
    raw, info = service.create(INTERNAL, alice.id, "n", ("mcp",), None)
    assert service.authenticate(raw) is not None
    assert info.scopes == ("mcp",)


def test_authenticate_returns_the_owner_with_scopes(runtime: Runtime, tokens: TokenService) -> None:
    alice = make_user(runtime, "alice")
    raw = make_token(runtime, alice, scopes=("user:all", "mcp"))
    actor = tokens.authenticate(raw)
    assert actor is not None
    assert (actor.user_id, actor.username, actor.via) == (alice.id, "alice", "access_token")
    assert actor.scopes == frozenset({"user:all", "mcp"})


@pytest.mark.parametrize("raw", ["", "cwp_", "cwp_" + "0" * 40, "cwp_" + "g" * 40, "sgp_" + "0" * 40, "x" * 300])
def test_unknown_or_malformed_tokens_do_not_authenticate(runtime: Runtime, tokens: TokenService, raw: str) -> None:
    make_token(runtime, make_user(runtime, "alice"))
    assert tokens.authenticate(raw) is None


def test_revoked_token_stops_working_at_once_and_stays_listed_as_revoked(
    runtime: Runtime, tokens: TokenService
) -> None:
    alice = make_user(runtime, "alice")
    actor = actor_of_user(runtime, alice)
    raw, info = tokens.create(actor, alice.id, "n", ["user:all"], None)
    assert tokens.authenticate(raw) is not None
    revoked = tokens.revoke(actor, info.id)
    assert revoked.revoked_at is not None
    assert tokens.authenticate(raw) is None
    assert tokens.list(actor, alice.id) == []
    assert [t.id for t in tokens.list(actor, alice.id, include_revoked=True)] == [info.id]
    assert tokens.revoke(actor, info.id).revoked_at == revoked.revoked_at  # idempotent


def test_expired_token_stops_working(runtime: Runtime, tokens: TokenService) -> None:
    alice = make_user(runtime, "alice")
    raw, info = tokens.create(INTERNAL, alice.id, "n", ["user:all"], 7)
    assert info.expires_at is not None
    assert timedelta(days=6, hours=23) < info.expires_at - utcnow() <= timedelta(days=7)
    assert tokens.authenticate(raw) is not None
    with runtime.db.session() as session:
        session.execute(update(AccessTokenRow).values(expires_at=utcnow() - timedelta(seconds=1)))
    assert tokens.authenticate(raw) is None


def test_deleted_users_tokens_stop_working(runtime: Runtime, tokens: TokenService) -> None:
    alice = make_user(runtime, "alice")
    raw = make_token(runtime, alice)
    runtime.get(AccountService).delete_user(INTERNAL, alice.id)
    assert tokens.authenticate(raw) is None


def test_flag_changes_and_revocation_by_another_process_apply_on_the_next_authentication(
    runtime: Runtime, tokens: TokenService
) -> None:
    """Nothing about a token is cached in the process: another process (here a second Runtime on the same
    database, like the CLI) demoting the owner or revoking the token is seen by the very next request."""
    make_user(runtime, "keeper", site_admin=True)  # demoting the last site admin is refused
    alice = make_user(runtime, "alice", site_admin=True)
    raw = make_token(runtime, alice)
    assert (actor := tokens.authenticate(raw)) is not None
    assert actor.site_admin
    other = Runtime.open(runtime.settings)
    try:
        other.get(AccountService).set_site_admin(INTERNAL, alice.id, False)
        assert (actor := tokens.authenticate(raw)) is not None
        assert not actor.site_admin
        token_id = other.get(TokenService).list(INTERNAL, alice.id)[0].id
        other.get(TokenService).revoke(INTERNAL, token_id)
    finally:
        other.close()
    assert tokens.authenticate(raw) is None


def test_last_used_at_is_written_at_most_once_a_minute(
    runtime: Runtime, tokens: TokenService, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = make_user(runtime, "alice")
    raw = make_token(runtime, alice)
    tokens.authenticate(raw)
    first = tokens.list(INTERNAL, alice.id)[0].last_used_at
    assert first is not None
    tokens.authenticate(raw)
    assert tokens.list(INTERNAL, alice.id)[0].last_used_at == first
    # Two minutes later (the owner is remembered by this process with its last use: the clock decides).
    later_now = utcnow() + timedelta(minutes=2)
    monkeypatch.setattr("codewell.accounts.tokens.utcnow", lambda: later_now)
    tokens.authenticate(raw)
    later = tokens.list(INTERNAL, alice.id)[0].last_used_at
    assert later == later_now


def test_others_tokens_read_as_missing(runtime: Runtime, tokens: TokenService) -> None:
    alice, bob = make_user(runtime, "alice"), make_user(runtime, "bob")
    _, info = tokens.create(INTERNAL, alice.id, "n", ["user:all"], None)
    bob_actor = actor_of_user(runtime, bob)
    with pytest.raises(NotFound):
        tokens.revoke(bob_actor, info.id)
    with pytest.raises(NotFound):
        tokens.get(bob_actor, info.id)
    with pytest.raises(PermissionDenied):
        tokens.list(bob_actor, alice.id)
    with pytest.raises(PermissionDenied):
        tokens.create(bob_actor, alice.id, "n", ["user:all"], None)


def test_admin_manages_any_users_tokens(runtime: Runtime, tokens: TokenService) -> None:
    root = actor_of_user(runtime, make_user(runtime, "root", site_admin=True))
    robot = runtime.get(AccountService).create_user(root, "ci-bot", service_account=True)
    raw, info = tokens.create(root, robot.id, "CI", ["user:all"], 30)
    actor = tokens.authenticate(raw)
    assert actor is not None
    assert actor.service_account
    tokens.revoke(root, info.id)
    assert tokens.authenticate(raw) is None


@pytest.mark.parametrize(
    ("scopes", "error"),
    [([], "at least one scope"), (["repo"], "unknown token scope"), (["user:all", "admin"], "unknown token scope")],
)
def test_scope_validation(runtime: Runtime, tokens: TokenService, scopes: list[str], error: str) -> None:
    alice = make_user(runtime, "alice")
    with pytest.raises(InvalidInput, match=error):
        tokens.create(INTERNAL, alice.id, "n", scopes, None)


def test_sudo_scope_is_for_site_admins_only(runtime: Runtime, tokens: TokenService) -> None:
    alice = make_user(runtime, "alice")
    with pytest.raises(PermissionDenied):
        tokens.create(actor_of_user(runtime, alice), alice.id, "n", ["site-admin:sudo"], None)
    with pytest.raises(PermissionDenied, match="only for tokens of site admins"):
        tokens.create(INTERNAL, alice.id, "n", ["site-admin:sudo"], None)
    root = make_user(runtime, "root", site_admin=True)
    _, info = tokens.create(actor_of_user(runtime, root), root.id, "n", ["site-admin:sudo", "user:all"], None)
    assert info.scopes == ("site-admin:sudo", "user:all")


def test_site_policy_on_creation_and_expiry(runtime: Runtime, tokens: TokenService) -> None:
    alice = make_user(runtime, "alice")
    alice_actor = actor_of_user(runtime, alice)
    root = actor_of_user(runtime, make_user(runtime, "root", site_admin=True))
    with pytest.raises(InvalidInput, match="cannot expire in 5 days"):
        tokens.create(alice_actor, alice.id, "n", ["user:all"], 5)
    set_site_config(runtime, {"auth.accessTokens": {"allow": "site-admin-create", "allowNoExpiration": False}})
    with pytest.raises(PermissionDenied, match="only site admins"):
        tokens.create(alice_actor, alice.id, "n", ["user:all"], 30)
    with pytest.raises(InvalidInput, match="must expire"):
        tokens.create(root, alice.id, "n", ["user:all"], None)
    assert tokens.create(root, alice.id, "n", ["user:all"], 30)[1].expires_at is not None
    set_site_config(runtime, {"auth.accessTokens": {"allow": "none"}})
    with pytest.raises(PermissionDenied, match="disabled"):
        tokens.create(root, alice.id, "n", ["user:all"], None)


def test_note_length_is_limited(runtime: Runtime, tokens: TokenService) -> None:
    alice = make_user(runtime, "alice")
    with pytest.raises(InvalidInput, match="at most 255"):
        tokens.create(INTERNAL, alice.id, "x" * 256, ["user:all"], None)
