"""Deep search answers in the background: jobs in the database, a few worker threads, leases.

Each question has a job row. A worker thread claims a due job with a lease (one conditional UPDATE, see
`conversations.ConversationStore.claim`), a heartbeat thread renews the leases of the jobs this process
works on, and the answer is stored only while the question is still `processing` (a cancel wins). When a
process dies its leases expire and any worker (of this or another process, after a restart) takes the job
over; a job claimed more than `deepSearch.maxAttempts` times fails with the reason `interrupted`, so a
question never hangs in `processing`.

Metering: an answer costs `AgentStats.credits` (when the agent counted them) or `deepSearch.creditsPerAnswer`,
consumed through `LicensingService.consume(actor, "deepsearch", n)` before the answer is stored: all or
nothing; when the credits are exhausted the question fails with `quota_exceeded` (checked before the agent
starts too, so that an exhausted instance does not run agents it cannot pay for).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Self

from codewell.accounts.service import AccountService
from codewell.agents import answering
from codewell.agents.answers import AgentAnswer
from codewell.agents.conversations import ClaimedJob, ConversationStore
from codewell.analytics.credits import CreditService
from codewell.core.actors import INTERNAL, Actor
from codewell.core.errors import CodewellError, NotFound, QuotaExceeded
from codewell.db.base import utcnow
from codewell.licensing.service import FeatureNotLicensed, LicensingService

if TYPE_CHECKING:
    from codewell.runtime import Runtime

log = logging.getLogger(__name__)

FEATURE = "deepsearch"
# How often an idle worker looks for jobs that no notification announced (other processes, expired leases).
POLL_SECONDS = 2.0
# The answering agent gets the asker's repository permissions and read-only actions (the `mcp` scope).
AGENT_SCOPES = frozenset({"mcp"})

# (runtime, asker, question, earlier (question, answer) pairs, monotonic deadline) -> the answer.
Answerer = Callable[["Runtime", Actor, str, Sequence[tuple[str, str]], float], AgentAnswer]


def answer_with_agents(
    runtime: Runtime, actor: Actor, question: str, history: Sequence[tuple[str, str]], deadline: float
) -> AgentAnswer:
    """The production answerer: the model's agent loop, or the retrieval pipeline without a model."""
    return answering.answer(
        runtime, actor, question, purpose="deepsearch", scope=None, history=history, deadline=deadline
    )


class DeepSearchJobs:
    """The worker pool of this process (started by the server's background loop, or on the first question)."""

    def __init__(self, runtime: Runtime, answerer: Answerer = answer_with_agents, *, autostart: bool = True) -> None:
        self.runtime = runtime
        self.answerer = answerer
        self.autostart = autostart
        self.store = ConversationStore(runtime.db)
        self.owner = f"{socket.gethostname()[:30]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._active: dict[int, ClaimedJob] = {}
        # Notified whenever a question of this process finishes (waiters re-read the database).
        self.finished = threading.Condition()

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    @property
    def running(self) -> bool:
        return bool(self._threads) and not self._stop.is_set()

    def start(self) -> None:
        """Start the worker threads and the lease heartbeat (idempotent)."""
        with self._lock:
            if self._threads or self._stop.is_set():
                return
            count = self.runtime.config.deep_search.workers
            for n in range(count):
                thread = threading.Thread(target=self._work, name=f"deepsearch-worker-{n}", daemon=True)
                self._threads.append(thread)
            self._threads.append(threading.Thread(target=self._heartbeat, name="deepsearch-leases", daemon=True))
            for thread in self._threads:
                thread.start()

    def notify(self) -> None:
        """A job was queued: wake an idle worker (and start the pool when it is not running yet)."""
        if self.autostart:
            self.start()
        self._wake.set()

    def close(self) -> None:
        """Stop the threads; jobs in flight keep their lease and are taken over after it expires."""
        self._stop.set()
        self._wake.set()
        deadline = time.monotonic() + 5  # an answer in progress is not waited for: its lease will expire
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))

    # -- the threads ----------------------------------------------------------------------------------------
    def _work(self) -> None:
        while not self._stop.is_set():
            try:
                ran = self.run_one()
            except Exception:
                log.exception("deep search worker failed; retrying")
                ran = False
            if not ran:
                self._wake.wait(POLL_SECONDS)
                self._wake.clear()

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.runtime.config.deep_search.lease_seconds / 3):
            with self._lock:
                ids = list(self._active)
            try:
                self.store.renew(self.owner, ids, self.runtime.config.deep_search.lease_seconds)
            except Exception:
                log.exception("renewing deep search leases failed")

    # -- one job --------------------------------------------------------------------------------------------
    def run_one(self) -> bool:
        """Claim and answer one due job in this thread; False when there was none."""
        config = self.runtime.config.deep_search
        job = self.store.claim(self.owner, config.lease_seconds)
        if job is None:
            return False
        with self._lock:
            self._active[job.id] = job
        try:
            self._answer(job)
        finally:
            with self._lock:
                self._active.pop(job.id, None)
            with self.finished:
                self.finished.notify_all()
        return True

    def run_pending(self) -> int:
        """Answer every due job in this thread (the CLI without a server); how many ran."""
        count = 0
        while self.run_one():
            count += 1
        return count

    def _answer(self, job: ClaimedJob) -> None:
        config = self.runtime.config.deep_search
        if job.attempts > config.max_attempts:
            interrupted = job.attempts - 1
            self.store.fail(
                job,
                "interrupted",
                f"the answer was interrupted {interrupted} times (server restarts or crashes) and was given up; "
                "ask the question again",
            )
            return
        conversation = self.store.of_question(job.question_id)
        if conversation is None or not self.store.start(job.question_id):
            self.store.fail(job, "cancelled", "cancelled")  # stores nothing: the question is no longer open
            return
        question = next(q for q in conversation.questions if q.id == job.question_id)
        try:
            user = self.runtime.get(AccountService).get_user(conversation.owner_id)
        except NotFound:
            self.store.fail(job, "account_gone", "the account that asked this question no longer exists")
            return
        actor = self.runtime.get(AccountService).actor_for(user, via="deepsearch", scopes=AGENT_SCOPES)
        refusal = self._refusal(config.credits_per_answer)
        if refusal is not None:
            self.store.fail(job, refusal[0], refusal[1])
            return
        started = time.monotonic()
        history = self.store.history(job.question_id)
        try:
            answer = self.answerer(self.runtime, actor, question.text, history, started + config.answer_seconds)
        except CodewellError as exc:
            code = "quota_exceeded" if isinstance(exc, QuotaExceeded) else _ERROR_CODES.get(exc.code, exc.code)
            self.store.fail(job, code, exc.message, _ms(started))
            return
        except Exception:
            log.exception("deep search answer of question %s failed", job.question_id)
            self.store.fail(job, "internal", "the answer failed because of an internal error (logged)", _ms(started))
            return
        if not self.store.is_processing(job.question_id):
            self.store.fail(job, "cancelled", "cancelled")  # cancelled while answering: nothing stored or charged
            return
        amount = answer.stats.credits if answer.stats.credits > 0 else config.credits_per_answer
        try:
            consumption = self.runtime.get(LicensingService).consume(actor, FEATURE, amount)
        except FeatureNotLicensed as exc:
            self.store.fail(job, "not_licensed", exc.message, _ms(started))
            return
        except QuotaExceeded as exc:
            self.store.fail(job, "quota_exceeded", f"{exc.message}; {exc.hint}" if exc.hint else exc.message)
            return
        self.store.complete(job, answer, amount if consumption.metered else 0, _ms(started))

    def _refusal(self, amount: int) -> tuple[str, str] | None:
        """Why no answer can be paid for now (before running the agent), or None."""
        refusal = self.runtime.get(LicensingService).feature_refusal(FEATURE)
        if refusal is not None:
            return "not_licensed", refusal.message
        buckets = self.runtime.get(CreditService).list_buckets(INTERNAL)
        if not buckets:
            return None  # unmetered
        today = utcnow().date()
        if sum(b.remaining for b in buckets if b.is_active(today) and b.feature in ("", FEATURE)) < amount:
            return (
                "quota_exceeded",
                f"not enough credits left for deep search: {amount} needed; a site admin can allocate more "
                "credits (codewell credits allocate)",
            )
        return None


# Codes of codewell errors raised by the answering agent, as stored on the question.
_ERROR_CODES = {"unavailable": "provider", "invalid_input": "invalid_question"}


def _ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)


async def worker_loop(runtime: Runtime) -> None:
    """The server's background task: run the pool for the server's lifetime (resuming jobs left by a crash)."""
    jobs = runtime.get(DeepSearchJobs)
    jobs.start()
    try:
        while True:
            await asyncio.sleep(3600)
    finally:
        await asyncio.to_thread(jobs.close)
