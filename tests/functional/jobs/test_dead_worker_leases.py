"""A job worker child of `codewell serve` killed with SIGKILL (the soak of #33, bench/soak_bench.py): the server
releases the jobs the dead process was running (jobs/children.py), so that they, and their repository's next
jobs, are taken over at once instead of when their leases run out (600 s for an index build)."""

from __future__ import annotations

import socket

from codewell.jobs.service import JobService
from codewell.runtime import Runtime

SYNC = frozenset({"repos.sync"})


def test_the_running_jobs_of_a_dead_process_are_released_and_no_others(runtime: Runtime) -> None:
    jobs = runtime.get(JobService)
    host = socket.gethostname()[:40]
    jobs.enqueue("repos.sync", "repo:901", {"repo_id": 901})
    jobs.enqueue("repos.sync", "repo:902", {"repo_id": 902})
    dead = jobs.claim(f"{host}:4242:worker:aaaa1111", SYNC, "repo:901")
    # A live process whose pid starts with the dead one's digits, and the same pid on another host.
    alive = jobs.claim(f"{host}:42421:worker:bbbb2222", SYNC, "repo:902")
    assert dead is not None
    assert alive is not None
    assert jobs.claim("elsewhere:4242:worker:cccc3333", SYNC) is None  # the leases hold both

    assert jobs.release_process(socket.gethostname(), 4242) == 1
    taken = jobs.claim("elsewhere:4242:worker:cccc3333", SYNC)
    assert taken is not None
    assert (taken.id, taken.attempt) == (dead.id, 2)
    assert jobs.claim("elsewhere:4242:worker:cccc3333", SYNC) is None  # the live process keeps its job
    assert jobs.release_process(socket.gethostname(), 4242) == 0  # nothing of the dead process is left running
