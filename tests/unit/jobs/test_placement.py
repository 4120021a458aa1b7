"""Placement on searcher replicas: rendezvous hashing, jobs targeted at the owner, replicas' own periodic rows,
and queued jobs moving when a replica leaves or drains (jobs/placement.py, JobService)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import update

from codewell.capability import Capability, JobKind, JobRun
from codewell.db.base import utcnow
from codewell.jobs.models import JobRow, JobWorkerRow
from codewell.jobs.placement import SEARCHER, owner, ranked
from codewell.jobs.runner import JobRunner
from codewell.jobs.service import JobService
from codewell.runtime import Runtime

RAN: list[tuple[str, str, str]] = []


def _record(runtime: Runtime, job: JobRun) -> Mapping[str, Any]:
    RAN.append((job.kind, job.resource, job.owner))
    return {}


PLACED = Capability(
    name="placedjobs",
    jobs=[
        JobKind("test.build", _record, "placed on the owner", placed=True),
        JobKind("test.light", _record, "any runner"),
        JobKind("test.each", _record, "periodic on every replica", every=30.0, placed=True),
    ],
)


@pytest.fixture
def jobs(runtime: Runtime) -> JobService:
    runtime.settings = replace(runtime.settings, searchers="database")
    runtime.capabilities = (*runtime.capabilities, PLACED)
    RAN.clear()
    return runtime.get(JobService)


def _rows(runtime: Runtime) -> list[JobRow]:
    with runtime.db.session() as session:
        return list(session.query(JobRow).order_by(JobRow.id))


def _replica(jobs: JobService, name: str) -> None:
    jobs.register_worker(name, SEARCHER, None, 1, address=f"http://127.0.0.1:1/{name}")


def test_rendezvous_moves_only_what_a_new_replica_wins() -> None:
    keys = [f"repo:{n}" for n in range(3000)]
    before = {key: owner(key, ["a", "b", "c"]) for key in keys}
    after = {key: owner(key, ["a", "b", "c", "d"]) for key in keys}
    moved = [key for key in keys if before[key] != after[key]]
    assert all(after[key] == "d" for key in moved)  # nothing moves between the old replicas
    assert 600 < len(moved) < 900  # about a quarter
    shares = {name: sum(1 for v in before.values() if v == name) for name in "abc"}
    assert all(900 < n < 1100 for n in shares.values()), shares
    # The runner-up takes a leaving replica's keys: ranked() is the order of succession.
    for key in keys[:50]:
        order = ranked(key, ["a", "b", "c"])
        assert order[0] == before[key]
        assert owner(key, [n for n in "abc" if n != order[0]]) == order[1]
    assert owner("repo:1", []) is None


def test_placed_jobs_run_on_their_owner_only(runtime: Runtime, jobs: JobService) -> None:
    for name in ("s1", "s2"):
        _replica(jobs, name)
    jobs.enqueue_many("test.build", [(f"repo:{n}", {}) for n in range(20)])
    jobs.enqueue("test.light", "repo:1")
    targets = {r.resource: r.target for r in _rows(runtime) if r.kind == "test.build"}
    assert {targets[f"repo:{n}"] for n in range(20)} == {"s1", "s2"}
    assert all(targets[f"repo:{n}"] == owner(f"repo:{n}", ["s1", "s2"]) for n in range(20))
    # An ordinary runner never runs a placed kind in a cluster; each replica runs its own.
    plain = JobRunner(runtime, role="worker")
    while plain.run_one():
        pass
    assert [("test.light", "repo:1", plain.owner)] == RAN
    for name in ("s1", "s2"):
        runner = JobRunner(runtime, role=SEARCHER, kinds=jobs.placed_kinds(), replica=name)
        while runner.run_one():
            pass
    ran = {resource: who for kind, resource, who in RAN if kind == "test.build"}
    assert ran == targets


def test_queued_jobs_follow_their_repository_when_a_replica_leaves_or_drains(
    runtime: Runtime, jobs: JobService
) -> None:
    for name in ("s1", "s2", "s3"):
        _replica(jobs, name)
    jobs.enqueue_many("test.build", [(f"repo:{n}", {}) for n in range(30)])
    on_s3 = {r.resource for r in _rows(runtime) if r.target == "s3"}
    assert on_s3
    # s3 falls silent: it is out once its heartbeat is stale, and its queued jobs go to their new owners.
    with runtime.db.session() as session:
        session.execute(
            update(JobWorkerRow).where(JobWorkerRow.owner == "s3").values(heartbeat_at=utcnow() - timedelta(seconds=60))
        )
    assert jobs.retarget() == len(on_s3)
    for row in _rows(runtime):
        assert row.target == owner(row.resource, ["s1", "s2"])
    # Draining s2: its jobs move to s1; a job queued meanwhile for a repository s2 owned goes to s1 too.
    assert jobs.set_draining("s2")
    assert not jobs.set_draining("nobody")
    jobs.retarget()
    jobs.enqueue("test.build", "repo:999")
    assert {row.target for row in _rows(runtime)} == {"s1"}


def test_with_no_replica_alive_a_placed_job_waits_for_one(runtime: Runtime, jobs: JobService) -> None:
    jobs.enqueue("test.build", "repo:7")
    assert [r.target for r in _rows(runtime)] == [""]
    plain = JobRunner(runtime, role="worker")
    assert not plain.run_one()  # not run into the wrong data dir
    _replica(jobs, "s1")
    jobs.replicas(fresh=True)
    assert jobs.retarget() == 1
    runner = JobRunner(runtime, role=SEARCHER, kinds=jobs.placed_kinds(), replica="s1")
    assert runner.run_one()
    assert RAN == [("test.build", "repo:7", "s1")]


def test_each_replica_has_its_own_periodic_row(runtime: Runtime, jobs: JobService) -> None:
    each = jobs.kind("test.each")
    jobs.ensure_periodic([each], replica="s1")
    jobs.ensure_periodic([each], replica="s2")
    jobs.ensure_periodic([each], replica="s1")  # idempotent
    rows = [(r.resource, r.target) for r in _rows(runtime) if r.kind == "test.each"]
    assert sorted(rows) == [("replica:s1", "s1"), ("replica:s2", "s2")]
    # Outside a cluster it is the site's one row, as before.
    runtime.settings = replace(runtime.settings, searchers="")
    jobs.ensure_periodic([each])
    assert ("site", "") in [(r.resource, r.target) for r in _rows(runtime) if r.kind == "test.each"]
