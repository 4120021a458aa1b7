"""Many processes, one queue: web replicas, workers and CLI commands on one database, and a worker killed with
SIGKILL in the middle of a job.

On PostgreSQL the journey runs as a deployment would: two `codewell serve --no-jobs` web processes and two
`codewell worker` processes. On SQLite (the embedded default) it runs as one `codewell serve`, which is then
killed with SIGKILL and started again. Either way: two `codewell repos add` at once beside the running
processes end without an error, every repository is indexed exactly once, the interrupted job is taken over
after its lease, no half-built mirror or shard is left, both web processes answer identically, and SIGTERM
ends every process with its children.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import httpx2 as httpx
import pytest
from sqlalchemy import update

from codewell.core.actors import INTERNAL
from codewell.core.settings import Settings
from codewell.db.base import utcnow
from codewell.jobs.models import JobRow
from codewell.jobs.service import Job, JobService
from codewell.repos.service import RepoService, repo_resource
from codewell.runtime import Runtime
from tests.factories import auth_headers, make_token, make_user
from tests.gitfixtures import make_repo

CODEWELL = [sys.executable, "-m", "codewell"]
SLOW_SECONDS = 4


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def descendants(pid: int) -> set[int]:
    """Every live descendant of `pid` (from /proc: children's parent ids)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = [pid]
    while frontier:
        current = frontier.pop()
        for child, parent in parents.items():
            if parent == current and child not in found:
                found.add(child)
                frontier.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@dataclass
class Deployment:
    env: dict[str, str]
    tmp: Path
    processes: dict[str, subprocess.Popen[str]] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)

    def start(self, name: str, *args: str) -> None:
        with (self.tmp / f"{name}.log").open("a") as log:
            self.processes[name] = subprocess.Popen(
                [*CODEWELL, *args], env=self.env, stdout=log, stderr=subprocess.STDOUT, text=True
            )

    def serve(self, name: str, *flags: str) -> None:
        self.ports.setdefault(name, free_port())
        self.start(name, "serve", "--port", str(self.ports[name]), *flags)

    def wait_ready(self, name: str) -> None:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert self.processes[name].poll() is None, self.log(name)
            try:
                if httpx.get(self.url(name, "/readyz"), timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"{name} did not become ready:\n{self.log(name)}")

    def url(self, name: str, path: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}{path}"

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text()

    def stop_all(self) -> dict[str, set[int]]:
        """SIGTERM every process; returns each one's descendants as they were just before."""
        children = {name: descendants(p.pid) for name, p in self.processes.items() if p.poll() is None}
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                raise
        return children


@pytest.fixture
def deployment(tmp_path: Path, settings: Settings) -> Iterator[Deployment]:
    # A git that clones repositories named "slow-*" slowly, so that a job can be caught in the middle.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    real_git = shutil.which("git")
    assert real_git is not None
    fake = bin_dir / "git"
    fake.write_text(f'#!/bin/sh\ncase "$1 $*" in clone*slow-*) sleep {SLOW_SECONDS};; esac\nexec {real_git} "$@"\n')
    fake.chmod(0o755)
    with deployed(tmp_path, settings, PATH=f"{bin_dir}:{os.environ['PATH']}") as found:
        yield found


@contextmanager
def deployed(tmp_path: Path, settings: Settings, **env: str) -> Iterator[Deployment]:
    """A Deployment on `settings`' data dir and database (with `env` on top); its processes killed after."""
    found = Deployment(
        {
            **os.environ,
            "CODEWELL_DATA_DIR": str(settings.data_dir),
            "CODEWELL_DATABASE_URL": settings.database_url,
            "CODEWELL_LOG_LEVEL": "info",
            **env,
        },
        tmp_path,
    )
    try:
        yield found
    finally:
        for process in found.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait(10)


def _jobs(runtime: Runtime, resource: str) -> list[Job]:
    return runtime.get(JobService).list_jobs(INTERNAL, resource=resource, limit=1000)


def _wait(condition: object, what: str, deployment: Deployment, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return
        time.sleep(0.2)
    logs = "\n".join(f"--- {name}\n{deployment.log(name)[-3000:]}" for name in deployment.processes)
    raise AssertionError(f"timed out waiting for {what}\n{logs}")


@pytest.mark.slow(minutes=3)
def test_web_replicas_workers_and_cli_share_one_queue(runtime: Runtime, deployment: Deployment, tmp_path: Path) -> None:
    on_postgres = not runtime.db.is_sqlite
    if on_postgres:
        deployment.serve("web1", "--no-jobs")
        deployment.serve("web2", "--no-jobs")
        deployment.start("worker1", "worker", "--concurrency", "2", "--grace", "5")
        deployment.start("worker2", "worker", "--concurrency", "2", "--grace", "5")
        webs = ["web1", "web2"]
    else:
        deployment.serve("web1")
        webs = ["web1"]
    for web in webs:
        deployment.wait_ready(web)
    admin = auth_headers(make_token(runtime, make_user(runtime, "root", site_admin=True)))
    sources = {
        name: make_repo(tmp_path / "src" / name, {"README.md": f"needle_{name.replace('-', '_')} lives here\n"})
        for name in ("one", "two", "slow-three")
    }

    # Two `codewell repos add` at once, while the web processes answer searches.
    adds = [
        subprocess.Popen(
            [*CODEWELL, "repos", "add", str(sources[name]), "--name", f"local/{name}"],
            env=deployment.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("one", "two")
    ]
    while any(add.poll() is None for add in adds):
        for web in webs:
            assert httpx.get(deployment.url(web, "/.api/search?q=needle"), headers=admin, timeout=30).status_code == 200
        time.sleep(0.2)
    for add in adds:
        _out, err = add.communicate()
        assert add.returncode == 0, err
        assert "Traceback" not in err
        assert "error" not in err.lower()

    # A slow clone, killed in the middle: its job is taken over after the lease.
    resource = _kill_a_worker_mid_sync(runtime, deployment, sources["slow-three"], on_postgres=on_postgres)

    def settled() -> bool:
        jobs = [j for name in sources for j in _jobs(runtime, repo_resource(_repo_id(runtime, name)))]
        return (
            bool(jobs)
            and all(j.state in ("succeeded", "failed", "cancelled") for j in jobs)
            and any(j.kind == "search.index" and j.state == "succeeded" and j.resource == resource for j in jobs)
        )

    _wait(settled, "every repository's jobs to finish", deployment)
    synced = [j for j in _jobs(runtime, resource) if j.kind == "repos.sync"]
    assert [(j.state, j.attempts) for j in synced] == [("succeeded", 2)]
    for name in sources:
        jobs = _jobs(runtime, repo_resource(_repo_id(runtime, name)))
        assert [j.state for j in jobs if j.state == "failed"] == [], jobs
        # Indexed exactly once per repository, whoever ran it.
        for kind in ("search.index", "history.index", "codenav.symbols", "nls.chunks"):
            assert [j.state for j in jobs if j.kind == kind] == ["succeeded"], (name, kind, jobs)
    mirrors = runtime.settings.data_dir / "repos" / "local"
    assert sorted(p.name for p in mirrors.iterdir()) == ["one.git", "slow-three.git", "two.git"]
    shards = runtime.settings.data_dir / "search" / "shards"
    assert not [p for p in shards.rglob("*") if p.name.endswith(".tmp")]

    # Every web process gives the same answers.
    for name in sources:
        needle = f"needle_{name.replace('-', '_')}"
        answers = [
            httpx.get(deployment.url(web, "/.api/search"), params={"q": needle}, headers=admin, timeout=30).json()
            for web in webs
        ]
        files = [[(f["repository"], f["path"]) for f in answer["files"]] for answer in answers]
        assert files[0] == [(f"local/{name}", "README.md")], answers[0]
        assert all(other == files[0] for other in files)

    # SIGTERM ends every process and its children (search pools, resource trackers).
    children = deployment.stop_all()
    for name, process in deployment.processes.items():
        assert process.returncode is not None, name
    # A pool's processes notice their parent's exit within moments; none may outlive that.
    deadline = time.monotonic() + 15
    while True:
        leftover = {name: [pid for pid in pids if alive(pid)] for name, pids in children.items()}
        if all(not pids for pids in leftover.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert all(not pids for pids in leftover.values()), leftover


def _repo_id(runtime: Runtime, name: str) -> int:
    return runtime.get(RepoService).get(INTERNAL, f"local/{name}").id


def _kill_a_worker_mid_sync(runtime: Runtime, deployment: Deployment, source: Path, *, on_postgres: bool) -> str:
    """Add a slowly cloned repository, SIGKILL the process running its sync, let the lease run out; its resource."""
    added = subprocess.run(
        [*CODEWELL, "repos", "add", str(source), "--name", "local/slow-three", "--no-sync"],
        env=deployment.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert added.returncode == 0, added.stderr
    slow = runtime.get(RepoService).get(INTERNAL, "local/slow-three")
    resource = repo_resource(slow.id)

    def running_sync() -> Job | None:
        return next((j for j in _jobs(runtime, resource) if j.kind == "repos.sync" and j.state == "running"), None)

    def cloning() -> bool:
        return runtime.get(RepoService).get(INTERNAL, "local/slow-three").sync_state == "cloning"

    # Leased is not yet started: the worker marks the repository cloning a moment after it takes the job (at load
    # that moment was long enough for the kill to land before it), so the kill waits for the clone itself.
    _wait(lambda: running_sync() is not None and cloning(), "the slow clone to start", deployment)
    job = running_sync()
    assert job is not None
    assert job.lease_owner is not None
    victim_pid = int(job.lease_owner.split(":")[1])
    # A worker of ours, or one of the worker processes `codewell serve` starts beside its own threads.
    victim = next((name for name, p in deployment.processes.items() if p.pid == victim_pid), None)
    os.kill(victim_pid, signal.SIGKILL)
    if victim is not None:
        deployment.processes[victim].wait(10)
    # Nothing half-done is visible: the repository is still cloning, not searchable.
    assert runtime.get(RepoService).get(INTERNAL, "local/slow-three").sync_state == "cloning"
    with runtime.db.session() as session:  # the lease runs out (900 s for a sync): let it end now
        session.execute(update(JobRow).where(JobRow.id == job.id).values(lease_until=utcnow() - timedelta(seconds=1)))
    if victim == "web1":
        deployment.serve("web1")  # the embedded default killed: the restarted server takes its own job over
        deployment.wait_ready("web1")

    return resource


def test_the_worker_processes_of_serve_end_when_it_is_killed(deployment: Deployment) -> None:
    deployment.serve("web1", "--job-processes", "1")
    deployment.wait_ready("web1")
    server = deployment.processes["web1"]

    def workers() -> list[int]:
        found = []
        for pid in descendants(server.pid):
            try:
                if b"worker" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                    found.append(pid)
            except OSError:  # exited meanwhile
                continue
        return found

    _wait(lambda: bool(workers()), "the worker child to start", deployment, timeout=60)
    children = workers()
    os.kill(server.pid, signal.SIGKILL)  # no chance to stop its children: the kernel tells them
    server.wait(10)
    _wait(lambda: not any(alive(pid) for pid in children), "the orphaned worker to exit", deployment, timeout=30)
