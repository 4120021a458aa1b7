"""Authorization: one `ensure(actor, action, resource)` for every permission decision of the house.

A kit (imports only core, runtime, config, db): every capability, the HTTP kit and the MCP transport call it.
`actions` names the actions and who may do each, `credentials` what each kind of credential may do,
`decisions` answers (with a per-request cache and the role-permission lookup). docs/security.md.
"""

from __future__ import annotations

from codewell.authz.actions import RULES, Action, IssuedTo, Kind, Resource, Rule, UserRef, Who
from codewell.authz.credentials import (
    CREDENTIAL_ACTIONS,
    SCOPE_ACTIONS,
    Credential,
    credential_actions,
    credential_allows,
    credential_of,
)
from codewell.authz.decisions import RoleCache, RolePermissions, SignInRequired, allowed, ensure, scope

__all__ = [
    "CREDENTIAL_ACTIONS",
    "RULES",
    "SCOPE_ACTIONS",
    "Action",
    "Credential",
    "IssuedTo",
    "Kind",
    "Resource",
    "RoleCache",
    "RolePermissions",
    "Rule",
    "SignInRequired",
    "UserRef",
    "Who",
    "allowed",
    "credential_actions",
    "credential_allows",
    "credential_of",
    "ensure",
    "scope",
]
