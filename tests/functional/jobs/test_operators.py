"""What operators see of the job queue: per-repository stages, /site-admin/jobs with Cancel and Retry, the
`codewell jobs` commands and the queue metrics."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from starlette.testclient import TestClient

from codewell.core.actors import INTERNAL
from codewell.jobs.service import JobService
from codewell.repos.service import RepoService, repo_resource
from codewell.runtime import Runtime
from tests import cliprocess
from tests.factories import auth_headers, make_token, make_user
from tests.gitfixtures import make_bare, make_repo, register_local_repo


def _env(runtime: Runtime) -> dict[str, str]:
    return {
        **os.environ,
        "CODEWELL_DATA_DIR": str(runtime.settings.data_dir),
        "CODEWELL_DATABASE_URL": runtime.settings.database_url,
    }


def _csrf(client: TestClient, headers: dict[str, str]) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/settings", headers=headers).text)
    assert found
    return found.group(1)


def test_every_stage_of_a_repository_and_a_failed_sync_are_shown(
    client: TestClient, runtime: Runtime, tmp_path: Path
) -> None:
    repo = register_local_repo(runtime, make_repo(tmp_path / "ok", {"a.py": "def alpha():\n    return 1\n"}), "acme/ok")
    stages = runtime.get(JobService).stages([repo_resource(repo.id)])[repo_resource(repo.id)]
    assert stages == {"mirror": "done", "search": "done", "history": "done", "symbols": "done", "nls": "done"}

    repos = runtime.get(RepoService)
    # Registering checks that a file:// repository exists; it disappears before its first sync.
    make_bare(tmp_path / "missing.git", make_repo(tmp_path / "gone", {"a.txt": "a\n"}))
    repos.add_repo(INTERNAL, f"file://{tmp_path}/missing.git", name="acme/broken")
    shutil.rmtree(tmp_path / "missing.git")
    outcome = repos.sync_repo(INTERNAL, "acme/broken")
    assert not outcome.ok
    broken = repos.get(INTERNAL, "acme/broken")
    (failed,) = runtime.get(JobService).list_jobs(INTERNAL, state="failed")
    assert (failed.kind, failed.resource) == ("repos.sync", repo_resource(broken.id))
    assert failed.last_error is not None
    assert "missing.git" in failed.last_error

    admin = auth_headers(make_token(runtime, make_user(runtime, "root", site_admin=True)))
    page = client.get("/site-admin/jobs", headers=admin)
    assert page.status_code == 200
    assert re.search(r'<tr data-kind="repos.sync">.*?data-field="failed">1<', page.text, re.S)
    assert f'<tr data-job="{failed.id}">' in page.text
    assert "missing.git" in page.text
    assert 'id="no-workers"' in page.text  # no process runs jobs in this test: the page says so
    repos_page = client.get("/site-admin/repositories", headers=admin)
    assert "failed: sync of acme/broken failed" in repos_page.text

    token = _csrf(client, admin)
    retried = client.post(
        f"/site-admin/jobs/{failed.id}/retry", data={"csrf_token": token}, headers=admin, follow_redirects=False
    )
    assert retried.status_code == 303
    assert runtime.get(JobService).get(INTERNAL, failed.id).state == "queued"
    assert f"Job {failed.id} was queued again." in client.get(retried.headers["location"], headers=admin).text
    cancelled = client.post(
        f"/site-admin/jobs/{failed.id}/cancel", data={"csrf_token": token}, headers=admin, follow_redirects=False
    )
    assert cancelled.status_code == 303
    assert runtime.get(JobService).get(INTERNAL, failed.id).state == "cancelled"
    again = client.post(f"/site-admin/jobs/{failed.id}/cancel", data={"csrf_token": token}, headers=admin)
    assert again.status_code == 400
    assert "already cancelled" in again.text

    metrics = client.get("/metrics", headers=admin).text
    assert 'codewell_jobs{kind="repos.sync",state="queued"} 0.0' in metrics
    assert 'codewell_jobs{kind="search.index",state="failed"} 0.0' in metrics
    assert "codewell_jobs_claimed_total" in metrics


def test_jobs_commands_list_show_cancel_and_retry(runtime: Runtime, tmp_path: Path) -> None:
    repos = runtime.get(RepoService)
    repos.add_repo(INTERNAL, str(make_repo(tmp_path / "src", {"a": "a\n"})), name="acme/queued")
    env = _env(runtime)
    listed = cliprocess.run("jobs", "list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    (job,) = [json.loads(line) for line in listed.stdout.splitlines()]
    assert (job["kind"], job["state"], job["cause"], job["priority"]) == ("repos.sync", "queued", "repo.added", 0)
    stats = cliprocess.run("jobs", "stats", "--json", env=env)
    sync_stats = next(s for s in json.loads(stats.stdout) if s["kind"] == "repos.sync")
    assert (sync_stats["queued"], sync_stats["running"], sync_stats["failed"]) == (1, 0, 0)
    shown = cliprocess.run("jobs", "show", str(job["id"]), env=env)
    assert f"resource: {job['resource']}" in shown.stdout
    cancelled = cliprocess.run("jobs", "cancel", str(job["id"]), env=env)
    assert cancelled.stdout.strip() == f"job {job['id']} cancelled"
    retried = cliprocess.run("jobs", "retry", str(job["id"]), env=env)
    assert retried.stdout.strip() == f"job {job['id']} queued"
    missing = cliprocess.run("jobs", "cancel", "999999", env=env)
    assert missing.returncode == 1
    assert "job 999999 not found" in missing.stderr
    status = cliprocess.run("repos", "status", "acme/queued", "--json", env=env)
    assert status.returncode == 0, status.stderr
    # The mirror stage: its sync waits for a process that runs jobs; nothing after it was enqueued yet.
    assert json.loads(status.stdout)["stages"] == {"mirror": "queued"}
    unknown = cliprocess.run("worker", "--kinds", "no.such", env=env)
    assert unknown.returncode == 1
    assert "unknown job kinds: no.such" in unknown.stderr
