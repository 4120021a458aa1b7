"""Accounts' answer to `codewell.authz.RolePermissions`: the role permissions a user holds right now."""

from __future__ import annotations

from collections.abc import Callable

from codewell.accounts.roles import RoleService
from codewell.accounts.service import AccountService
from codewell.authz import RolePermissions
from codewell.core.errors import NotFound
from codewell.runtime import Runtime


class AccountRolePermissions:
    """Reads the user (flags now, so a demotion applies at once) and their roles' permissions."""

    def __init__(self, runtime: Runtime) -> None:
        self.accounts = runtime.get(AccountService)
        self.roles = runtime.get(RoleService)

    def permissions_of(self, user_id: int) -> frozenset[str]:
        try:
            user = self.accounts.get_user(user_id)
        except NotFound:  # deleted since the credential was read: holds nothing
            return frozenset()
        return self.roles.permissions_of(user.id, site_admin=user.site_admin)

    def add_change_listener(self, listener: Callable[[], None]) -> None:
        self.roles.add_change_listener(listener)


def setup(runtime: Runtime) -> None:
    """Give authorization its role-permission lookup (idempotent: a second call replaces the first)."""
    runtime.provide(RolePermissions, AccountRolePermissions(runtime))
