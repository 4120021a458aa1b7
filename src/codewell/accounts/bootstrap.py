"""First-run step: on an instance without users, create the site admin `admin` and print its credentials once."""

from __future__ import annotations

import secrets

from codewell.accounts.service import AccountService, builtin_signup_allowed
from codewell.accounts.tokens import SCOPE_MCP, SCOPE_USER_ALL, TokenService
from codewell.core.actors import INTERNAL
from codewell.core.errors import Conflict
from codewell.runtime import Runtime

ADMIN_USERNAME = "admin"


def first_admin_step(runtime: Runtime, demo: bool) -> list[str]:
    """Create `admin` with a random password and an access token when no user exists; else print nothing.

    The lines are the only place the password and token ever appear (only hashes are stored).
    """
    accounts = runtime.get(AccountService)
    if accounts.count_users() > 0:
        return []
    password = secrets.token_urlsafe(18)
    try:
        user = accounts.create_user(INTERNAL, ADMIN_USERNAME, password=password, site_admin=True)
    except Conflict:
        # Another process starting on the same database at the same moment made it (and printed its credentials).
        return []
    raw, _ = runtime.get(TokenService).create_token(
        INTERNAL, user.id, "created at first start", (SCOPE_USER_ALL, SCOPE_MCP), None
    )
    lines = [
        f"sign in as {ADMIN_USERNAME} with password {password} (shown once; change it or keep it safe)",
        f"access token: {raw} (shown once; scopes user:all, mcp)",
    ]
    if not builtin_signup_allowed(runtime):
        # Sign-up is off in a new site config (issue #33): say how people get in.
        lines.append(
            "sign-up is off: add users with `codewell users create <name>` or on /site-admin/users, or let anyone"
            ' sign up with {"type": "builtin", "allowSignup": true} in auth.providers of the site config'
        )
    return lines
