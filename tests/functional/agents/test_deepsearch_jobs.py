"""Deep search answers as jobs of codewell.jobs (agents/jobs.py): a question and its `agents.deepsearch` job are
queued together, any job runner answers it (no worker threads of the web process), the sweep queues questions
left without a job, and both an operator's cancel of the job and the owner's cancel of the question stop it."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete

from codewell.agents.answers import AgentAnswer
from codewell.agents.jobs import KIND, SWEEP, question_resource
from codewell.analytics.credits import CreditService
from codewell.capabilities import wire
from codewell.core.actors import INTERNAL, Actor
from codewell.core.errors import Conflict
from codewell.jobs.models import JobRow
from codewell.jobs.runner import JobRunner
from codewell.jobs.service import PRIORITY_PERSON, Job, JobService
from codewell.runtime import Runtime
from tests.functional.agents.test_deepsearch import QUESTION, World

pytestmark = pytest.mark.database


@pytest.fixture
def world(runtime: Runtime, tmp_path: Path) -> World:
    return World(runtime, tmp_path)


def jobs_of(runtime: Runtime) -> list[Job]:
    return runtime.get(JobService).list_jobs(INTERNAL, kind=KIND)


def test_asking_queues_the_answer_job_and_the_server_runs_no_worker_threads(world: World) -> None:
    wire(world.runtime)
    assert "agents-deepsearch" not in [name for name, _ in world.runtime.background]
    view = world.service.deepsearch(world.alice, QUESTION)
    question = view.conversation.questions[0]
    (job,) = jobs_of(world.runtime)
    assert (job.resource, job.state, job.priority, job.payload) == (
        question_resource(question.id),
        "queued",
        PRIORITY_PERSON,
        {"question_id": question.id},
    )
    with pytest.raises(Conflict):  # refused follow-up: no question, and no job either (one transaction)
        world.service.follow_up(world.alice, view.url, "And where is schedule_charge?")
    assert len(jobs_of(world.runtime)) == 1
    assert not [t for t in threading.enumerate() if t.name.startswith("deepsearch-worker")]

    assert JobRunner(world.runtime, role="worker", kinds=frozenset({KIND})).run_one()  # any process's runner
    (job,) = jobs_of(world.runtime)
    assert (job.state, job.result) == ("succeeded", {"status": "completed"})
    assert world.service.read(world.alice, view.url).conversation.status == "completed"


def test_the_sweep_queues_questions_left_without_a_job_once(world: World) -> None:
    view = world.service.deepsearch(world.alice, QUESTION)
    with world.runtime.db.session() as session:  # as if queued by a version without jobs
        session.execute(delete(JobRow))
    sweeper = JobRunner(world.runtime, role="worker", kinds=frozenset({SWEEP}))
    answerer = JobRunner(world.runtime, role="worker", kinds=frozenset({KIND}))
    assert not answerer.run_one()
    jobs = world.runtime.get(JobService)
    for _ in range(2):  # two sweeps (two processes): one queued job
        jobs.enqueue(SWEEP, "site")
        assert sweeper.run_one()
    (job,) = jobs_of(world.runtime)
    assert (job.state, job.cause) == ("queued", "sweep")
    assert answerer.run_one()
    assert world.service.read(world.alice, view.url).conversation.status == "completed"
    jobs.enqueue(SWEEP, "site")
    assert sweeper.run_one()
    assert [j.state for j in jobs_of(world.runtime)] == ["succeeded"]  # nothing left to queue


def test_the_owners_cancel_ends_the_queued_job(world: World) -> None:
    view = world.service.deepsearch(world.alice, QUESTION)
    world.service.cancel(world.alice, view.url)
    (job,) = jobs_of(world.runtime)
    assert job.state == "cancelled"
    assert world.jobs.run_pending() == 0


@dataclass
class Run:
    """The `JobRun` a job runner hands the handler; `cancelled` is what the lease keeper raises when an operator
    cancels the job (`codewell jobs cancel`)."""

    payload: Mapping[str, Any]
    cancelled: bool = False
    id: int = 1
    kind: str = KIND
    resource: str = ""
    attempt: int = 1
    priority: int = PRIORITY_PERSON

    def progress(self, done: int, total: int | None = None, message: str = "") -> None:
        pass


def test_an_operators_cancel_stops_the_answer_before_it_is_stored_or_charged(world: World) -> None:
    first = world.service.deepsearch(world.alice, QUESTION)
    cancelled_early = Run({"question_id": first.conversation.questions[0].id}, cancelled=True)
    assert world.jobs.handle(cancelled_early) == {"status": "failed"}
    assert world.seen == []  # the agent did not even start

    second = world.service.deepsearch(world.bob, QUESTION + " (again)")
    run = Run({"question_id": second.conversation.questions[0].id})
    original = world.jobs.answerer

    def cancelled_meanwhile(
        runtime: Runtime, actor: Actor, question: str, history: Sequence[tuple[str, str]], deadline: float
    ) -> AgentAnswer:
        answer = original(runtime, actor, question, history, deadline)
        run.cancelled = True  # the operator cancels while the agent works
        return answer

    world.jobs.answerer = cancelled_meanwhile
    assert world.jobs.handle(run) == {"status": "failed"}
    for view, user in ((first, world.alice), (second, world.bob)):
        question = world.service.read(user, view.url).conversation.questions[0]
        assert (question.status, question.error_code, question.error_message) == (
            "failed",
            "cancelled",
            "cancelled by an operator",
        )
        assert (question.answer, question.credits) == ("", 0)
    assert world.runtime.get(CreditService).list_buckets(INTERNAL) == []
    # The conversation is free again.
    world.service.follow_up(world.bob, second.url, "Try again: how are failed charges retried?")
