"""`codewell nls QUESTION` as a user runs it: a real process, real git, real exit codes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests import cliprocess
from tests.gitfixtures import make_repo


def run(data: Path, *args: str, database_url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CODEWELL_DATA_DIR": str(data), "CODEWELL_DATABASE_URL": database_url, "COLUMNS": "200"}
    return cliprocess.run(*args, env=env, timeout=120)


def test_nls_command(tmp_path: Path, database_url: str) -> None:
    data = tmp_path / "data"
    files = {
        "src/retry.py": "def retry_with_backoff(call):\n    # wait longer after each failure\n    return call()\n",
        "src/other.py": "def unrelated():\n    return 2\n",
    }
    source = make_repo(tmp_path / "proj", files)
    assert run(data, "repos", "add", str(source), "--name", "local/proj", database_url=database_url).returncode == 0
    indexed = run(data, "index", "local/proj", "--force", "--workers", "1", database_url=database_url)
    assert indexed.returncode == 0, indexed.stderr
    found = run(data, "nls", "how", "do", "we", "retry", "after", "failures?", database_url=database_url)
    assert found.returncode == 0, found.stderr
    assert found.stdout.startswith("Searched for: retri after failur\n\n# local/proj – src/retry.py\n1: def retry_with")
    assert "other.py" not in found.stdout
    bad = run(data, "nls", "what", "is", "the", database_url=database_url)
    assert bad.returncode != 0
    assert "only question and stop words" in bad.stderr
