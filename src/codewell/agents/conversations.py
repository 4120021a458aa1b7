"""The deep search tables as plain records: conversations, their questions and the jobs that answer them.

No permission checks here (`AgentService` decides who may do what); every write that can race is one
conditional UPDATE, so that it is atomic on SQLite and PostgreSQL alike:

- one open question per conversation: a follow-up is accepted only by
  `UPDATE conversations SET active_position = :next WHERE id = :id AND active_position IS NULL`;
- a question's job is claimed with `UPDATE jobs SET lease... WHERE id = :id AND (queued and due, or leased and
  expired)` (by the `agents.deepsearch` job of codewell.jobs that answers it: agents/jobs.py);
- an answer is stored only while its question is still `processing` (a cancelled question stays cancelled).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, delete, func, or_, select, update
from sqlalchemy.orm import Session

from codewell.agents.answers import AgentAnswer, Citation
from codewell.agents.models import (
    CANCELLED,
    COMPLETED,
    DONE,
    FAILED,
    OPEN_STATES,
    PENDING,
    PROCESSING,
    QUEUED,
    RUNNING,
    ConversationRow,
    JobRow,
    QuestionRow,
)
from codewell.core.errors import Conflict, InvalidInput
from codewell.db.base import utcnow
from codewell.db.database import Database

MAX_QUESTION = 10_000
MAX_TITLE = 120


@dataclass(frozen=True, slots=True)
class Question:
    id: int
    position: int
    text: str
    status: str
    answer: str
    sources: tuple[Citation, ...]
    notice: str
    author: str
    model: str | None
    elapsed_ms: int
    tool_calls: int
    input_tokens: int
    output_tokens: int
    credits: int
    error_code: str
    error_message: str
    created_at: datetime
    updated_at: datetime

    @property
    def is_open(self) -> bool:
        return self.status in OPEN_STATES


@dataclass(frozen=True, slots=True)
class Conversation:
    id: int
    owner_id: int
    title: str
    read_token: str
    share_token: str | None
    created_at: datetime
    updated_at: datetime
    questions: tuple[Question, ...]

    @property
    def status(self) -> str:
        """The status of the latest question (what a poller waits on)."""
        return self.questions[-1].status if self.questions else COMPLETED

    @property
    def is_open(self) -> bool:
        return any(q.is_open for q in self.questions)


@dataclass(frozen=True, slots=True)
class ClaimedJob:
    id: int
    question_id: int
    attempts: int


def title_of(question: str) -> str:
    """The conversation's title: the first line of the first question, shortened."""
    line = " ".join(question.strip().splitlines()[0].split()) if question.strip() else ""
    return line if len(line) <= MAX_TITLE else line[: MAX_TITLE - 1].rstrip() + "…"


def check_question(question: str) -> str:
    text = question.strip() if isinstance(question, str) else ""
    if not text:
        raise InvalidInput("the question is empty", hint="ask a detailed, specific question about the code")
    if len(text) > MAX_QUESTION:
        raise InvalidInput(f"the question is longer than {MAX_QUESTION} characters", hint="ask a shorter question")
    return text


def _sources_json(sources: Sequence[Citation]) -> str:
    return json.dumps([
        {"repo": c.repo, "commit": c.commit, "path": c.path, "startLine": c.start_line, "endLine": c.end_line,
         "note": c.note}
        for c in sources
    ])  # fmt: skip


def _sources_of(text: str) -> tuple[Citation, ...]:
    items: list[dict[str, Any]] = json.loads(text or "[]")
    return tuple(
        Citation(i["repo"], i["commit"], i["path"], int(i["startLine"]), int(i["endLine"]), i.get("note", ""))
        for i in items
    )


def _question(row: QuestionRow) -> Question:
    return Question(
        row.id, row.position, row.question, row.status, row.answer, _sources_of(row.sources), row.notice, row.author,
        row.model, row.elapsed_ms, row.tool_calls, row.input_tokens, row.output_tokens, row.credits, row.error_code,
        row.error_message, row.created_at, row.updated_at,
    )  # fmt: skip


# Called in the transaction that queues a question (its session and the question's id): the durable job that
# answers it is enqueued there, so that a question and its job exist together or not at all.
OnQueued = Callable[[Session, int], None]


class ConversationStore:
    def __init__(self, db: Database, on_queued: OnQueued | None = None) -> None:
        self.db = db
        self.on_queued = on_queued

    # -- reading ----------------------------------------------------------------------------------------------
    def _load(self, session: Session, row: ConversationRow) -> Conversation:
        questions = session.scalars(
            select(QuestionRow).where(QuestionRow.conversation_id == row.id).order_by(QuestionRow.position)
        )
        return Conversation(
            row.id, row.owner_id, row.title, row.read_token, row.share_token, row.created_at, row.updated_at,
            tuple(_question(q) for q in questions),
        )  # fmt: skip

    def get(self, conversation_id: int) -> Conversation | None:
        with self.db.session() as session:
            row = session.get(ConversationRow, conversation_id)
            return None if row is None else self._load(session, row)

    def by_read_token(self, token: str) -> Conversation | None:
        with self.db.session() as session:
            row = session.scalar(select(ConversationRow).where(ConversationRow.read_token == token))
            return None if row is None else self._load(session, row)

    def by_share_token(self, token: str) -> Conversation | None:
        with self.db.session() as session:
            row = session.scalar(select(ConversationRow).where(ConversationRow.share_token == token))
            return None if row is None else self._load(session, row)

    def of_question(self, question_id: int) -> Conversation | None:
        with self.db.session() as session:
            row = session.scalar(
                select(ConversationRow)
                .join(QuestionRow, QuestionRow.conversation_id == ConversationRow.id)
                .where(QuestionRow.id == question_id)
            )
            return None if row is None else self._load(session, row)

    def list_for(self, owner_id: int, limit: int = 50) -> list[Conversation]:
        """The owner's conversations, most recently updated first."""
        with self.db.session() as session:
            rows = list(
                session.scalars(
                    select(ConversationRow)
                    .where(ConversationRow.owner_id == owner_id)
                    .order_by(ConversationRow.updated_at.desc(), ConversationRow.id.desc())
                    .limit(limit)
                )
            )
            # One query for every listed conversation's questions, not one per conversation.
            questions: dict[int, list[Question]] = {row.id: [] for row in rows}
            for q in session.scalars(
                select(QuestionRow)
                .where(QuestionRow.conversation_id.in_(list(questions)))
                .order_by(QuestionRow.conversation_id, QuestionRow.position)
            ):
                questions[q.conversation_id].append(_question(q))
            return [
                Conversation(
                    row.id,
                    row.owner_id,
                    row.title,
                    row.read_token,
                    row.share_token,
                    row.created_at,
                    row.updated_at,
                    tuple(questions[row.id]),
                )
                for row in rows
            ]

    # -- asking ---------------------------------------------------------------------------------------------
    def create(self, owner_id: int, question: str) -> Conversation:
        """A new conversation with its first question (pending) and that question's job."""
        now = utcnow()
        with self.db.session() as session:
            row = ConversationRow(
                owner_id=owner_id, title=title_of(question), read_token=str(uuid.uuid4()), share_token=None,
                active_position=1, created_at=now, updated_at=now,
            )  # fmt: skip
            session.add(row)
            session.flush()
            self._add_question(session, row.id, 1, question, now)
            return self._load(session, row)

    def add_question(self, conversation_id: int, question: str, max_questions: int) -> Conversation:
        """A follow-up: Conflict while another question of the conversation is open (one at a time)."""
        now = utcnow()
        with self.db.session() as session:
            count = session.scalar(
                select(func.count()).select_from(QuestionRow).where(QuestionRow.conversation_id == conversation_id)
            )
            position = int(count or 0) + 1
            if position > max_questions:
                raise InvalidInput(
                    f"a conversation holds at most {max_questions} questions", hint="start a new deep search"
                )
            taken = session.execute(
                update(ConversationRow)
                .where(ConversationRow.id == conversation_id, ConversationRow.active_position.is_(None))
                .values(active_position=position, updated_at=now)
            )
            if taken.rowcount != 1:  # type: ignore[attr-defined]
                raise Conflict(
                    "this conversation's previous question is still being answered",
                    hint="wait for its answer (or cancel it), then ask the follow-up",
                )
            self._add_question(session, conversation_id, position, question, now)
            row = session.get(ConversationRow, conversation_id)
            assert row is not None
            return self._load(session, row)

    def _add_question(self, session: Session, conversation_id: int, position: int, text: str, now: datetime) -> None:
        question = QuestionRow(
            conversation_id=conversation_id, position=position, question=text, status=PENDING, answer="",
            sources="[]", notice="", author="", model=None, elapsed_ms=0, tool_calls=0, input_tokens=0,
            output_tokens=0, credits=0, error_code="", error_message="", created_at=now, updated_at=now,
        )  # fmt: skip
        session.add(question)
        session.flush()
        session.add(JobRow(question_id=question.id, state=QUEUED, attempts=0, run_after=now, created_at=now))
        if self.on_queued is not None:
            self.on_queued(session, question.id)

    # -- owner's changes ------------------------------------------------------------------------------------
    def cancel(self, conversation_id: int) -> int:
        """Cancel the open questions (their jobs end); how many were open."""
        now = utcnow()
        with self.db.session() as session:
            ids = list(
                session.scalars(
                    select(QuestionRow.id).where(
                        QuestionRow.conversation_id == conversation_id, QuestionRow.status.in_(OPEN_STATES)
                    )
                )
            )
            if not ids:
                return 0
            session.execute(
                update(QuestionRow)
                .where(QuestionRow.id.in_(ids), QuestionRow.status.in_(OPEN_STATES))
                .values(
                    status=CANCELLED, error_code="cancelled", error_message="cancelled by its owner", updated_at=now
                )
            )
            session.execute(update(JobRow).where(JobRow.question_id.in_(ids)).values(state=DONE, lease_owner=None))
            session.execute(
                update(ConversationRow)
                .where(ConversationRow.id == conversation_id)
                .values(active_position=None, updated_at=now)
            )
            return len(ids)

    def delete(self, conversation_id: int) -> None:
        with self.db.session() as session:
            questions = select(QuestionRow.id).where(QuestionRow.conversation_id == conversation_id)
            session.execute(delete(JobRow).where(JobRow.question_id.in_(questions)))
            session.execute(delete(QuestionRow).where(QuestionRow.conversation_id == conversation_id))
            session.execute(delete(ConversationRow).where(ConversationRow.id == conversation_id))

    def set_share_token(self, conversation_id: int, token: str | None) -> None:
        with self.db.session() as session:
            session.execute(
                update(ConversationRow).where(ConversationRow.id == conversation_id).values(share_token=token)
            )

    # -- the workers' side ----------------------------------------------------------------------------------
    def claim_question(self, owner: str, question_id: int, lease_seconds: float) -> ClaimedJob | None:
        """Lease the job of one question when it is claimable (queued and due, or its worker's lease expired);
        None when it is done, gone, or leased by a live worker."""
        now = utcnow()
        claimable = or_(
            and_(JobRow.state == QUEUED, JobRow.run_after <= now),
            and_(JobRow.state == RUNNING, JobRow.lease_expires_at < now),
        )
        with self.db.session() as session:
            job_id = session.scalar(select(JobRow.id).where(JobRow.question_id == question_id, claimable).limit(1))
        if job_id is None:
            return None
        with self.db.session() as session:
            taken = session.execute(
                update(JobRow)
                .where(JobRow.id == job_id, claimable)
                .values(
                    state=RUNNING,
                    lease_owner=owner,
                    lease_expires_at=now + timedelta(seconds=lease_seconds),
                    attempts=JobRow.attempts + 1,
                )
            )
            if taken.rowcount != 1:  # type: ignore[attr-defined]
                return None  # another worker claimed it first
            row = session.get(JobRow, job_id)
            assert row is not None
            return ClaimedJob(row.id, row.question_id, row.attempts)

    def claimable_questions(self, limit: int = 500) -> list[int]:
        """Questions whose job is due (queued) or was left by a dead worker (lease expired), oldest first."""
        now = utcnow()
        claimable = or_(
            and_(JobRow.state == QUEUED, JobRow.run_after <= now),
            and_(JobRow.state == RUNNING, JobRow.lease_expires_at < now),
        )
        with self.db.session() as session:
            return list(session.scalars(select(JobRow.question_id).where(claimable).order_by(JobRow.id).limit(limit)))

    def renew(self, owner: str, job_ids: Sequence[int], lease_seconds: float) -> None:
        if not job_ids:
            return
        with self.db.session() as session:
            session.execute(
                update(JobRow)
                .where(JobRow.id.in_(list(job_ids)), JobRow.lease_owner == owner, JobRow.state == RUNNING)
                .values(lease_expires_at=utcnow() + timedelta(seconds=lease_seconds))
            )

    def start(self, question_id: int) -> bool:
        """pending → processing (also true when a taken-over job was processing already); False when the
        question was cancelled or finished meanwhile."""
        with self.db.session() as session:
            result = session.execute(
                update(QuestionRow)
                .where(QuestionRow.id == question_id, QuestionRow.status.in_(OPEN_STATES))
                .values(status=PROCESSING, updated_at=utcnow())
            )
            return bool(result.rowcount == 1)  # type: ignore[attr-defined]

    def is_processing(self, question_id: int) -> bool:
        with self.db.session() as session:
            return session.scalar(select(QuestionRow.status).where(QuestionRow.id == question_id)) == PROCESSING

    def complete(self, job: ClaimedJob, answer: AgentAnswer, credits: int, elapsed_ms: int) -> bool:
        """Store the answer while the question is still processing; False when it was cancelled meanwhile."""
        stats = answer.stats
        return self._finish(
            job,
            COMPLETED,
            answer=answer.text,
            sources=_sources_json(answer.sources),
            notice=answer.notice,
            author=answer.author,
            model=stats.model,
            elapsed_ms=elapsed_ms,
            tool_calls=stats.tool_calls,
            input_tokens=stats.input_tokens,
            output_tokens=stats.output_tokens,
            credits=credits,
        )

    def fail(self, job: ClaimedJob, code: str, message: str, elapsed_ms: int = 0) -> bool:
        return self._finish(job, FAILED, error_code=code, error_message=message, elapsed_ms=elapsed_ms)

    def _finish(self, job: ClaimedJob, status: str, **values: Any) -> bool:
        now = utcnow()
        with self.db.session() as session:
            stored = session.execute(
                update(QuestionRow)
                .where(QuestionRow.id == job.question_id, QuestionRow.status.in_(OPEN_STATES))
                .values(status=status, updated_at=now, **values)
            )
            session.execute(update(JobRow).where(JobRow.id == job.id).values(state=DONE, lease_owner=None))
            row = session.get(QuestionRow, job.question_id)
            if row is not None:
                session.execute(
                    update(ConversationRow)
                    .where(ConversationRow.id == row.conversation_id, ConversationRow.active_position == row.position)
                    .values(active_position=None, updated_at=now)
                )
            return bool(stored.rowcount == 1)  # type: ignore[attr-defined]

    def release(self, job: ClaimedJob, delay_seconds: float) -> None:
        """Give a job back to the queue (retried after `delay_seconds`)."""
        with self.db.session() as session:
            session.execute(
                update(JobRow)
                .where(JobRow.id == job.id, JobRow.state == RUNNING)
                .values(state=QUEUED, lease_owner=None, run_after=utcnow() + timedelta(seconds=delay_seconds))
            )

    def history(self, question_id: int) -> list[tuple[str, str]]:
        """The earlier (question, answer) pairs of the question's conversation that were answered."""
        with self.db.session() as session:
            row = session.get(QuestionRow, question_id)
            if row is None:
                return []
            earlier = session.scalars(
                select(QuestionRow)
                .where(
                    QuestionRow.conversation_id == row.conversation_id,
                    QuestionRow.position < row.position,
                    QuestionRow.status == COMPLETED,
                )
                .order_by(QuestionRow.position)
            )
            return [(q.question, q.answer) for q in earlier]

    def question(self, question_id: int) -> Question | None:
        with self.db.session() as session:
            row = session.get(QuestionRow, question_id)
            return None if row is None else _question(row)

    def pending_jobs(self) -> int:
        with self.db.session() as session:
            return int(
                session.scalar(select(func.count()).select_from(JobRow).where(JobRow.state.in_((QUEUED, RUNNING)))) or 0
            )


__all__ = ["CANCELLED", "COMPLETED", "FAILED", "PENDING", "PROCESSING", "ClaimedJob", "Conversation", "Question"]
