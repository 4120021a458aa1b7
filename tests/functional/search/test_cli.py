"""`codewell index` and `codewell search` as a user runs them: a real process, real git, real exit codes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests import cliprocess
from tests.gitfixtures import make_repo


def run(data: Path, *args: str, database_url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CODEWELL_DATA_DIR": str(data), "CODEWELL_DATABASE_URL": database_url, "COLUMNS": "200"}
    return cliprocess.run(*args, env=env, timeout=120)


def test_index_status_and_search(tmp_path: Path, database_url: str) -> None:
    data = tmp_path / "data"
    source = make_repo(tmp_path / "proj", {"src/a.py": "def needle_function():\n    return 1\n"})
    assert run(data, "repos", "add", str(source), "--name", "local/proj", database_url=database_url).returncode == 0
    indexed = run(data, "index", "local/proj", "--force", "--workers", "1", database_url=database_url)
    assert indexed.returncode == 0, indexed.stderr
    assert "1 files" in indexed.stdout
    status = run(data, "index", "--status", database_url=database_url)
    assert "local/proj" in status.stdout
    assert "indexed" in status.stdout
    # `codewell repos status` shows the index state next to the sync state.
    repos_status = run(data, "repos", "status", database_url=database_url)
    assert repos_status.returncode == 0, repos_status.stderr
    row = next(line for line in repos_status.stdout.splitlines() if "local/proj" in line)
    assert "indexed 1 files" in row
    found = run(data, "search", "needle_function", database_url=database_url)
    assert found.returncode == 0, found.stderr
    assert found.stdout.startswith("# local/proj – src/a.py\n1: def needle_function():")
    bad = run(data, "search", "x rev:main", database_url=database_url)
    assert bad.returncode != 0
    assert "rev: needs repo:" in bad.stderr
    missing = run(data, "index", "local/nope", database_url=database_url)
    assert missing.returncode != 0


def test_index_of_every_repository_puts_small_ones_in_one_shard(tmp_path: Path, database_url: str) -> None:
    data = tmp_path / "data"
    for n in range(3):
        source = make_repo(tmp_path / f"p{n}", {f"m{n}.py": f"def shared_marker_{n}():\n    return {n}\n"})
        added = run(data, "repos", "add", str(source), "--name", f"local/p{n}", database_url=database_url)
        assert added.returncode == 0, added.stderr
    indexed = run(data, "index", "--force", "--workers", "1", database_url=database_url)
    assert indexed.returncode == 0, indexed.stderr
    assert "3 small repositories" in indexed.stdout
    # One batch, then merged with whatever `repos add` built: one shard holds all three.
    manifest = json.loads((data / "search" / "manifest.json").read_text())
    assert len(set(manifest["repos"].values())) == 1, manifest
    found = run(data, "search", "shared_marker_ count:all", database_url=database_url)
    assert found.returncode == 0, found.stderr
    assert [f"local/p{n}" in found.stdout for n in range(3)] == [True, True, True]
