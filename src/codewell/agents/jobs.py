"""Deep search answers in the background, as jobs of codewell.jobs.

Queueing a question (`ConversationStore.create` / `add_question`) enqueues the job `agents.deepsearch` (resource
`question:<id>`) in the same transaction. Whichever process runs jobs (`codewell serve` without `--no-jobs`,
or any `codewell worker`) claims it and answers the question: the web process starts no worker threads of
its own. The conversation tables stay the truth users see: the handler leases the question's own job row
(one conditional UPDATE, see `conversations.ConversationStore.claim_question`, renewed while the agent works),
so that a question is answered at most once at a time, even beside an older version's workers, and the answer
is stored only while the question is still `processing` (a cancel wins). When a process dies both leases
expire and the job is run again (`agents.deepsearch_sweep` re-enqueues questions whose own lease ran out, and
questions queued before this version); a question claimed more than `deepSearch.maxAttempts` times fails
with the reason `interrupted`, so a question never hangs in `processing`. An operator's cancel of the job
(`codewell jobs cancel`) and the owner's cancel of the question both stop it before anything is stored or
charged.

Metering: an answer costs `AgentStats.credits` (when the agent counted them) or `deepSearch.creditsPerAnswer`,
consumed through `LicensingService.consume(actor, "deepsearch", n)` before the answer is stored: all or
nothing; when the credits are exhausted the question fails with `quota_exceeded` (checked before the agent
starts too, so that an exhausted instance does not run agents it cannot pay for).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self

from sqlalchemy.orm import Session

from codewell.accounts.service import AccountService
from codewell.agents import answering
from codewell.agents.answers import AgentAnswer
from codewell.agents.conversations import ClaimedJob, ConversationStore
from codewell.analytics.credits import CreditService
from codewell.capability import JobKind, JobRun
from codewell.core.actors import INTERNAL, Actor
from codewell.core.errors import CodewellError, NotFound, QuotaExceeded
from codewell.db.base import utcnow
from codewell.jobs.runner import JobRunner, drain
from codewell.jobs.service import PRIORITY_EVENT, PRIORITY_PERSON, JobService
from codewell.licensing.service import FeatureNotLicensed, LicensingService

if TYPE_CHECKING:
    from codewell.runtime import Runtime

log = logging.getLogger(__name__)

FEATURE = "deepsearch"
KIND = "agents.deepsearch"
SWEEP = "agents.deepsearch_sweep"
# How often questions whose worker died (or queued by an older version) are queued again as jobs.
SWEEP_SECONDS = 30.0
OPERATOR_CANCEL = "cancelled by an operator"
# Whether the job this thread just ran answered a question (`run_one` skips the jobs that found nothing to do).
_ANSWERED = threading.local()
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
    """Answering deep search questions: the handler of the `agents.deepsearch` job, and `run_one`/`run_pending`
    to answer due questions in the calling thread (tests, `codewell deepsearch ask` without a server)."""

    def __init__(self, runtime: Runtime, answerer: Answerer = answer_with_agents) -> None:
        self.runtime = runtime
        self.answerer = answerer
        self.store = ConversationStore(runtime.db)
        # The lease owner of the question rows this process answers.
        self.owner = f"{socket.gethostname()[:30]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        # Notified whenever a question of this process finishes (waiters re-read the database).
        self.finished = threading.Condition()

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    # -- the jobs -------------------------------------------------------------------------------------------
    def enqueue(self, session: Session, question_id: int) -> None:
        """Queue the job answering `question_id` in the caller's transaction (the store's `on_queued`)."""
        self.runtime.get(JobService).enqueue(
            KIND,
            question_resource(question_id),
            {"question_id": question_id},
            priority=PRIORITY_PERSON,
            cause="deepsearch.asked",
            session=session,
        )

    def sweep(self) -> int:
        """Enqueue the job of every question whose own job row is claimable: queued before jobs existed, or left
        by a worker that died (lease expired). A queued job of the question is superseded, not duplicated."""
        questions = self.store.claimable_questions()
        self.runtime.get(JobService).enqueue_many(
            KIND,
            [(question_resource(q), {"question_id": q}) for q in questions],
            priority=PRIORITY_EVENT,
            cause="sweep",
        )
        return len(questions)

    def handle(self, job: JobRun) -> Mapping[str, Any]:
        """The `agents.deepsearch` handler: lease the question's row and answer it (every outcome is stored on
        the question; nothing is raised, so the jobs layer never retries an answer that failed for a reason)."""
        question_id = int(job.payload["question_id"])
        config = self.runtime.config.deep_search
        claimed = self.store.claim_question(self.owner, question_id, config.lease_seconds)
        if claimed is None:
            # Answered, cancelled or deleted meanwhile, or answered by a live worker elsewhere (should that one
            # die, its lease expires and the sweep queues the question again).
            return {"skipped": "the question is not open for answering"}
        _ANSWERED.ran = True
        try:
            with _QuestionLease(self.store, self.owner, claimed, config.lease_seconds):
                self._answer(claimed, lambda: job.cancelled)
        finally:
            with self.finished:
                self.finished.notify_all()
        found = self.store.question(question_id)
        return {"status": found.status if found is not None else "deleted"}

    def answer_now(self, question_id: int, timeout: float) -> None:
        """Answer one question in this thread unless another process is (then wait for it), up to `timeout`."""
        drain(self.runtime, question_resource(question_id), timeout=timeout)

    # -- in the calling thread ------------------------------------------------------------------------------
    def run_one(self) -> bool:
        """Answer one due question in this thread, through the jobs layer; False when there was none."""
        self.sweep()
        runner = JobRunner(self.runtime, role="deepsearch", kinds=frozenset({KIND}))
        while True:
            _ANSWERED.ran = False
            if not runner.run_one():
                return False
            if _ANSWERED.ran:
                return True

    def run_pending(self) -> int:
        """Answer every due question in this thread; how many ran."""
        count = 0
        while self.run_one():
            count += 1
        return count

    def _answer(self, job: ClaimedJob, cancelled: Callable[[], bool]) -> None:
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
        if cancelled():
            self.store.fail(job, "cancelled", OPERATOR_CANCEL)
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
        if cancelled():
            self.store.fail(job, "cancelled", OPERATOR_CANCEL, _ms(started))  # nothing stored or charged
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


class _QuestionLease:
    """Renews the lease of the question's own row while its answer runs (the jobs layer renews the job's)."""

    def __init__(self, store: ConversationStore, owner: str, job: ClaimedJob, lease_seconds: float) -> None:
        self.store = store
        self.owner = owner
        self.job = job
        self.lease_seconds = lease_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"deepsearch-lease-{job.id}", daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.lease_seconds / 3):
            try:
                self.store.renew(self.owner, [self.job.id], self.lease_seconds)
            except Exception:
                log.exception("renewing the lease of deep search question %s failed", self.job.question_id)


def question_resource(question_id: int) -> str:
    return f"question:{question_id}"


def answer(runtime: Runtime, job: JobRun) -> Mapping[str, Any]:
    return runtime.get(DeepSearchJobs).handle(job)


def sweep(runtime: Runtime, _job: JobRun) -> Mapping[str, Any]:
    queued = runtime.get(DeepSearchJobs).sweep()
    return {"queued": queued} if queued else {}


JOB_KINDS: list[JobKind] = [
    # Outcomes are stored on the question and never raised: attempts count only interrupted runs (a process
    # that died), and the question's own `deepSearch.maxAttempts` gives up first.
    JobKind(
        KIND,
        answer,
        "answer a deep search question",
        lease_seconds=60.0,
        max_attempts=50,
        long_running=True,
        enqueued_by="a question or follow-up (in its row's transaction), `agents.deepsearch_sweep`",
    ),
    JobKind(
        SWEEP,
        sweep,
        "queue deep search questions left by a dead worker or queued before jobs existed",
        every=SWEEP_SECONDS,
        lease_seconds=60.0,
    ),
]
