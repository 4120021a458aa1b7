"""`codewell history ...` in a real subprocess against a data dir prepared by the test."""

from __future__ import annotations

import subprocess
from pathlib import Path

from codewell.core.actors import INTERNAL
from codewell.core.settings import Settings
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from tests import cliprocess
from tests.unit.history.builders import RepoBuilder, register


def run_cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    command = [
        "--data-dir",
        str(settings.data_dir),
        "--database-url",
        settings.database_url,
        "history",
        *args,
    ]
    return cliprocess.run(*command, timeout=120)


def test_reindex_and_search(runtime: Runtime, settings: Settings, tmp_path: Path) -> None:
    work = RepoBuilder(tmp_path / "w")
    work.commit("Initial commit", {"a": "1\n"}, date="2024-01-01T00:00:00Z")
    register(runtime, work.path, "cli.example/w")
    work.commit("Second commit", {"a": "2\n"}, date="2024-01-02T00:00:00Z")
    # Fetch into the mirror without the listener: only `reindex` can make the new commit visible.
    mirror = runtime.get(RepoService).get(INTERNAL, "cli.example/w").mirror_path
    subprocess.run(
        ["git", "--git-dir", str(mirror), "fetch", "-q", str(work.path), "+refs/heads/*:refs/heads/*"], check=True
    )
    before = run_cli(settings, "search", "--repo", "cli.example/w", "--message", "second")
    assert before.returncode == 0, before.stderr
    assert "Second commit" not in before.stdout
    reindex = run_cli(settings, "reindex", "cli.example/w")
    assert reindex.returncode == 0, reindex.stderr
    assert "cli.example/w: 1 new commits" in reindex.stdout
    after = run_cli(settings, "search", "--repo", "cli.example/w", "--message", "second")
    assert "cli.example/w@" in after.stdout
    assert "Second commit" in after.stdout
    bad = run_cli(settings, "search", "--repo", "cli.example/w", "--after", "soon")
    assert bad.returncode == 1
    assert "error: cannot parse `after`" in bad.stderr
    assert "Traceback" not in bad.stderr
