"""Tables owned by agents: deep search conversations, their questions, and the jobs that answer them.

Only the agents capability writes them (docs/agents.md). A conversation belongs to one user (deleted with
them); each question holds its answer (Markdown without the sources), its sources (JSON list of pinned
citations), its stats and, when it failed, an error code and message. A job row per question is what
survives a restart: a worker claims it with a lease (`lease_owner`, `lease_expires_at`) and renews the
lease while it works; an expired lease means the worker died, and another worker takes the job over.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from codewell.db.base import Base, UTCDateTime, utcnow

# Question states: pending (queued) → processing → completed | failed | cancelled.
PENDING, PROCESSING, COMPLETED, FAILED, CANCELLED = "pending", "processing", "completed", "failed", "cancelled"
OPEN_STATES = (PENDING, PROCESSING)
# Job states: queued (waiting for a worker), running (leased), done.
QUEUED, RUNNING, DONE = "queued", "running", "done"


class ConversationRow(Base):
    __tablename__ = "deepsearch_conversations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    owner_id: Mapped[int] = mapped_column(Integer, ForeignKey("users.id", ondelete="CASCADE"), index=True)
    title: Mapped[str] = mapped_column(String(200))
    # The conversation's address (`/deepsearch/<read_token>`), readable by its owner.
    read_token: Mapped[str] = mapped_column(String(36), unique=True)
    # The shared address (`/deepsearch/shared/<share_token>`), None while not shared.
    share_token: Mapped[str | None] = mapped_column(String(36), unique=True, nullable=True)
    # The position of the question being answered, None when none is: one open question at a time.
    active_position: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class QuestionRow(Base):
    __tablename__ = "deepsearch_questions"
    __table_args__ = (UniqueConstraint("conversation_id", "position"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    conversation_id: Mapped[int] = mapped_column(Integer, ForeignKey("deepsearch_conversations.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    question: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(20), default=PENDING)
    answer: Mapped[str] = mapped_column(Text, default="")
    # JSON list of {repo, commit, path, startLine, endLine, note}.
    sources: Mapped[str] = mapped_column(Text, default="[]")
    notice: Mapped[str] = mapped_column(Text, default="")
    author: Mapped[str] = mapped_column(String(20), default="")
    model: Mapped[str | None] = mapped_column(String(200), nullable=True)
    elapsed_ms: Mapped[int] = mapped_column(Integer, default=0)
    tool_calls: Mapped[int] = mapped_column(Integer, default=0)
    input_tokens: Mapped[int] = mapped_column(Integer, default=0)
    output_tokens: Mapped[int] = mapped_column(Integer, default=0)
    credits: Mapped[int] = mapped_column(Integer, default=0)
    # token_limit, quota_exceeded, not_licensed, provider, interrupted, account_gone, internal ("" when none).
    error_code: Mapped[str] = mapped_column(String(40), default="")
    error_message: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class JobRow(Base):
    __tablename__ = "deepsearch_jobs"
    __table_args__ = (Index("ix_deepsearch_jobs_state_run_after", "state", "run_after"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    question_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("deepsearch_questions.id", ondelete="CASCADE"), unique=True
    )
    state: Mapped[str] = mapped_column(String(20), default=QUEUED)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    lease_owner: Mapped[str | None] = mapped_column(String(64), nullable=True)
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    run_after: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
