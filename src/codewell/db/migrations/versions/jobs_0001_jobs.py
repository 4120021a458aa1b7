"""Jobs: the durable queue of background work and the processes that run it.

Revision ID: jobs_0001
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from codewell.db.base import UTCDateTime

revision = "jobs_0001"
down_revision = "0001"
branch_labels = ("jobs",)
depends_on = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("resource", sa.String(length=255), nullable=False),
        sa.Column("key", sa.String(length=320), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("cause", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("run_after", UTCDateTime(), nullable=False),
        sa.Column("lease_owner", sa.String(length=100), nullable=True),
        sa.Column("lease_until", UTCDateTime(), nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("progress_done", sa.Integer(), nullable=False),
        sa.Column("progress_total", sa.Integer(), nullable=True),
        sa.Column("progress_message", sa.String(length=500), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=True),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
    )
    op.create_index("ix_jobs_claim_order", "jobs", ["state", "priority", "run_after", "id"])
    op.create_index("ix_jobs_resource_state", "jobs", ["resource", "state"])
    op.create_index(
        "uq_jobs_queued_kind_key",
        "jobs",
        ["kind", "key"],
        unique=True,
        sqlite_where=sa.text("state = 'queued'"),
        postgresql_where=sa.text("state = 'queued'"),
    )
    op.create_index(
        "uq_jobs_running_key",
        "jobs",
        ["key"],
        unique=True,
        sqlite_where=sa.text("state = 'running'"),
        postgresql_where=sa.text("state = 'running'"),
    )
    op.create_table(
        "job_workers",
        sa.Column("owner", sa.String(length=100), nullable=False),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("kinds", sa.Text(), nullable=False),
        sa.Column("concurrency", sa.Integer(), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("heartbeat_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("owner", name=op.f("pk_job_workers")),
    )


def downgrade() -> None:
    op.drop_table("job_workers")
    op.drop_table("jobs")
