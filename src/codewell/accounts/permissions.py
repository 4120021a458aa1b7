"""Permission names (`NAMESPACE#ACTION`) and the system roles, declared once."""

from __future__ import annotations

import re

from codewell.core.errors import InvalidInput

USER_ROLE = "User"
SITE_ADMIN_ROLE = "Site Administrator"
SYSTEM_ROLES = (USER_ROLE, SITE_ADMIN_ROLE)

MCP_ACCESS = "MCP#ACCESS"

# Every permission a role may hold, with what it allows. Capabilities that add a permission add a line here.
PERMISSIONS: dict[str, str] = {
    MCP_ACCESS: "use the MCP tool server (/.api/mcp)",
}
# What the `User` role holds on a new instance (the spec: MCP#ACCESS is granted to User by default).
USER_ROLE_DEFAULTS = (MCP_ACCESS,)

_PERMISSION_NAME = re.compile(r"^[A-Z][A-Z0-9_]*#[A-Z][A-Z0-9_]*$")


def check_permission_name(name: str) -> str:
    """Return `name` when it is a known permission; raise InvalidInput listing the known ones otherwise."""
    if not _PERMISSION_NAME.match(name):
        raise InvalidInput(f"invalid permission name {name!r}", hint="permissions are named NAMESPACE#ACTION")
    if name not in PERMISSIONS:
        raise InvalidInput(f"unknown permission {name!r}", hint=f"known permissions: {', '.join(sorted(PERMISSIONS))}")
    return name
