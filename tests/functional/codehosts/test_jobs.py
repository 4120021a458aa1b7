"""Code host syncs as jobs (codehosts/jobs.py): the periodic schedule enqueues per-connection discoveries and
permission syncs, which any job runner runs once; a sign-in enqueues the user's sync and waits for it."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from codewell.codehosts.jobs import DISCOVER, PERMISSIONS, SCHEDULE, USER_PERMISSIONS
from codewell.core.actors import INTERNAL
from codewell.jobs.runner import JobRunner
from codewell.jobs.service import PRIORITY_PERSON, SITE, Job, JobService
from codewell.runtime import Runtime
from tests.factories import actor_of_user, make_user
from tests.fakes.codehosts import FakeCodeHost, HostUser
from tests.functional.codehosts.conftest import add_repo, connect, sign_in_at_host, visible

pytestmark = pytest.mark.database


@pytest.fixture
def acme(host: FakeCodeHost, tmp_path: Path) -> FakeCodeHost:
    host.add(HostUser(11, "alice", "Alice", emails=[("alice@example.com", True)]))
    add_repo(host, None, 101, "acme/public", visibility="public")
    add_repo(host, None, 102, "acme/secret", visibility="private", members={"alice": 30})
    return host


def run(runtime: Runtime, kind: str) -> bool:
    """Claim and run one due job of `kind` in this thread, as any worker process would."""
    return JobRunner(runtime, role="test", kinds=frozenset({kind})).run_one()


def jobs_of(runtime: Runtime, kind: str) -> list[Job]:
    return runtime.get(JobService).list_jobs(INTERNAL, kind=kind)


def tick(runtime: Runtime) -> None:
    """Make the periodic schedule due now (it is queued again 5 s after each run) and run it."""
    runtime.get(JobService).enqueue(SCHEDULE, SITE, cause="test")
    assert run(runtime, SCHEDULE)


def test_the_schedule_enqueues_what_is_due_and_the_jobs_do_it(
    runtime: Runtime, client: TestClient, acme: FakeCodeHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "codehost-sync" not in [name for name, _ in runtime.background]  # no loop in every serve process
    connect(runtime, acme, monkeypatch, orgs=["acme"], syncIntervalSeconds=600)
    alice = make_user(runtime, "alice", email="alice@example.com")
    calls = len(acme.api_requests)
    tick(runtime)
    assert len(acme.api_requests) == calls  # the schedule only enqueues: no host call in it
    (discovery,) = jobs_of(runtime, DISCOVER)
    assert (discovery.resource, discovery.state, discovery.payload) == (
        "codehost:main",
        "queued",
        {"connection_id": "main"},
    )
    tick(runtime)  # due still, but its job is queued: no second one (nor for a second process's schedule)
    assert len(jobs_of(runtime, DISCOVER)) == 1
    assert jobs_of(runtime, PERMISSIONS) == []  # permissions wait for the discovery

    assert run(runtime, DISCOVER)
    (discovery,) = jobs_of(runtime, DISCOVER)
    assert discovery.state == "succeeded"
    assert discovery.result is not None
    assert sorted(discovery.result["added"]) == ["127.0.0.1/acme/public", "127.0.0.1/acme/secret"]
    assert visible(runtime, actor_of_user(runtime, alice)) == {"acme/public"}

    tick(runtime)  # discovered 600 s ahead; permissions never synced: due
    assert len(jobs_of(runtime, DISCOVER)) == 1
    (perms,) = jobs_of(runtime, PERMISSIONS)
    assert perms.state == "queued"
    assert run(runtime, PERMISSIONS)
    assert jobs_of(runtime, PERMISSIONS)[0].result == {"repositories": 1, "users": 0}
    tick(runtime)
    assert [j.state for j in jobs_of(runtime, PERMISSIONS)] == ["succeeded"]  # nothing due any more
    assert not run(runtime, DISCOVER)


def test_sign_in_runs_the_user_sync_as_a_job_when_no_runner_would(
    runtime: Runtime, client: TestClient, acme: FakeCodeHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    connect(runtime, acme, monkeypatch, orgs=["acme"])
    alice = make_user(runtime, "alice", email="alice@example.com")
    tick(runtime)
    assert run(runtime, DISCOVER)
    assert runtime.get(JobService).live_workers() == []
    sign_in_at_host(client, runtime, "alice", acme)
    # The page after the sign-in already sees what the host grants: the sign-in drained the job itself.
    assert visible(runtime, actor_of_user(runtime, alice)) == {"acme/public", "acme/secret"}
    (job,) = jobs_of(runtime, USER_PERMISSIONS)
    assert (job.resource, job.state, job.priority, job.cause) == (
        f"user:{alice.id}",
        "succeeded",
        PRIORITY_PERSON,
        "sign-in",
    )
    assert job.result == {"connections": ["main"]}


def test_sign_in_waits_for_a_running_job_runner(
    runtime: Runtime, client: TestClient, acme: FakeCodeHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    connect(runtime, acme, monkeypatch, orgs=["acme"])
    alice = make_user(runtime, "alice", email="alice@example.com")
    tick(runtime)
    assert run(runtime, DISCOVER)
    runner = JobRunner(runtime, role="worker", kinds=frozenset({USER_PERMISSIONS}), concurrency=1)
    runner.start()
    try:
        sign_in_at_host(client, runtime, "alice", acme)
        assert visible(runtime, actor_of_user(runtime, alice)) == {"acme/public", "acme/secret"}
    finally:
        runner.stop()
    (job,) = jobs_of(runtime, USER_PERMISSIONS)
    assert job.state == "succeeded"
