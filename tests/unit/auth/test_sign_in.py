"""Password sign-in (no user enumeration, lockout), sessions and password reset links."""

from __future__ import annotations

import statistics
import time
from datetime import timedelta

import pytest
from sqlalchemy import update

from codewell.accounts.audit import AuditService
from codewell.accounts.credentials import CredentialService
from codewell.accounts.models import SessionRow, UserRow
from codewell.accounts.service import AccountService
from codewell.auth.service import SIGN_IN_FAILED, AuthService, ClientInfo
from codewell.core.actors import INTERNAL
from codewell.core.errors import InvalidInput, PermissionDenied, Unauthenticated
from codewell.db.base import utcnow
from codewell.runtime import Runtime
from tests.factories import actor_of_user, make_user, set_site_config

pytestmark = pytest.mark.database

PASSWORD = "correct horse battery staple"
CLIENT = ClientInfo(ip="203.0.113.7", user_agent="pytest")


@pytest.fixture
def auth(runtime: Runtime) -> AuthService:
    return runtime.get(AuthService)


@pytest.fixture
def credentials(runtime: Runtime) -> CredentialService:
    return runtime.get(CredentialService)


def _failure(auth: AuthService, username: str, password: str) -> str:
    with pytest.raises(Unauthenticated) as raised:
        auth.sign_in_password(username, password, CLIENT)
    return raised.value.message


def test_correct_password_signs_in_case_insensitively(runtime: Runtime, auth: AuthService) -> None:
    alice = make_user(runtime, "alice", password=PASSWORD)
    assert auth.sign_in_password("Alice", PASSWORD, CLIENT) == alice
    entry = runtime.get(AuditService).list(INTERNAL, entity="auth.signIn")[0]
    assert (entry.action, entry.actor_username, entry.ip, entry.user_agent) == (
        "succeeded",
        "alice",
        CLIENT.ip,
        "pytest",
    )
    assert PASSWORD not in str(entry.as_json())


def test_wrong_password_unknown_user_and_service_account_fail_alike(runtime: Runtime, auth: AuthService) -> None:
    make_user(runtime, "alice", password=PASSWORD)
    make_user(runtime, "robot", service_account=True)
    messages = {
        _failure(auth, "alice", "wrong password!!"),
        _failure(auth, "nobody", PASSWORD),
        _failure(auth, "robot", PASSWORD),
    }
    assert messages == {SIGN_IN_FAILED}


@pytest.mark.usefixtures("production_password_hashing")
def test_unknown_user_costs_as_much_time_as_a_wrong_password(runtime: Runtime, auth: AuthService) -> None:
    make_user(runtime, "alice", password=PASSWORD)
    set_site_config(runtime, {"auth.lockout": {"failedAttemptThreshold": 100}})

    def timed(username: str) -> float:
        started = time.perf_counter()
        _failure(auth, username, "wrong password!!")
        return time.perf_counter() - started

    timed("nobody")  # warm the dummy hash
    known = statistics.median(timed("alice") for _ in range(3))
    unknown = statistics.median(timed("nobody") for _ in range(3))
    # Both run exactly one argon2 verification (~0.1 s); without the dummy hash "unknown" would take ~1 ms.
    assert unknown > known * 0.5
    assert known > unknown * 0.5


def test_lockout_after_threshold_and_lock_message_only_with_the_right_password(
    runtime: Runtime, auth: AuthService
) -> None:
    alice = make_user(runtime, "alice", password=PASSWORD)
    set_site_config(runtime, {"auth.lockout": {"failedAttemptThreshold": 3, "lockoutPeriod": 600}})
    for _ in range(3):
        assert _failure(auth, "alice", "wrong password!!") == SIGN_IN_FAILED
    # Locked: a wrong password still reads like any failure; the right one learns about the lock.
    assert _failure(auth, "alice", "wrong password!!") == SIGN_IN_FAILED
    assert "locked for 10 more minutes" in _failure(auth, "alice", PASSWORD)
    actions = [e.action for e in runtime.get(AuditService).list(INTERNAL, entity="auth.signIn")]
    assert "locked" in actions
    # When the lock ends the right password works again.
    with runtime.db.session() as session:
        session.execute(update(UserRow).values(locked_until=utcnow() - timedelta(seconds=1)))
    assert auth.sign_in_password("alice", PASSWORD, CLIENT).id == alice.id


def test_failures_outside_the_consecutive_period_do_not_add_up(runtime: Runtime, auth: AuthService) -> None:
    make_user(runtime, "alice", password=PASSWORD)
    set_site_config(runtime, {"auth.lockout": {"failedAttemptThreshold": 2, "consecutivePeriod": 60}})
    _failure(auth, "alice", "wrong password!!")
    with runtime.db.session() as session:
        session.execute(update(UserRow).values(last_failed_at=utcnow() - timedelta(seconds=120)))
    _failure(auth, "alice", "wrong password!!")
    assert auth.sign_in_password("alice", PASSWORD, CLIENT).username == "alice"


def test_admin_unlock(runtime: Runtime, auth: AuthService, credentials: CredentialService) -> None:
    alice = make_user(runtime, "alice", password=PASSWORD)
    set_site_config(runtime, {"auth.lockout": {"failedAttemptThreshold": 1}})
    _failure(auth, "alice", "wrong password!!")
    assert "locked" in _failure(auth, "alice", PASSWORD)
    with pytest.raises(PermissionDenied):
        credentials.unlock(actor_of_user(runtime, alice), alice.id)
    credentials.unlock(INTERNAL, alice.id)
    assert auth.sign_in_password("alice", PASSWORD, CLIENT).id == alice.id


def test_builtin_sign_in_can_be_disabled(runtime: Runtime, auth: AuthService) -> None:
    make_user(runtime, "alice", password=PASSWORD)
    set_site_config(runtime, {"auth.providers": []})
    with pytest.raises(PermissionDenied, match="disabled"):
        auth.sign_in_password("alice", PASSWORD, CLIENT)


def test_sessions_resolve_until_signed_out_deleted_or_expired(runtime: Runtime, auth: AuthService) -> None:
    alice = make_user(runtime, "alice", password=PASSWORD)
    cookie, info = auth.start_session(alice, CLIENT)
    found = auth.session_actor(cookie)
    assert found is not None
    assert (found[0].username, found[0].via, found[1].csrf_token) == ("alice", "session", info.csrf_token)
    # Tampered signature: always a different last character (a fixed "xx" suffix was no change when the
    # signature happened to end in "xx").
    assert auth.session_actor(cookie[:-1] + ("A" if cookie[-1] != "A" else "B")) is None
    assert auth.session_actor(info.id) is None  # unsigned ID
    auth.end_session(cookie)
    assert auth.session_actor(cookie) is None

    cookie, _ = auth.start_session(alice, CLIENT)
    with runtime.db.session() as session:
        session.execute(update(SessionRow).values(expires_at=utcnow() - timedelta(seconds=1)))
    assert auth.session_actor(cookie) is None

    cookie, _ = auth.start_session(alice, CLIENT)
    runtime.get(AccountService).set_password(INTERNAL, alice.id, "another long password")
    assert auth.session_actor(cookie) is None  # a password change signs every session out


def test_password_reset_link_works_once_and_only_for_its_user(
    runtime: Runtime, auth: AuthService, credentials: CredentialService
) -> None:
    alice = make_user(runtime, "alice", password=PASSWORD)
    bob = make_user(runtime, "bob", password=PASSWORD)
    link = credentials.password_reset_link(INTERNAL, alice.id)
    assert link.startswith(f"{runtime.external_url}/password-reset?userID={alice.id}&code=")
    code = link.split("code=")[1]
    assert credentials.check_reset_code(alice.id, code)
    assert not credentials.check_reset_code(bob.id, code)
    with pytest.raises(InvalidInput, match="at least 12"):
        credentials.reset_password(alice.id, code, "short")
    credentials.reset_password(alice.id, code, "a brand new password")
    assert auth.sign_in_password("alice", "a brand new password", CLIENT).id == alice.id
    with pytest.raises(InvalidInput, match="invalid or has expired"):
        credentials.reset_password(alice.id, code, "yet another password")


def test_reset_links_expire_and_need_an_admin(runtime: Runtime, credentials: CredentialService) -> None:
    alice = make_user(runtime, "alice", password=PASSWORD)
    with pytest.raises(PermissionDenied):
        credentials.password_reset_link(actor_of_user(runtime, alice), alice.id)
    expired = f"{int(utcnow().timestamp()) - 1}.{credentials.reset_mac(alice.id, int(utcnow().timestamp()) - 1)}"
    assert not credentials.check_reset_code(alice.id, expired)
    assert not credentials.check_reset_code(alice.id, "garbage")
