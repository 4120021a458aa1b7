"""AccountService: creating users, uniqueness, site admins, e-mails, passwords, deletion."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from codewell.accounts.models import UserRow
from codewell.accounts.passwords import verify_password
from codewell.accounts.service import AccountService
from codewell.core.actors import ANONYMOUS, INTERNAL
from codewell.core.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from codewell.runtime import Runtime
from tests.factories import actor_of_user, make_user, set_site_config

pytestmark = pytest.mark.database


@pytest.fixture
def accounts(runtime: Runtime) -> AccountService:
    return runtime.get(AccountService)


def test_created_user_reads_back_and_password_is_hashed_with_argon2(runtime: Runtime, accounts: AccountService) -> None:
    user = accounts.create_user(INTERNAL, "alice", password="correct horse battery", display_name="Alice A.")
    assert accounts.get_user(user.id) == user
    assert accounts.get_by_username("ALICE") == user
    with runtime.db.session() as session:
        stored = session.scalar(select(UserRow.password_hash).where(UserRow.id == user.id))
    assert stored is not None
    assert stored.startswith("$argon2id$")
    assert "correct horse" not in stored
    assert verify_password(stored, "correct horse battery")


def test_usernames_are_unique_case_insensitively(accounts: AccountService) -> None:
    accounts.create_user(INTERNAL, "alice")
    with pytest.raises(Conflict, match="already taken"):
        accounts.create_user(INTERNAL, "Alice")


def test_emails_are_unique_across_accounts(accounts: AccountService) -> None:
    alice = accounts.create_user(INTERNAL, "alice", email="Alice@Example.com")
    with pytest.raises(Conflict, match="already in use"):
        accounts.create_user(INTERNAL, "bob", email="alice@example.COM")
    bob = accounts.create_user(INTERNAL, "bob")
    with pytest.raises(Conflict):
        accounts.add_email(INTERNAL, bob.id, "ALICE@example.com")
    assert [e.email for e in accounts.list_emails(INTERNAL, alice.id)] == ["alice@example.com"]


def test_invalid_usernames_and_emails_are_rejected_with_the_rule(accounts: AccountService) -> None:
    with pytest.raises(InvalidInput, match="must not start"):
        accounts.create_user(INTERNAL, "-bob")
    with pytest.raises(InvalidInput, match="e-mail"):
        accounts.create_user(INTERNAL, "bob", email="not-an-address")
    assert accounts.count_users() == 0


def test_password_policy_follows_site_config(runtime: Runtime, accounts: AccountService) -> None:
    with pytest.raises(InvalidInput, match="at least 12 characters"):
        accounts.create_user(INTERNAL, "alice", password="short")
    set_site_config(runtime, {"auth.minPasswordLength": 4})
    assert accounts.create_user(INTERNAL, "alice", password="four").has_password


def test_first_user_who_signs_up_becomes_site_admin_others_do_not(runtime: Runtime, accounts: AccountService) -> None:
    set_site_config(runtime, {"auth.providers": [{"type": "builtin", "allowSignup": True}]})
    first = accounts.create_user(ANONYMOUS, "first", password="a long enough password")
    second = accounts.create_user(ANONYMOUS, "second", password="a long enough password")
    assert first.site_admin
    assert not second.site_admin


def test_internal_callers_get_exactly_what_they_ask_for(accounts: AccountService) -> None:
    assert not accounts.create_user(INTERNAL, "plain").site_admin


def test_non_admins_cannot_create_admins_or_service_accounts(runtime: Runtime, accounts: AccountService) -> None:
    make_user(runtime, "root", site_admin=True)
    bob = actor_of_user(runtime, make_user(runtime, "bob"))
    with pytest.raises(PermissionDenied):
        accounts.create_user(bob, "mallory", site_admin=True)
    with pytest.raises(PermissionDenied):
        accounts.create_user(bob, "robot", service_account=True)


def test_service_accounts_have_no_password(accounts: AccountService) -> None:
    with pytest.raises(InvalidInput, match="service accounts cannot have a password"):
        accounts.create_user(INTERNAL, "ci", service_account=True, password="a long enough password")
    robot = accounts.create_user(INTERNAL, "ci", service_account=True)
    assert robot.service_account
    assert not robot.has_password
    with pytest.raises(InvalidInput):
        accounts.set_password(INTERNAL, robot.id, "a long enough password")
    with pytest.raises(InvalidInput, match="cannot be a site admin"):
        accounts.set_site_admin(INTERNAL, robot.id, True)


def test_last_site_admin_cannot_be_deleted_or_demoted(runtime: Runtime, accounts: AccountService) -> None:
    root = make_user(runtime, "root", site_admin=True)
    root_actor = actor_of_user(runtime, root)
    with pytest.raises(Conflict, match="last site admin"):
        accounts.delete_user(root_actor, root.id)
    with pytest.raises(Conflict, match="last site admin"):
        accounts.set_site_admin(root_actor, root.id, False)  # self-demotion of the only admin
    other = make_user(runtime, "other", site_admin=True)
    assert not accounts.set_site_admin(root_actor, root.id, False).site_admin  # now allowed: `other` remains
    with pytest.raises(Conflict, match="last site admin"):
        accounts.delete_user(INTERNAL, other.id)


def test_demoted_admin_loses_admin_rights_at_once(runtime: Runtime, accounts: AccountService) -> None:
    root = make_user(runtime, "root", site_admin=True)
    make_user(runtime, "other", site_admin=True)
    accounts.set_site_admin(INTERNAL, root.id, False)
    assert not accounts.actor_for(accounts.get_user(root.id), via="session").site_admin


def test_only_admins_change_others(runtime: Runtime, accounts: AccountService) -> None:
    alice = make_user(runtime, "alice")
    bob = make_user(runtime, "bob")
    bob_actor = actor_of_user(runtime, bob)
    with pytest.raises(PermissionDenied):
        accounts.delete_user(bob_actor, alice.id)
    with pytest.raises(PermissionDenied):
        accounts.set_site_admin(bob_actor, bob.id, True)
    with pytest.raises(PermissionDenied):
        accounts.set_password(bob_actor, alice.id, "a long enough password")
    with pytest.raises(PermissionDenied):
        accounts.list_emails(bob_actor, alice.id)
    with pytest.raises(PermissionDenied):
        accounts.add_email(bob_actor, bob.id, "bob@example.com", verified=True)
    accounts.set_password(bob_actor, bob.id, "a long enough password")  # oneself: allowed


def test_deleting_a_user_removes_it(runtime: Runtime, accounts: AccountService) -> None:
    alice = make_user(runtime, "alice", email="alice@example.com")
    accounts.delete_user(INTERNAL, alice.id)
    with pytest.raises(NotFound):
        accounts.get_user(alice.id)
    assert accounts.find_by_verified_email("alice@example.com") is None
    make_user(runtime, "alice", email="alice@example.com")  # name and address are free again


def test_verified_email_lookup_ignores_unverified_addresses(runtime: Runtime, accounts: AccountService) -> None:
    alice = make_user(runtime, "alice")
    accounts.add_email(INTERNAL, alice.id, "a@example.com")
    assert accounts.find_by_verified_email("a@example.com") is None
    accounts.set_email_verified(INTERNAL, alice.id, "A@example.com", True)
    assert accounts.find_by_verified_email("a@example.com") == accounts.get_user(alice.id)


def test_anonymous_cannot_list_users(accounts: AccountService) -> None:
    with pytest.raises(PermissionDenied):
        accounts.list_users(ANONYMOUS)


def test_rename_validates_and_keeps_names_unique(runtime: Runtime, accounts: AccountService) -> None:
    alice = make_user(runtime, "alice")
    make_user(runtime, "bob")
    me = actor_of_user(runtime, alice)
    assert accounts.set_username(me, alice.id, "Alice").username == "Alice"  # a change of case is fine
    with pytest.raises(Conflict):
        accounts.set_username(me, alice.id, "BOB")
    with pytest.raises(InvalidInput, match="must not end with"):
        accounts.set_username(me, alice.id, "alice.")
    with pytest.raises(PermissionDenied):
        accounts.set_username(actor_of_user(runtime, accounts.get_by_username("bob")), alice.id, "x")
    assert accounts.set_username(me, alice.id, "ally").username == "ally"
    assert accounts.find_by_username("alice") is None


def test_a_new_site_config_refuses_sign_up_after_the_first_account(accounts: AccountService) -> None:
    # The defaults, untouched: the first account of an empty instance may still be made (first run), no other.
    first = accounts.create_user(ANONYMOUS, "first", password="a long enough password")
    assert first.site_admin
    with pytest.raises(PermissionDenied, match="sign-up is disabled"):
        accounts.create_user(ANONYMOUS, "second", password="a long enough password")
