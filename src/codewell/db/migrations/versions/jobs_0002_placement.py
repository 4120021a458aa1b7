"""Jobs: placement on searcher replicas (a job's target) and the replicas' addresses.

Revision ID: jobs_0002
Revises: jobs_0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "jobs_0002"
down_revision = "jobs_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("target", sa.String(length=100), nullable=False, server_default=""))
    # The claim walks its own target's queue: untargeted runners never step over thousands of jobs placed on
    # searcher replicas, nor a replica over the others'.
    op.drop_index("ix_jobs_claim_order", table_name="jobs")
    op.create_index("ix_jobs_claim_order", "jobs", ["state", "target", "priority", "run_after", "id"])
    with op.batch_alter_table("job_workers") as batch:
        batch.add_column(sa.Column("address", sa.String(length=255), nullable=False, server_default=""))
        batch.add_column(sa.Column("draining", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("job_workers") as batch:
        batch.drop_column("draining")
        batch.drop_column("address")
    op.drop_index("ix_jobs_claim_order", table_name="jobs")
    op.create_index("ix_jobs_claim_order", "jobs", ["state", "priority", "run_after", "id"])
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("target")
