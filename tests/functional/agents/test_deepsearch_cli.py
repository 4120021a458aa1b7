"""`codewell deepsearch ...` as an admin runs it: a real process, real git, real exit codes."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from tests import cliprocess
from tests.gitfixtures import make_repo

FILES = {
    "src/retry.py": "def retry_with_backoff(call):\n    # wait longer after each failure\n    return call()\n",
    "src/other.py": "def unrelated():\n    return 2\n",
}


def run(data: Path, *args: str, database_url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CODEWELL_DATA_DIR": str(data), "CODEWELL_DATABASE_URL": database_url, "COLUMNS": "200"}
    return cliprocess.run(*args, env=env, timeout=120)


def test_deepsearch_commands(tmp_path: Path, database_url: str) -> None:
    data = tmp_path / "data"
    source = make_repo(tmp_path / "proj", FILES)
    # --public: alice (no grant) asks about it; unmarked repositories are private by default.
    added = run(data, "repos", "add", str(source), "--name", "local/proj", "--public", database_url=database_url)
    assert added.returncode == 0
    assert run(data, "index", "local/proj", "--force", "--workers", "1", database_url=database_url).returncode == 0
    assert run(data, "users", "create", "alice", "--service-account", database_url=database_url).returncode == 0

    asked = run(
        data, "deepsearch", "ask", "--user", "alice", "How", "does", "retry_with_backoff", "wait?",
        database_url=database_url,
    )  # fmt: skip
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout.startswith('---\ntitle: "How does retry_with_backoff wait?"\n')
    assert "\nstatus: completed\n" in asked.stdout
    assert "## Sources\n\n- [local/proj – src/retry.py:1-" in asked.stdout

    listed = run(data, "deepsearch", "list", "--user", "alice", database_url=database_url)
    assert listed.returncode == 0, listed.stderr
    token = re.search(r"^completed\s+\S+\s+([0-9a-f-]{36})  How does retry_with_backoff wait\?$", listed.stdout, re.M)
    assert token is not None, listed.stdout
    shown = run(data, "deepsearch", "show", token.group(1), database_url=database_url)
    assert shown.returncode == 0
    assert shown.stdout == asked.stdout

    refused = run(data, "deepsearch", "share", token.group(1), database_url=database_url)
    assert refused.returncode == 1
    assert refused.stderr.startswith("error: sharing deep search conversations is turned off on this instance\nhint: ")
    (data / "site-config.json").write_text(json.dumps({"deepSearch": {"sharing": {"enabled": True}}}))
    shared = run(data, "deepsearch", "share", token.group(1), database_url=database_url)
    assert shared.returncode == 0, shared.stderr
    assert re.fullmatch(r"http://\S+/deepsearch/shared/[0-9a-f-]{36}\n", shared.stdout)

    queued = run(
        data,
        "deepsearch",
        "ask",
        "--user",
        "alice",
        "--no-wait",
        "Where",
        "is",
        "unrelated?",
        database_url=database_url,
    )
    assert queued.returncode == 0
    assert queued.stdout.startswith("Link: http://")
    cancelled = run(data, "deepsearch", "cancel", queued.stdout.split()[1], database_url=database_url)
    assert cancelled.stdout.endswith(": cancelled\n")
    missing = run(data, "deepsearch", "show", "00000000-0000-4000-8000-000000000000", database_url=database_url)
    assert (missing.returncode, missing.stderr.splitlines()[0]) == (1, "error: deep search conversation not found")
    assert run(data, "deepsearch", "delete", token.group(1), database_url=database_url).stdout == "deleted\n"
