"""Accounts: every change of users, access tokens and roles bumps the `accounts` cache epoch in its transaction
(codewell/db/epochs.py): processes cache token owners and role permissions while it stays the same.

A token's last use and a user's sign-in bookkeeping (failures, lockout) change no access answer and bump nothing.

Revision ID: accounts_0003
Revises: accounts_0002
"""

from __future__ import annotations

from alembic import op

from codewell.db.epochs import ACCOUNTS, create_triggers, drop_triggers

revision = "accounts_0003"
down_revision = "accounts_0002"
branch_labels = None
depends_on = "0002"

WATCHED: dict[str, tuple[str, ...] | None] = {
    "users": ("id", "username", "site_admin", "service_account"),
    "access_tokens": ("id", "user_id", "token_sha256", "scopes", "expires_at", "deleted_at"),
    "roles": None,
    "role_permissions": None,
    "user_roles": None,
}


def upgrade() -> None:
    create_triggers(op, ACCOUNTS, WATCHED)


def downgrade() -> None:
    drop_triggers(op, WATCHED)
