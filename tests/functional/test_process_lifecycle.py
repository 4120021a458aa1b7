"""Every process ends with the one that started it (issue #33 item 4; docs/architecture.md, "Stopping").

Real processes throughout: a process pool whose owner is killed, a pool that outlives the thread that started
it, a pool call that overruns its grace; then `codewell serve` with its search pool busy on an exhaustive
search, stopped with SIGTERM and killed with SIGKILL, and a `codewell worker` stopped with SIGTERM while it
indexes. Afterwards no process of the run is left: none whose environment or command line names the run's data
dir (pool processes and multiprocessing's resource tracker inherit the environment) and none of the
descendants seen before the signal.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import httpx2 as httpx
import pytest

from codewell.core.actors import INTERNAL
from codewell.core.processes import WATCH_SECONDS, process_pool, stop_pool
from codewell.core.settings import Settings
from codewell.jobs.children import STOP_SECONDS
from codewell.jobs.service import Job, JobService
from codewell.repos.service import RepoService, repo_resource
from codewell.runtime import Runtime
from codewell.search.parallel import PARALLEL_MIN_BYTES
from tests.factories import auth_headers, make_token, make_user
from tests.functional.jobs.test_processes import CODEWELL, Deployment, alive, deployed, descendants
from tests.gitfixtures import make_repo

# What docs/architecture.md ("Stopping") promises for `codewell serve` after SIGTERM: 10 s for open requests, 15 s
# for running jobs, 5 s for process pools.
SERVE_STOP_SECONDS = 35
# How long after its parent's end an orphaned pool process or resource tracker may take to notice.
ORPHAN_SECONDS = 5.0
# Extra time for processes to exit when the 2 cores run other work too (a CI run beside benchmarks: load ~17).
LOADED_SECONDS = 20.0
FILE_BYTES = 1_000_000
# Enough text for an exhaustive search to fan out over the search pool, and for the index build's pool.
TEXT_FILES = PARALLEL_MIN_BYTES // FILE_BYTES + 2
# Python source past codenav's 4 MiB threshold for parsing in its pool.
PYTHON_FILES = 12
FUNCTIONS_PER_FILE = 12_000


def processes_of(marker: str) -> dict[int, str]:
    """Live processes whose environment or command line holds `marker`: pid → command line."""
    needle = marker.encode()
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:  # exited meanwhile, or another user's
            continue
        if (needle in environ or needle in cmdline) and alive(int(entry.name)):
            found[int(entry.name)] = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
    return found


def pool_processes(pids: dict[int, str]) -> dict[int, str]:
    return {pid: cmd for pid, cmd in pids.items() if "multiprocessing.spawn" in cmd}


def trackers(pids: dict[int, str]) -> dict[int, str]:
    return {pid: cmd for pid, cmd in pids.items() if "multiprocessing.resource_tracker" in cmd}


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def wait_for(condition: Callable[[], object], what: str, timeout: float, logs: Callable[[], str] = str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{logs()}")


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return "(gone)"


def assert_nothing_left(marker: str, seen: set[int], timeout: float = ORPHAN_SECONDS) -> None:
    """Within `timeout`, no process of the run (by marker) and none of `seen` is alive."""
    deadline = time.monotonic() + timeout
    while True:
        left = {**processes_of(marker), **{pid: "(descendant)" for pid in seen if alive(pid)}}
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not left, f"left running: {left} {[_cmdline(pid) for pid in left]}"


# --- the pool helper on its own ------------------------------------------------------------------------


_OWNER_SCRIPT = """
import json, time
from multiprocessing import resource_tracker
from codewell.core.processes import process_pool
pool = process_pool(2)
busy = [pool.submit(time.sleep, 600) for _ in range(2)]
time.sleep(1.0)  # both processes started
print(json.dumps({"pool": list(pool._processes), "tracker": resource_tracker._resource_tracker._pid}), flush=True)
time.sleep(600)
"""


def test_pool_processes_and_the_resource_tracker_end_when_the_owner_is_killed(tmp_path: Path) -> None:
    marker = f"CODEWELL_LIFECYCLE_{os.getpid()}_{time.monotonic_ns()}"
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER_SCRIPT],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "CODEWELL_TEST_RUN": marker},
    )
    try:
        assert owner.stdout is not None
        started = json.loads(owner.stdout.readline())
        pool, tracker = started["pool"], started["tracker"]
        assert len(pool) == 2
        assert all(parent_of(pid) == owner.pid for pid in pool)
        assert set(processes_of(marker)) == {owner.pid, tracker, *pool}
        # Both pool processes are busy in a call: nothing but the parent's death may stop them.
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(10)
        assert_nothing_left(marker, {tracker, *pool})
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait(10)
        if owner.stdout is not None:
            owner.stdout.close()


def test_a_pool_outlives_the_thread_that_started_it() -> None:
    """The kernel's parent-death signal comes when the *thread* that started a process ends (request threads
    come and go): the pool processes must tell that from their parent's death and stay."""
    pools: list[ProcessPoolExecutor] = []
    started: list[int] = []

    def start_pool() -> None:
        pools.append(process_pool(1))
        started.append(pools[0].submit(os.getpid).result(timeout=60))

    thread = threading.Thread(target=start_pool)
    thread.start()
    thread.join()
    try:
        time.sleep(4 * WATCH_SECONDS)  # the signal came when the thread ended; the watchdog looked several times
        assert alive(started[0])
        assert pools[0].submit(os.getpid).result(timeout=10) == started[0]
    finally:
        stop_pool(pools[0])
    assert not alive(started[0])


def test_stop_pool_ends_a_call_that_overruns_the_grace() -> None:
    pool = process_pool(1)
    running: Future[None] = pool.submit(time.sleep, 600)
    waiting: list[Future[None]] = [pool.submit(time.sleep, 600) for _ in range(4)]
    wait_for(running.running, "the first call to start", 60)
    pids = list(pool._processes)
    began = time.monotonic()
    stop_pool(pool, grace_seconds=0.5)
    took = time.monotonic() - began
    assert took < 3.0, took
    with pytest.raises(BrokenProcessPool):
        running.result(timeout=5)
    # Calls still queued are cancelled; the one already handed to the pool's queue fails with the pool.
    assert all(future.done() for future in waiting)
    assert waiting[-1].cancelled()
    assert not any(alive(pid) for pid in pids)


# --- codewell serve and codewell worker ----------------------------------------------------------------


@pytest.fixture(scope="module")
def big_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One repository big enough for every pool: text for search's and the index builder's, Python for codenav's."""
    rnd = random.Random(33)
    words = ["alpha", "beta", "gamma", "delta", "needle", "orbit", "vector", "matrix", "signal", "ledger"]
    lines = [" ".join(rnd.choices(words, k=8)) + f" {n}\n" for n in range(2000)]
    per_file = FILE_BYTES // (sum(len(line) for line in lines) // len(lines))
    files: dict[str, str] = {f"text/f{n:03}.txt": "".join(rnd.choices(lines, k=per_file)) for n in range(TEXT_FILES)}
    for n in range(PYTHON_FILES):
        files[f"py/m{n:02}.py"] = "".join(
            f"def f_{n}_{k}(x):\n    return x + {k}\n\n\n" for k in range(FUNCTIONS_PER_FILE)
        )
    return make_repo(tmp_path_factory.mktemp("big") / "src", files)


@pytest.fixture
def run(tmp_path: Path, settings: Settings) -> Iterator[Deployment]:
    try:
        with deployed(tmp_path, settings) as found:
            yield found
    finally:
        # Whatever a failed test left: not the next test's problem.
        for pid in processes_of(str(settings.data_dir)):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _jobs(runtime: Runtime, name: str) -> list[Job]:
    repo = runtime.get(RepoService).get(INTERNAL, name)
    return runtime.get(JobService).list_jobs(INTERNAL, resource=repo_resource(repo.id), limit=100)


def _add(run: Deployment, source: Path) -> None:
    """Register the repository; the processes under test sync and index it (`--no-sync`: not this command)."""
    added = subprocess.run(
        [*CODEWELL, "repos", "add", str(source), "--name", "local/big", "--no-sync"],
        env=run.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert added.returncode == 0, added.stderr


def _indexed(runtime: Runtime) -> bool:
    """Searchable: the jobs it causes (codenav's symbols in its pool, nls's chunks) run on while the test goes on."""
    jobs = _jobs(runtime, "local/big")
    assert not [j for j in jobs if j.state == "failed"], jobs
    return any(j.kind == "search.index" and j.state == "succeeded" for j in jobs)


def _serve_with_busy_search_pool(runtime: Runtime, run: Deployment, source: Path) -> tuple[dict[int, str], Path]:
    """`codewell serve` with one worker child, the big repository searchable (its symbols and chunks still being
    built), and an exhaustive search running in the server's search pool; the run's processes at that moment."""
    data_dir = runtime.settings.data_dir
    run.serve("web", "--job-processes", "1", "--job-threads", "2")
    run.wait_ready("web")
    server = run.processes["web"]
    _add(run, source)
    wait_for(lambda: _indexed(runtime), "the repository to be indexed", 300, lambda: run.log("web")[-4000:])
    admin = auth_headers(make_token(runtime, make_user(runtime, "root", site_admin=True)))

    # Every unit of the text holds the phrase's trigrams, so all of it is verified (in the pool), and few lines
    # match: rendering hundreds of thousands of matches would hold the event loop longer than any shutdown.
    query = 'count:all "needle needle needle needle"'

    def search() -> None:
        with contextlib.suppress(httpx.TransportError):  # the server stops under it
            httpx.get(run.url("web", "/.api/search"), params={"q": query}, headers=admin, timeout=120)

    threading.Thread(target=search, daemon=True).start()

    def search_pool_busy() -> bool:
        return any(parent_of(pid) == server.pid for pid in pool_processes(processes_of(str(data_dir))))

    wait_for(search_pool_busy, "the server's search pool to start", 60, lambda: run.log("web")[-4000:])
    time.sleep(0.5)  # the pool process is in the middle of its part of the search
    before = processes_of(str(data_dir))
    assert trackers(before), before  # multiprocessing's resource tracker too, which outlived serve before
    return before, data_dir


@pytest.mark.slow(minutes=2)
def test_sigterm_of_serve_ends_every_process_within_the_stated_time(
    runtime: Runtime, run: Deployment, big_source: Path
) -> None:
    before, data_dir = _serve_with_busy_search_pool(runtime, run, big_source)
    server = run.processes["web"]
    seen = descendants(server.pid)
    began = time.monotonic()
    server.send_signal(signal.SIGTERM)
    server.wait(SERVE_STOP_SECONDS + 10)
    took = time.monotonic() - began
    assert took <= SERVE_STOP_SECONDS, (took, run.log("web")[-4000:])
    assert server.returncode == 0, run.log("web")[-4000:]
    assert_nothing_left(str(data_dir), seen | set(before))


def test_sigkill_of_serve_ends_its_children_and_their_pools(
    runtime: Runtime, run: Deployment, big_source: Path
) -> None:
    before, data_dir = _serve_with_busy_search_pool(runtime, run, big_source)
    server = run.processes["web"]
    seen = descendants(server.pid)
    os.kill(server.pid, signal.SIGKILL)  # no chance to stop anything: each child must notice by itself
    server.wait(10)
    # The worker child gets SIGTERM from the kernel and stops as on a graceful stop; pools end at once. On a
    # loaded machine (CI beside other work) a Python process's own exit takes seconds more: a margin of LOADED.
    assert_nothing_left(str(data_dir), seen | set(before), timeout=STOP_SECONDS + ORPHAN_SECONDS + LOADED_SECONDS)


def test_sigterm_of_a_worker_in_the_middle_of_indexing_ends_its_pools(
    runtime: Runtime, run: Deployment, big_source: Path
) -> None:
    grace = 2.0
    run.start("worker", "worker", "--concurrency", "2", "--grace", str(grace))
    worker = run.processes["worker"]
    _add(run, big_source)
    data_dir = str(runtime.settings.data_dir)

    def pool_at_work() -> bool:
        return any(parent_of(pid) == worker.pid for pid in pool_processes(processes_of(data_dir)))

    wait_for(pool_at_work, "the worker's index build to start its pool", 300, lambda: run.log("worker")[-4000:])
    seen = descendants(worker.pid)
    began = time.monotonic()
    worker.send_signal(signal.SIGTERM)
    worker.wait(grace + 20)
    took = time.monotonic() - began
    # The grace for running jobs, then at most a few seconds for its pools (docs/architecture.md, "Stopping").
    assert took <= grace + 8, (took, run.log("worker")[-4000:])
    assert worker.returncode == 0, run.log("worker")[-4000:]
    assert_nothing_left(data_dir, seen)
