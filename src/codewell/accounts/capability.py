"""The accounts capability: users, e-mails, roles and permissions, access tokens, the audit log."""

from __future__ import annotations

from codewell.accounts import pages, routes
from codewell.accounts.bootstrap import first_admin_step
from codewell.accounts.cli import COMMANDS
from codewell.accounts.role_permissions import setup
from codewell.capability import Capability, templates_of

CAPABILITY = Capability(
    name="accounts",
    setup=setup,
    routes=routes.routes,
    pages=pages.routes,
    commands=COMMANDS,
    bootstrap=[first_admin_step],
    templates=templates_of(__file__),
)
