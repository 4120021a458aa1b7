"""Roles and permissions: system roles, custom roles, and the spec's MCP#ACCESS restriction recipe."""

from __future__ import annotations

import pytest

from codewell.accounts.audit import AuditService
from codewell.accounts.permissions import MCP_ACCESS
from codewell.accounts.roles import RoleService
from codewell.accounts.service import AccountService
from codewell.core.actors import ANONYMOUS, INTERNAL
from codewell.core.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from codewell.runtime import Runtime
from tests.factories import actor_of_user, make_user

pytestmark = pytest.mark.database


@pytest.fixture
def roles(runtime: Runtime) -> RoleService:
    return runtime.get(RoleService)


def test_system_roles_exist_and_user_holds_mcp_access_by_default(runtime: Runtime, roles: RoleService) -> None:
    listed = {r.name: r for r in roles.list_roles(INTERNAL)}
    assert listed["User"].system
    assert listed["User"].permissions == (MCP_ACCESS,)
    assert listed["Site Administrator"].system
    alice = actor_of_user(runtime, make_user(runtime, "alice"))
    assert runtime.get(AccountService).has_permission(alice, MCP_ACCESS)
    assert not runtime.get(AccountService).has_permission(ANONYMOUS, MCP_ACCESS)
    assert runtime.get(AccountService).has_permission(INTERNAL, MCP_ACCESS)


def test_mcp_access_restriction_recipe(runtime: Runtime, roles: RoleService) -> None:
    """Remove MCP#ACCESS from User, create a role holding it, assign it to chosen users: effective at once."""
    accounts = runtime.get(AccountService)
    root = actor_of_user(runtime, make_user(runtime, "root", site_admin=True))
    alice = actor_of_user(runtime, make_user(runtime, "alice"))
    bob = actor_of_user(runtime, make_user(runtime, "bob"))

    roles.set_permission(root, "User", MCP_ACCESS, granted=False)
    assert not accounts.has_permission(alice, MCP_ACCESS)
    assert not accounts.has_permission(bob, MCP_ACCESS)
    assert accounts.has_permission(root, MCP_ACCESS)  # Site Administrator implies every permission

    roles.create_role(root, "MCP users", (MCP_ACCESS,))
    assert alice.user_id is not None
    roles.set_assignment(root, "MCP users", alice.user_id, assigned=True)
    assert accounts.has_permission(alice, MCP_ACCESS)
    assert not accounts.has_permission(bob, MCP_ACCESS)
    assert roles.users_with_role(root, "mcp users") == ["alice"]
    assert roles.roles_of_user(alice.user_id, site_admin=False) == ["User", "MCP users"]

    roles.set_assignment(root, "MCP users", alice.user_id, assigned=False)
    assert not accounts.has_permission(alice, MCP_ACCESS)
    roles.set_permission(root, "User", MCP_ACCESS, granted=True)
    assert accounts.has_permission(bob, MCP_ACCESS)


def test_custom_role_life_cycle(runtime: Runtime, roles: RoleService) -> None:
    root = actor_of_user(runtime, make_user(runtime, "root", site_admin=True))
    alice = make_user(runtime, "alice")
    created = roles.create_role(root, "Agents")
    assert created.permissions == ()
    with pytest.raises(Conflict):
        roles.create_role(root, "agents")
    assert roles.set_permission(root, "Agents", MCP_ACCESS, granted=True).permissions == (MCP_ACCESS,)
    assert roles.set_permission(root, "Agents", MCP_ACCESS, granted=True).permissions == (MCP_ACCESS,)
    renamed = roles.rename_role(root, "Agents", "Automation")
    assert renamed.name == "Automation"
    roles.set_assignment(root, "Automation", alice.id, assigned=True)
    roles.delete_role(root, "Automation")
    with pytest.raises(NotFound):
        roles.get_role(root, "Automation")
    assert roles.roles_of_user(alice.id, site_admin=False) == ["User"]


def test_system_roles_are_protected(runtime: Runtime, roles: RoleService) -> None:
    root = actor_of_user(runtime, make_user(runtime, "root", site_admin=True))
    alice = make_user(runtime, "alice")
    with pytest.raises(InvalidInput):
        roles.delete_role(root, "User")
    with pytest.raises(InvalidInput):
        roles.rename_role(root, "Site Administrator", "Admins")
    with pytest.raises(InvalidInput):
        roles.set_assignment(root, "Site Administrator", alice.id, assigned=True)
    with pytest.raises(InvalidInput, match="always holds every permission"):
        roles.set_permission(root, "Site Administrator", MCP_ACCESS, granted=False)


def test_bad_names_and_permissions(runtime: Runtime, roles: RoleService) -> None:
    root = actor_of_user(runtime, make_user(runtime, "root", site_admin=True))
    with pytest.raises(InvalidInput, match="NAMESPACE#ACTION"):
        roles.create_role(root, "x", ("mcp-access",))
    with pytest.raises(InvalidInput, match="unknown permission"):
        roles.create_role(root, "x", ("REPO#DELETE",))
    with pytest.raises(InvalidInput, match="1 to 100"):
        roles.create_role(root, " ")
    with pytest.raises(NotFound):
        roles.set_permission(root, "missing", MCP_ACCESS, granted=True)


def test_only_site_admins_change_roles(runtime: Runtime, roles: RoleService) -> None:
    alice = actor_of_user(runtime, make_user(runtime, "alice"))
    assert alice.user_id is not None
    with pytest.raises(PermissionDenied):
        roles.create_role(alice, "Mine", (MCP_ACCESS,))
    with pytest.raises(PermissionDenied):
        roles.set_permission(alice, "User", MCP_ACCESS, granted=False)
    with pytest.raises(PermissionDenied):
        roles.set_assignment(alice, "User", alice.user_id, assigned=True)
    with pytest.raises(PermissionDenied):
        roles.list_roles(ANONYMOUS)


def test_role_changes_are_audited(runtime: Runtime, roles: RoleService) -> None:

    root = actor_of_user(runtime, make_user(runtime, "root", site_admin=True))
    roles.create_role(root, "Agents", (MCP_ACCESS,))
    roles.set_permission(root, "User", MCP_ACCESS, granted=False)
    entries = runtime.get(AuditService).list(root, entity="accounts.role")
    assert [(e.action, e.actor_username, e.details["role"]) for e in entries] == [
        ("permissionRemoved", "root", "User"),
        ("created", "root", "Agents"),
    ]
