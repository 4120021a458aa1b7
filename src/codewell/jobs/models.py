"""Tables owned by the jobs capability: the job queue and the processes that work on it."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, Index, Integer, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from codewell.db.base import Base, UTCDateTime, utcnow

# Job states. `queued` jobs wait for `run_after`; a `running` job whose lease expired is taken over.
QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED = "queued", "running", "succeeded", "failed", "cancelled"
STATES = (QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED)


class JobRow(Base):
    """One unit of background work: what (`kind`, `payload`), for which resource, and how it went."""

    __tablename__ = "jobs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(64))
    # What the job works on ("repo:42", "site"): the unit of de-duplication, cancellation and draining.
    resource: Mapped[str] = mapped_column(String(255))
    # `<lock group>:<resource>`: at most one running job per key (a unique index says so, for every engine).
    key: Mapped[str] = mapped_column(String(320))
    payload: Mapped[str] = mapped_column(Text, default="{}")
    # The event that enqueued it ("repo.synced", "schedule", "person"), shown to operators.
    cause: Mapped[str] = mapped_column(String(64), default="")
    state: Mapped[str] = mapped_column(String(16), default=QUEUED)
    # Lower first: what a person asked for (0) runs before events (50) and scheduled work (100).
    priority: Mapped[int] = mapped_column(Integer, default=50)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, default=5)
    run_after: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    lease_owner: Mapped[str | None] = mapped_column(String(100), default=None)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    # The searcher replica that must run it ("" for any runner): a repository's index jobs run where its
    # shards live (jobs/placement.py).
    target: Mapped[str] = mapped_column(String(100), default="")
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    progress_done: Mapped[int] = mapped_column(Integer, default=0)
    progress_total: Mapped[int | None] = mapped_column(Integer, default=None)
    progress_message: Mapped[str] = mapped_column(String(500), default="")
    last_error: Mapped[str | None] = mapped_column(Text, default=None)
    result: Mapped[str | None] = mapped_column(Text, default=None)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)

    __table_args__ = (
        # The claim walks queued jobs in exactly this order and stops at the first it may run: no sort, and the
        # per-row lock check runs for the few rows it visits, however many jobs wait.
        Index("ix_jobs_claim_order", "state", "target", "priority", "run_after", "id"),
        Index("ix_jobs_resource_state", "resource", "state"),
        # One queued job per kind and key: a newer request supersedes the queued one (ON CONFLICT).
        Index(
            "uq_jobs_queued_kind_key",
            "kind",
            "key",
            unique=True,
            sqlite_where=text("state = 'queued'"),
            postgresql_where=text("state = 'queued'"),
        ),
        # One running job per key, whatever the race between two claimers.
        Index(
            "uq_jobs_running_key",
            "key",
            unique=True,
            sqlite_where=text("state = 'running'"),
            postgresql_where=text("state = 'running'"),
        ),
    )


class JobWorkerRow(Base):
    """A process that runs jobs (`codewell serve`, `codewell worker` or `codewell searcher`), with a heartbeat.

    A searcher's row is its membership of the cluster: its address (where the web tier sends searches) and
    whether it is draining (it keeps answering for what it holds while its repositories move elsewhere).
    """

    __tablename__ = "job_workers"

    owner: Mapped[str] = mapped_column(String(100), primary_key=True)
    role: Mapped[str] = mapped_column(String(20))
    kinds: Mapped[str] = mapped_column(Text, default="")
    concurrency: Mapped[int] = mapped_column(Integer, default=1)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    heartbeat_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    address: Mapped[str] = mapped_column(String(255), default="")
    draining: Mapped[bool] = mapped_column(Boolean, default=False)
