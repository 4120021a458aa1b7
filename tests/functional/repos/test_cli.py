"""`codewell repos ...` as a user runs it: a real process, real git, real exit codes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from tests import cliprocess
from tests.gitfixtures import commit, make_repo


def run(data: Path, *args: str, database_url: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CODEWELL_DATA_DIR": str(data), "COLUMNS": "200"}
    if database_url:
        env["CODEWELL_DATABASE_URL"] = database_url
    return cliprocess.run(*args, env=env, timeout=120)


def test_add_list_status_sync_remove(tmp_path: Path, database_url: str) -> None:
    data = tmp_path / "data"
    source = make_repo(tmp_path / "proj", {"a.txt": "a\n"})
    added = run(data, "repos", "add", str(source), "--name", "local/proj", database_url=database_url)
    assert added.returncode == 0, added.stderr
    assert "added local/proj" in added.stdout
    assert "done" in added.stdout
    assert (data / "repos" / "local" / "proj.git" / "HEAD").is_file()
    assert run(data, "repos", "list", database_url=database_url).stdout.splitlines() == ["local/proj"]
    commit(source, {"b.txt": "b\n"})
    synced = run(data, "repos", "sync", "local/proj", database_url=database_url)
    assert synced.returncode == 0
    assert "synced 1 repositories" in synced.stdout
    status = run(data, "repos", "status", database_url=database_url)
    assert "local/proj" in status.stdout
    assert "ready" in status.stdout
    assert "main" in status.stdout
    removed = run(data, "repos", "remove", "local/proj", database_url=database_url)
    assert removed.returncode == 0
    assert not (data / "repos" / "local" / "proj.git").exists()
    assert run(data, "repos", "list", database_url=database_url).stdout == ""


def test_failures_are_reported_and_recorded(tmp_path: Path, database_url: str) -> None:
    data = tmp_path / "data"
    source = make_repo(tmp_path / "proj", {"a.txt": "a\n"})
    bare = tmp_path / "gone.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(source), str(bare)], check=True, capture_output=True)
    added = run(data, "repos", "add", f"file://{bare}", "--name", "x/gone", "--no-sync", database_url=database_url)
    assert added.returncode == 0, added.stderr
    shutil.rmtree(bare)
    failed = run(data, "repos", "sync", "x/gone", database_url=database_url)
    assert failed.returncode == 1
    assert "x/gone" in failed.stderr
    assert "does not appear to be a git repository" in failed.stderr
    status = run(data, "repos", "status", "x/gone", database_url=database_url)
    assert "failed" in status.stdout
    # A source that is no git repository registers nothing (issue #33): a clear error, no failed entry.
    for url in (f"file://{tmp_path}/absent.git", "file:///etc", str(tmp_path / "proj" / "a.txt"), str(tmp_path)):
        refused = run(data, "repos", "add", url, database_url=database_url)
        assert refused.returncode == 1
        assert "Traceback" not in refused.stderr
    assert run(data, "repos", "list", database_url=database_url).stdout.splitlines() == ["x/gone"]
    dash = run(data, "repos", "add", str(source), "--name", "-rf", database_url=database_url)
    assert dash.returncode != 0
    assert run(data, "repos", "list", database_url=database_url).stdout.splitlines() == ["x/gone"]
    missing = run(data, "repos", "add", str(tmp_path / "nowhere"), database_url=database_url)
    assert missing.returncode == 1
    assert "is not a directory" in missing.stderr
    assert "Traceback" not in missing.stderr
    unknown = run(data, "repos", "sync", "no/such", database_url=database_url)
    assert unknown.returncode == 1
    assert "repository 'no/such' not found" in unknown.stderr


def test_sync_reconciles_the_site_config_first(tmp_path: Path, database_url: str) -> None:
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    make_repo(tmp_path / "code" / "svc", {"main.go": "package main\n"})
    config = {"repositories": [{"kind": "local", "path": str(tmp_path / "code"), "prefix": "corp"}]}
    (data / "site-config.json").write_text(json.dumps(config))
    synced = run(data, "repos", "sync", database_url=database_url)
    assert synced.returncode == 0, synced.stderr
    assert run(data, "repos", "list", database_url=database_url).stdout.splitlines() == ["corp/svc"]
