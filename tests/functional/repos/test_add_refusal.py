"""`codewell repos add` of something that is not a git repository (issue #32, item 6): refused before the row
exists, with git's reason, and nothing left behind (no entry, no mirror, no job)."""

from __future__ import annotations

import http.server
import os
import socket
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import cliprocess
from tests.gitfixtures import make_repo


def run(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CODEWELL_DATA_DIR": str(data), "COLUMNS": "200"}
    env.pop("CODEWELL_DATABASE_URL", None)  # the data dir's SQLite database, read below
    return cliprocess.run(*args, env=env, timeout=120)


@pytest.fixture
def not_git_http() -> Iterator[str]:
    """A real HTTP server that answers 404 to everything: a URL that is no git repository."""

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_error(404)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/team/app.git"
    finally:
        server.shutdown()
        server.server_close()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _rows(data: Path, table: str) -> int:
    with sqlite3.connect(data / "codewell.db") as db:
        count: int = db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    return count


def test_add_refuses_what_is_not_a_git_repository_and_leaves_nothing(tmp_path: Path, not_git_http: str) -> None:
    data = tmp_path / "data"
    assert run(data, "db", "upgrade").returncode == 0
    plain = tmp_path / "notes"
    plain.mkdir()
    (plain / "todo.txt").write_text("a directory, not a repository\n")
    broken = tmp_path / "broken"
    (broken / ".git").mkdir(parents=True)  # looks like a work tree, is none: git cannot read it
    candidates = {
        str(plain): "is not a git repository",
        str(broken): "is not a git repository",
        not_git_http: "is not a git repository git can read",
        f"https://127.0.0.1:{_closed_port()}/org/repo.git": "is not a git repository git can read",
    }
    for url, said in candidates.items():
        refused = run(data, "repos", "add", url)
        assert refused.returncode == 1, (url, refused.stdout)
        assert said in refused.stderr, (url, refused.stderr)
        assert "added" not in refused.stdout
        assert "Traceback" not in refused.stderr
    # Nothing behind: no entry to list, no row, no mirror, no queued sync.
    assert run(data, "repos", "list").stdout == ""
    assert _rows(data, "repos") == 0
    assert _rows(data, "jobs") == 0
    assert not (data / "repos").exists() or not any((data / "repos").rglob("*"))
    # The same command with a real repository still registers and clones it.
    source = make_repo(tmp_path / "proj", {"a.txt": "a\n"})
    added = run(data, "repos", "add", str(source), "--name", "local/proj")
    assert added.returncode == 0, added.stderr
    assert run(data, "repos", "list").stdout.splitlines() == ["local/proj"]
