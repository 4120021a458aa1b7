"""Agents: deep search conversations, questions and jobs.

Revision ID: agents_0001
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from codewell.db.base import UTCDateTime

revision = "agents_0001"
down_revision = "0001"
branch_labels = ("agents",)
depends_on = ("accounts_0001",)


def upgrade() -> None:
    op.create_table(
        "deepsearch_conversations",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=False),
        sa.Column("title", sa.String(length=200), nullable=False),
        sa.Column("read_token", sa.String(length=36), nullable=False),
        sa.Column("share_token", sa.String(length=36), nullable=True),
        sa.Column("active_position", sa.Integer(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name=op.f("fk_deepsearch_conversations_owner_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deepsearch_conversations")),
        sa.UniqueConstraint("read_token", name=op.f("uq_deepsearch_conversations_read_token")),
        sa.UniqueConstraint("share_token", name=op.f("uq_deepsearch_conversations_share_token")),
    )
    op.create_index(
        op.f("ix_deepsearch_conversations_owner_id"), "deepsearch_conversations", ["owner_id"], unique=False
    )
    op.create_table(
        "deepsearch_questions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("conversation_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("answer", sa.Text(), nullable=False),
        sa.Column("sources", sa.Text(), nullable=False),
        sa.Column("notice", sa.Text(), nullable=False),
        sa.Column("author", sa.String(length=20), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=True),
        sa.Column("elapsed_ms", sa.Integer(), nullable=False),
        sa.Column("tool_calls", sa.Integer(), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("credits", sa.Integer(), nullable=False),
        sa.Column("error_code", sa.String(length=40), nullable=False),
        sa.Column("error_message", sa.Text(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["deepsearch_conversations.id"],
            name=op.f("fk_deepsearch_questions_conversation_id_deepsearch_conversations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deepsearch_questions")),
        sa.UniqueConstraint("conversation_id", "position", name=op.f("uq_deepsearch_questions_conversation_id")),
    )
    op.create_table(
        "deepsearch_jobs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("question_id", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("lease_owner", sa.String(length=64), nullable=True),
        sa.Column("lease_expires_at", UTCDateTime(), nullable=True),
        sa.Column("run_after", UTCDateTime(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["question_id"],
            ["deepsearch_questions.id"],
            name=op.f("fk_deepsearch_jobs_question_id_deepsearch_questions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deepsearch_jobs")),
        sa.UniqueConstraint("question_id", name=op.f("uq_deepsearch_jobs_question_id")),
    )
    op.create_index("ix_deepsearch_jobs_state_run_after", "deepsearch_jobs", ["state", "run_after"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_deepsearch_jobs_state_run_after", table_name="deepsearch_jobs")
    op.drop_table("deepsearch_jobs")
    op.drop_table("deepsearch_questions")
    op.drop_index(op.f("ix_deepsearch_conversations_owner_id"), table_name="deepsearch_conversations")
    op.drop_table("deepsearch_conversations")
