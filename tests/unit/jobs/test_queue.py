"""The job queue on the real database: de-duplication, priorities, locks, retries, leases, cancel, periodic jobs,
draining a resource, and who may see and act on jobs."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event, update
from sqlalchemy.exc import IntegrityError

from codewell.capability import Capability, JobGiveUp, JobKind, JobRun
from codewell.core.actors import ANONYMOUS, INTERNAL
from codewell.core.errors import InvalidInput, PermissionDenied
from codewell.db.base import utcnow
from codewell.jobs.models import JobRow
from codewell.jobs.runner import JobRunner, drain, execute
from codewell.jobs.service import PRIORITY_PERSON, PRIORITY_SCHEDULED, JobService
from codewell.runtime import Runtime
from tests.factories import actor_of_user, make_user

RAN: list[tuple[str, str, dict[str, Any]]] = []
FAILURES: dict[str, int] = {}


def _record(runtime: Runtime, job: JobRun) -> Mapping[str, Any]:
    RAN.append((job.kind, job.resource, dict(job.payload)))
    return {"seen": job.payload.get("n")}


def _flaky(runtime: Runtime, job: JobRun) -> None:
    FAILURES[job.resource] = FAILURES.get(job.resource, 0) + 1
    raise RuntimeError(f"boom {FAILURES[job.resource]}")


def _give_up(runtime: Runtime, job: JobRun) -> None:
    raise JobGiveUp("the remote said no")


def _chain(runtime: Runtime, job: JobRun) -> None:
    RAN.append((job.kind, job.resource, dict(job.payload)))
    runtime.get(JobService).emit("test.first-done", job.resource, {"from": job.id})


def _long(runtime: Runtime, job: JobRun) -> None:
    RAN.append((job.kind, job.resource, dict(job.payload)))
    started.set()
    assert release.wait(10)


def _wait_for_cancel(runtime: Runtime, job: JobRun) -> None:
    started.set()
    for _ in range(200):
        if job.cancelled:
            return
        threading.Event().wait(0.05)
    raise AssertionError("never saw the cancel")


started = threading.Event()
release = threading.Event()
BATCHES: list[list[str]] = []


def _batch(runtime: Runtime, jobs: Sequence[JobRun]) -> Mapping[int, Mapping[str, Any] | Exception | None]:
    BATCHES.append([job.resource for job in jobs])
    return {job.id: RuntimeError("bad one") if job.resource == "repo:4" else {"batched": len(jobs)} for job in jobs}


TEST_KINDS = Capability(
    name="testjobs",
    jobs=[
        JobKind("test.record", _record, "records its payload"),
        JobKind("test.other", _record, "shares test.record's lock", lock="test.record"),
        JobKind("test.flaky", _flaky, "always fails", max_attempts=3),
        JobKind("test.give_up", _give_up, "fails for good"),
        JobKind("test.first", _chain, "emits test.first-done"),
        JobKind("test.second", _record, "runs after test.first", on=("test.first-done",)),
        JobKind("test.gathered", _record, "waits to gather a batch", on=("test.first-done",), delay=3600.0),
        JobKind("test.tick", _record, "periodic", every=30.0),
        JobKind("test.cancel", _wait_for_cancel, "waits to be cancelled", lease_seconds=0.6),
        JobKind("test.batch", _record, "runs three at a time", batch=3, run_batch=_batch),
        JobKind("test.long", _long, "runs long", long_running=True),
        JobKind("test.single", _long, "one at a time per runner", per_runner=1),
        JobKind("test.urgent_tick", _record, "periodic, ahead of events", every=30.0, priority=10),
    ],
)


@pytest.fixture
def jobs(runtime: Runtime) -> JobService:
    runtime.capabilities = (*runtime.capabilities, TEST_KINDS)
    RAN.clear()
    BATCHES.clear()
    FAILURES.clear()
    started.clear()
    release.clear()
    return runtime.get(JobService)


def _rows(runtime: Runtime) -> list[JobRow]:
    with runtime.db.session() as session:
        return list(session.query(JobRow).order_by(JobRow.id))


def test_a_queued_job_is_superseded_not_duplicated(runtime: Runtime, jobs: JobService) -> None:
    jobs.enqueue("test.record", "repo:1", {"n": 1}, priority=PRIORITY_SCHEDULED)
    jobs.enqueue("test.record", "repo:1", {"n": 2}, priority=PRIORITY_PERSON)
    jobs.enqueue("test.record", "repo:1", {"n": 3}, priority=PRIORITY_SCHEDULED)
    jobs.enqueue("test.record", "repo:2", {"n": 9})
    rows = _rows(runtime)
    assert [(r.resource, r.payload, r.priority) for r in rows] == [
        ("repo:1", '{"n": 3}', PRIORITY_PERSON),  # the newest payload, the highest priority asked for
        ("repo:2", '{"n": 9}', 50),
    ]


def test_claims_take_the_most_urgent_job_first(runtime: Runtime, jobs: JobService) -> None:
    jobs.enqueue("test.record", "repo:1", {"n": 1}, priority=PRIORITY_SCHEDULED)
    jobs.enqueue("test.record", "repo:2", {"n": 2}, priority=PRIORITY_PERSON)
    jobs.enqueue("test.record", "repo:3", {"n": 3}, priority=PRIORITY_PERSON, delay=3600)  # not due
    runner = JobRunner(runtime, role="test")
    while runner.run_one():
        pass
    assert [payload["n"] for _kind, _resource, payload in RAN] == [2, 1]
    states = {r.resource: r.state for r in _rows(runtime)}
    assert states == {"repo:1": "succeeded", "repo:2": "succeeded", "repo:3": "queued"}
    assert jobs.get(INTERNAL, _rows(runtime)[1].id).result == {"seen": 2}


def test_one_running_job_per_lock_key_even_for_two_kinds(runtime: Runtime, jobs: JobService) -> None:
    jobs.enqueue("test.record", "repo:1")
    jobs.enqueue("test.other", "repo:1")
    jobs.enqueue("test.other", "repo:2")
    first = jobs.claim("a")
    assert first is not None
    assert (first.kind, first.resource) == ("test.record", "repo:1")
    second = jobs.claim("b")
    # test.other for repo:1 shares the lock with the running job: only repo:2's can start.
    assert second is not None
    assert (second.kind, second.resource) == ("test.other", "repo:2")
    assert jobs.claim("c") is None
    jobs.succeed(first, None)
    third = jobs.claim("c")
    assert third is not None
    assert (third.kind, third.resource) == ("test.other", "repo:1")


def test_the_database_refuses_two_running_jobs_of_one_key(runtime: Runtime, jobs: JobService) -> None:
    """The last line of defence against two claimers racing past the check: a partial unique index."""
    jobs.enqueue("test.record", "repo:1")
    jobs.enqueue("test.other", "repo:1")
    assert jobs.claim("a") is not None
    with pytest.raises(IntegrityError), runtime.db.session() as session:
        session.execute(update(JobRow).where(JobRow.state == "queued").values(state="running"))


def test_concurrent_claimers_run_each_job_once(runtime: Runtime, jobs: JobService) -> None:
    for n in range(40):
        jobs.enqueue("test.record", f"repo:{n}", {"n": n})
    runners = [JobRunner(runtime, role=f"t{i}") for i in range(4)]

    def work(runner: JobRunner) -> None:
        while runner.run_one():
            pass

    threads = [threading.Thread(target=work, args=(r,)) for r in runners]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(payload["n"] for _k, _r, payload in RAN) == list(range(40))
    assert {r.state for r in _rows(runtime)} == {"succeeded"}


def test_failures_are_retried_with_back_off_then_fail_with_the_reason(runtime: Runtime, jobs: JobService) -> None:
    jobs.enqueue("test.flaky", "repo:7")
    runner = JobRunner(runtime, role="test")
    assert runner.run_one()
    row = _rows(runtime)[0]
    assert (row.state, row.attempts, row.last_error) == ("queued", 1, "RuntimeError: boom 1")
    assert row.run_after > utcnow() + timedelta(seconds=3)  # back-off: not due again at once
    assert not runner.run_one()
    for _attempt in (2, 3):
        with runtime.db.session() as session:
            session.execute(update(JobRow).values(run_after=utcnow()))
        assert runner.run_one()
    row = _rows(runtime)[0]
    assert (row.state, row.attempts) == ("failed", 3)
    assert row.last_error == "RuntimeError: boom 3"
    assert not runner.run_one()  # failed for good: never an endless loop
    assert [s.failed for s in jobs.stats(INTERNAL) if s.kind == "test.flaky"] == [1]


def test_a_handler_can_give_up_without_retrying(runtime: Runtime, jobs: JobService) -> None:
    jobs.enqueue("test.give_up", "site")
    assert JobRunner(runtime, role="test").run_one()
    row = _rows(runtime)[0]
    assert (row.state, row.attempts, row.last_error) == ("failed", 1, "the remote said no")


def test_an_expired_lease_is_taken_over_and_a_job_that_keeps_dying_fails(runtime: Runtime, jobs: JobService) -> None:
    jobs.enqueue("test.record", "repo:1", {"n": 1})
    lost = jobs.claim("dead-process")
    assert lost is not None
    assert jobs.claim("other") is None  # leased
    for attempt in range(2, 7):
        with runtime.db.session() as session:  # the process died: its lease runs out
            session.execute(update(JobRow).values(lease_until=utcnow() - timedelta(seconds=1)))
        taken = jobs.claim(f"worker-{attempt}")
        assert taken is not None
        assert taken.attempt == attempt
    # Claimed more often than max_attempts (5): the runner fails it instead of running it a 7th time.
    assert taken is not None
    assert execute(runtime, taken) == "failed"
    row = _rows(runtime)[0]
    assert row.state == "failed"
    assert row.last_error is not None
    assert row.last_error.startswith("interrupted: 5 attempts were cut short")
    assert RAN == []


def test_cancel_a_queued_job_and_a_running_one(runtime: Runtime, jobs: JobService) -> None:
    jobs.enqueue("test.record", "repo:1")
    queued = _rows(runtime)[0].id
    assert jobs.cancel(INTERNAL, queued).state == "cancelled"
    assert not JobRunner(runtime, role="test").run_one()
    with pytest.raises(InvalidInput, match="already cancelled"):
        jobs.cancel(INTERNAL, queued)
    jobs.enqueue("test.cancel", "repo:2")
    running = max(r.id for r in _rows(runtime))
    runner = JobRunner(runtime, role="test")
    worker = threading.Thread(target=runner.run_one)
    worker.start()
    assert started.wait(10)
    assert jobs.cancel(INTERNAL, running).cancel_requested
    worker.join(15)
    assert not worker.is_alive()
    job = jobs.get(INTERNAL, running)
    assert job.state == "cancelled"
    assert job.last_error == "cancelled by an operator"
    # Retrying a cancelled job queues it again, ahead of scheduled work.
    again = jobs.retry(INTERNAL, running)
    assert (again.state, again.attempts, again.priority) == ("queued", 0, PRIORITY_PERSON)


def test_periodic_jobs_keep_one_row_and_come_back(runtime: Runtime, jobs: JobService) -> None:
    kind = jobs.kind("test.tick")
    jobs.ensure_periodic([kind])
    jobs.ensure_periodic([kind])
    assert len(_rows(runtime)) == 1
    runner = JobRunner(runtime, role="test")
    assert runner.run_one()
    (row,) = _rows(runtime)
    assert row.state == "queued"
    assert utcnow() + timedelta(seconds=25) < row.run_after < utcnow() + timedelta(seconds=31)
    assert not runner.run_one()


def test_a_periodic_kind_with_a_priority_runs_ahead_of_waiting_events(runtime: Runtime, jobs: JobService) -> None:
    jobs.enqueue("test.record", "repo:1", {"n": 1})
    jobs.ensure_periodic([jobs.kind("test.tick"), jobs.kind("test.urgent_tick")])
    jobs.enqueue("test.record", "repo:2", {"n": 2})
    runner = JobRunner(runtime, role="test")
    while runner.run_one():
        pass
    # The urgent periodic kind ran first, the plain one after every event's job; each came back with its priority.
    assert [kind for kind, _resource, _ in RAN] == ["test.urgent_tick", "test.record", "test.record", "test.tick"]
    periodic = {row.kind: (row.state, row.priority) for row in _rows(runtime) if row.kind.endswith("tick")}
    assert periodic == {"test.urgent_tick": ("queued", 10), "test.tick": ("queued", PRIORITY_SCHEDULED)}


def test_a_periodic_row_queued_by_another_process_meanwhile_wins(runtime: Runtime, jobs: JobService) -> None:
    """Between the finished run's check for a queued row and its own requeue, another process queues the kind's
    row (its start-up `ensure_periodic`): the finished run gives way instead of failing on the unique index."""
    kind = jobs.kind("test.tick")
    jobs.ensure_periodic([kind])
    claimed = jobs.claim("test-owner", frozenset({"test.tick"}))
    assert claimed is not None
    raced: list[int] = []

    def queue_another(conn: Any, cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip().upper().startswith("UPDATE JOBS") and not raced:
            raced.append(1)
            jobs.enqueue("test.tick", claimed.resource, priority=PRIORITY_SCHEDULED)

    event.listen(runtime.db.engine, "before_cursor_execute", queue_another)
    try:
        jobs.succeed(claimed, {"ok": True})
    finally:
        event.remove(runtime.db.engine, "before_cursor_execute", queue_another)
    assert raced
    (row,) = _rows(runtime)
    assert row.id != claimed.id
    assert row.state == "queued"


def test_a_kind_limited_per_runner_waits_for_its_running_job(runtime: Runtime, jobs: JobService) -> None:
    jobs.enqueue("test.single", "repo:1")
    jobs.enqueue("test.single", "repo:2")
    runner = JobRunner(runtime, role="test", concurrency=2)
    first = threading.Thread(target=runner.run_one)
    first.start()
    assert started.wait(10)
    # A thread is free and repo:2 is due, but the kind runs one job at a time in this runner.
    assert not runner.run_one()
    release.set()
    first.join(10)
    assert runner.run_one()
    assert [resource for _kind, resource, _ in RAN] == ["repo:1", "repo:2"]


def test_drain_runs_what_a_job_causes_for_its_resource_only(runtime: Runtime, jobs: JobService) -> None:
    runtime.capabilities_ready = True  # events reach their kinds in a wired process
    jobs.enqueue("test.first", "repo:1")
    jobs.enqueue("test.record", "repo:2", {"n": 2})
    drain(runtime, "repo:1")
    # What the job caused ran too, the batch-gathering one at once: the caller waits for it, not for the window.
    assert [(kind, resource) for kind, resource, _ in RAN] == [
        ("test.first", "repo:1"),
        ("test.second", "repo:1"),
        ("test.gathered", "repo:1"),
    ]
    assert {r.resource: r.state for r in _rows(runtime) if r.resource == "repo:2"} == {"repo:2": "queued"}
    second = next(r for r in _rows(runtime) if r.kind == "test.second")
    assert second.cause == "test.first-done"
    # What a job causes is one step more urgent than the job: a chain finishes before new work starts.
    first = next(r for r in _rows(runtime) if r.kind == "test.first")
    assert second.priority == first.priority - 1
    # A runner leaves a batch-gathering job until its window ends.
    RAN.clear()
    jobs.enqueue("test.first", "repo:5")
    runner = JobRunner(runtime, role="test")
    while runner.run_one():
        pass
    assert ("test.gathered", "repo:5") not in [(kind, resource) for kind, resource, _ in RAN]
    assert [r.state for r in _rows(runtime) if r.resource == "repo:5" and r.kind == "test.gathered"] == ["queued"]


def test_only_site_admins_see_and_act_on_jobs(runtime: Runtime, jobs: JobService) -> None:
    jobs.enqueue("test.record", "repo:1")
    job_id = _rows(runtime)[0].id
    alice = actor_of_user(runtime, make_user(runtime, "alice"))
    root = actor_of_user(runtime, make_user(runtime, "root", site_admin=True))
    for actor in (alice, ANONYMOUS):
        with pytest.raises(PermissionDenied):
            jobs.list_jobs(actor)
        with pytest.raises(PermissionDenied):
            jobs.cancel(actor, job_id)
        with pytest.raises(PermissionDenied):
            jobs.stats(actor)
    assert [j.id for j in jobs.list_jobs(root)] == [job_id]
    with pytest.raises(InvalidInput, match="unknown job state"):
        jobs.list_jobs(root, state="exploded")
    with pytest.raises(InvalidInput, match="unknown job kind"):
        jobs.enqueue("no.such.kind", "site")


def test_prune_forgets_old_finished_jobs(runtime: Runtime, jobs: JobService) -> None:
    jobs.enqueue("test.record", "repo:1")
    jobs.enqueue("test.give_up", "repo:2")
    runner = JobRunner(runtime, role="test")
    while runner.run_one():
        pass
    with runtime.db.session() as session:
        session.execute(update(JobRow).values(finished_at=utcnow() - timedelta(days=2)))
    assert jobs.prune(keep_finished=timedelta(days=1), keep_failed=timedelta(days=30)) == 1
    assert [r.state for r in _rows(runtime)] == ["failed"]


def test_a_batching_kind_runs_its_due_jobs_together(runtime: Runtime, jobs: JobService) -> None:
    for n in range(5):
        jobs.enqueue("test.batch", f"repo:{n}")
    jobs.enqueue("test.batch", "repo:9", delay=3600)  # not due: not taken into a batch
    runner = JobRunner(runtime, role="test")
    while runner.run_one():
        pass
    assert BATCHES == [["repo:0", "repo:1", "repo:2"], ["repo:3", "repo:4"]]
    done = [r for r in _rows(runtime) if r.state == "succeeded"]
    assert [r.result for r in done] == ['{"batched": 3}'] * 3 + ['{"batched": 2}']
    (bad,) = [r for r in _rows(runtime) if r.resource == "repo:4"]
    assert (bad.state, bad.last_error) == ("queued", "RuntimeError: bad one")  # that one alone is retried
    # Draining one resource runs its own job alone, through `run`.


def test_long_running_kinds_get_at_most_half_of_the_threads(runtime: Runtime, jobs: JobService) -> None:
    jobs.enqueue("test.long", "repo:1")
    jobs.enqueue("test.long", "repo:2")
    jobs.enqueue("test.record", "repo:3", {"n": 3}, priority=PRIORITY_SCHEDULED)  # less urgent than the long ones
    runner = JobRunner(runtime, role="test", concurrency=2)
    first = threading.Thread(target=runner.run_one)
    first.start()
    assert started.wait(10)
    # One thread runs a long job: the other takes the short one, though the second long job is more urgent.
    assert runner.run_one()
    assert [resource for _kind, resource, _ in RAN] == ["repo:1", "repo:3"]
    release.set()
    first.join(10)
    assert runner.run_one()
    assert [resource for _kind, resource, _ in RAN] == ["repo:1", "repo:3", "repo:2"]
