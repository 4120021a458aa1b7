"""Roles and their permissions: the system roles `User` and `Site Administrator`, and custom roles.

`User` applies to every user without being stored per user; `Site Administrator` applies to site admins
and implies every permission. Custom roles are assigned explicitly. Checks read the database every time,
so a change takes effect on the next request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Self

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from codewell.accounts.audit import AuditService
from codewell.accounts.models import RolePermissionRow, RoleRow, UserRoleRow, UserRow
from codewell.accounts.permissions import (
    PERMISSIONS,
    SITE_ADMIN_ROLE,
    SYSTEM_ROLES,
    USER_ROLE,
    USER_ROLE_DEFAULTS,
    check_permission_name,
)
from codewell.authz import Action, ensure
from codewell.core.actors import Actor
from codewell.core.errors import Conflict, InvalidInput, NotFound

if TYPE_CHECKING:
    from codewell.runtime import Runtime

MAX_ROLE_NAME = 100


@dataclass(frozen=True, slots=True)
class Role:
    id: int
    name: str
    system: bool
    permissions: tuple[str, ...]

    def as_json(self) -> dict[str, object]:
        return {"id": self.id, "name": self.name, "system": self.system, "permissions": list(self.permissions)}


def _check_role_name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > MAX_ROLE_NAME:
        raise InvalidInput(f"a role name must be 1 to {MAX_ROLE_NAME} characters")
    return name


class RoleService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.audit = runtime.get(AuditService)
        self._system_roles_ready = False
        self._change_listeners: list[Callable[[], None]] = []

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    def add_change_listener(self, listener: Callable[[], None]) -> None:
        """Call `listener()` after every role, permission or assignment change made in this process
        (authorization drops its cached role permissions, so a change applies on the next request)."""
        if listener not in self._change_listeners:
            self._change_listeners.append(listener)

    def _record_change(self, action: str, *, actor: Actor, details: dict[str, object]) -> None:
        for listener in list(self._change_listeners):
            listener()
        self.audit.record("accounts.role", action, actor=actor, details=details)

    # -- queries ------------------------------------------------------------------------------------------
    def ensure_system_roles(self) -> None:
        """Create `User` (with its default permissions) and `Site Administrator` when missing; idempotent."""
        if self._system_roles_ready:
            return
        for name in SYSTEM_ROLES:
            try:
                with self.runtime.db.session() as session:
                    if session.scalar(select(RoleRow.id).where(RoleRow.name == name)) is not None:
                        continue
                    role = RoleRow(name=name, system=True)
                    session.add(role)
                    session.flush()
                    if name == USER_ROLE:
                        session.add_all(RolePermissionRow(role_id=role.id, permission=p) for p in USER_ROLE_DEFAULTS)
            except IntegrityError:  # created concurrently by another process
                continue
        self._system_roles_ready = True

    def list_roles(self, actor: Actor) -> list[Role]:
        """Every role with its permissions, system roles first; any signed-in user may read them."""
        ensure(actor, Action.ROLES_READ)
        self.ensure_system_roles()
        with self.runtime.db.session() as session:
            rows = session.scalars(select(RoleRow).order_by(RoleRow.system.desc(), RoleRow.name)).all()
            return [self._role(session, row) for row in rows]

    def get_role(self, actor: Actor, name: str) -> Role:
        ensure(actor, Action.ROLES_READ)
        self.ensure_system_roles()
        with self.runtime.db.session() as session:
            return self._role(session, self._row(session, name))

    def permissions_of(self, user_id: int, *, site_admin: bool) -> frozenset[str]:
        """Every permission the user holds through `User`, their custom roles, and (admins) all of them."""
        self.ensure_system_roles()
        with self.runtime.db.session() as session:
            role_ids = select(UserRoleRow.role_id).where(UserRoleRow.user_id == user_id)
            query = (
                select(RolePermissionRow.permission)
                .join(RoleRow, RoleRow.id == RolePermissionRow.role_id)
                .where((RoleRow.name == USER_ROLE) | RoleRow.id.in_(role_ids))
            )
            held = frozenset(session.scalars(query))
        if site_admin:
            held |= frozenset(PERMISSIONS)
        return held

    def roles_of_user(self, user_id: int, *, site_admin: bool) -> list[str]:
        """Names of the roles a user holds: `User`, `Site Administrator` for admins, then custom roles."""
        with self.runtime.db.session() as session:
            query = (
                select(RoleRow.name)
                .join(UserRoleRow, UserRoleRow.role_id == RoleRow.id)
                .where(UserRoleRow.user_id == user_id)
                .order_by(RoleRow.name)
            )
            custom = list(session.scalars(query))
        return [USER_ROLE, *([SITE_ADMIN_ROLE] if site_admin else []), *custom]

    def users_with_role(self, actor: Actor, name: str) -> list[str]:
        """Usernames explicitly assigned a custom role (system roles follow from user flags)."""
        ensure(actor, Action.ROLE_MEMBERS_READ)
        self.ensure_system_roles()
        with self.runtime.db.session() as session:
            role = self._row(session, name)
            query = (
                select(UserRow.username)
                .join(UserRoleRow, UserRoleRow.user_id == UserRow.id)
                .where(UserRoleRow.role_id == role.id)
                .order_by(UserRow.username)
            )
            return list(session.scalars(query))

    # -- changes ------------------------------------------------------------------------------------------
    def create_role(self, actor: Actor, name: str, permissions: tuple[str, ...] = ()) -> Role:
        """Create a custom role; Conflict when the name is taken (case-insensitively)."""
        ensure(actor, Action.ROLES_MANAGE)
        name = _check_role_name(name)
        perms = sorted({check_permission_name(p) for p in permissions})
        self.ensure_system_roles()
        with self.runtime.db.session() as session:
            if session.scalar(select(RoleRow.id).where(func.lower(RoleRow.name) == name.lower())) is not None:
                raise Conflict(f"a role named {name!r} already exists", hint="choose another name")
            row = RoleRow(name=name, system=False)
            session.add(row)
            session.flush()
            session.add_all(RolePermissionRow(role_id=row.id, permission=p) for p in perms)
            session.flush()
            role = self._role(session, row)
        self._record_change("created", actor=actor, details={"role": name, "permissions": perms})
        return role

    def rename_role(self, actor: Actor, name: str, new_name: str) -> Role:
        ensure(actor, Action.ROLES_MANAGE)
        self.ensure_system_roles()
        new_name = _check_role_name(new_name)
        with self.runtime.db.session() as session:
            row = self._row(session, name)
            if row.system:
                raise InvalidInput(f"the system role {row.name!r} cannot be renamed")
            clash = session.scalar(
                select(RoleRow.id).where(func.lower(RoleRow.name) == new_name.lower(), RoleRow.id != row.id)
            )
            if clash is not None:
                raise Conflict(f"a role named {new_name!r} already exists", hint="choose another name")
            row.name = new_name
            session.flush()
            role = self._role(session, row)
        self._record_change("renamed", actor=actor, details={"role": name, "newName": new_name})
        return role

    def delete_role(self, actor: Actor, name: str) -> None:
        """Delete a custom role; its assignments go with it. System roles cannot be deleted."""
        ensure(actor, Action.ROLES_MANAGE)
        self.ensure_system_roles()
        with self.runtime.db.session() as session:
            row = self._row(session, name)
            if row.system:
                raise InvalidInput(f"the system role {row.name!r} cannot be deleted")
            session.delete(row)
        self._record_change("deleted", actor=actor, details={"role": name})

    def set_permission(self, actor: Actor, name: str, permission: str, *, granted: bool) -> Role:
        """Add (`granted=True`) or remove a permission from any role, `User` included; idempotent."""
        ensure(actor, Action.ROLES_MANAGE)
        check_permission_name(permission)
        self.ensure_system_roles()
        with self.runtime.db.session() as session:
            row = self._row(session, name)
            if row.name == SITE_ADMIN_ROLE:
                raise InvalidInput("the Site Administrator role always holds every permission")
            exists = session.get(RolePermissionRow, (row.id, permission)) is not None
            if granted and not exists:
                session.add(RolePermissionRow(role_id=row.id, permission=permission))
            elif not granted and exists:
                session.execute(
                    delete(RolePermissionRow).where(
                        RolePermissionRow.role_id == row.id, RolePermissionRow.permission == permission
                    )
                )
            session.flush()
            role = self._role(session, row)
        action = "permissionAdded" if granted else "permissionRemoved"
        self._record_change(action, actor=actor, details={"role": row.name, "permission": permission})
        return role

    def set_assignment(self, actor: Actor, name: str, user_id: int, *, assigned: bool) -> None:
        """Assign or unassign a custom role to a user; idempotent. System roles follow from user flags."""
        ensure(actor, Action.ROLES_MANAGE)
        self.ensure_system_roles()
        with self.runtime.db.session() as session:
            row = self._row(session, name)
            if row.system:
                hint = "every user holds User; use `codewell users set-admin` for Site Administrator"
                raise InvalidInput(f"the system role {row.name!r} cannot be assigned explicitly", hint=hint)
            user = session.get(UserRow, user_id)
            if user is None:
                raise NotFound(f"user {user_id} not found")
            exists = session.get(UserRoleRow, (user_id, row.id)) is not None
            if assigned and not exists:
                session.add(UserRoleRow(user_id=user_id, role_id=row.id))
            elif not assigned and exists:
                session.execute(
                    delete(UserRoleRow).where(UserRoleRow.user_id == user_id, UserRoleRow.role_id == row.id)
                )
            username = user.username
        action = "assigned" if assigned else "unassigned"
        self._record_change(action, actor=actor, details={"role": row.name, "user": username})

    # -- helpers ------------------------------------------------------------------------------------------
    @staticmethod
    def _row(session: Session, name: str) -> RoleRow:
        row = session.scalar(select(RoleRow).where(func.lower(RoleRow.name) == name.strip().lower()))
        if row is None:
            raise NotFound(f"role {name!r} not found", hint="`codewell roles list` shows the roles")
        return row

    @staticmethod
    def _role(session: Session, row: RoleRow) -> Role:
        perms = session.scalars(
            select(RolePermissionRow.permission)
            .where(RolePermissionRow.role_id == row.id)
            .order_by(RolePermissionRow.permission)
        )
        return Role(id=row.id, name=row.name, system=row.system, permissions=tuple(perms))
