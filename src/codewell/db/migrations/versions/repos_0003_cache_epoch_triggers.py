"""Repos: every repository added, removed or made private or public, and every grant, bumps the `repos` cache
epoch in its transaction (codewell/db/epochs.py): processes cache each user's readable repositories while it
stays the same. A sync's bookkeeping (state, errors, fetch times) changes no access answer and bumps nothing.

Revision ID: repos_0003
Revises: repos_0002
"""

from __future__ import annotations

from alembic import op

from codewell.db.epochs import REPOS, create_triggers, drop_triggers

revision = "repos_0003"
down_revision = "repos_0002"
branch_labels = None
depends_on = "0002"

WATCHED: dict[str, tuple[str, ...] | None] = {
    "repos": ("id", "private"),
    "repo_permissions": None,
}


def upgrade() -> None:
    create_triggers(op, REPOS, WATCHED)


def downgrade() -> None:
    drop_triggers(op, WATCHED)
