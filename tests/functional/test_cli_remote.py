"""`codewell --server URL`: the command line against a live `codewell serve`, with an access token.

One real server on loopback holds one repository; the CLI runs in fresh processes whose own data directory is
empty (so every answer must come from the server), and its `--json` output must be the REST route's body. Then
the failures a person meets (a refused token, a server that is not there, a URL that is not one, a local-only
command) must each say what happened in one line, and `codewell login` must keep the token where only its owner
can read it.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from codewell.accounts.cli import TOKEN_SCOPES
from codewell.accounts.tokens import SCOPES
from codewell.core.settings import Settings
from codewell.jobs.cli import JOB_STATES
from codewell.jobs.models import STATES
from codewell.runtime import Runtime
from tests.factories import auth_headers, make_token, make_user
from tests.functional.jobs.test_processes import CODEWELL, Deployment, deployed, free_port
from tests.gitfixtures import make_repo

REPO = "local/app"
FILES = {
    "app/config.py": 'def load_settings(path):\n    """Read the settings file."""\n    return open(path).read()\n',
    "app/main.py": (
        "from app.config import load_settings\n\n\ndef run():\n    return load_settings('zebra_needle.ini')\n"
    ),
}


@pytest.fixture
def served(runtime: Runtime, settings: Settings, tmp_path: Path) -> Iterator[tuple[Deployment, str]]:
    """A running server with REPO indexed (search, symbols, natural-language chunks) and a user's token."""
    token = make_token(runtime, make_user(runtime, "ada", site_admin=True))
    source = make_repo(tmp_path / "src" / "app", FILES)
    with deployed(tmp_path, settings) as deployment:
        deployment.serve("web")
        deployment.wait_ready("web")
        # Registered only: the server's own jobs clone and index it (this test is about the remote CLI; draining
        # beside a server is tests/functional/jobs/test_processes.py's).
        added = subprocess.run(
            [*CODEWELL, "repos", "add", str(source), "--name", REPO, "--no-sync"],
            env=deployment.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert added.returncode == 0, added.stderr
        _wait_indexed(deployment, token)
        yield deployment, token


def _wait_indexed(deployment: Deployment, token: str) -> None:
    """Until search, definition and nls all answer for REPO (the jobs chain runs after the sync)."""
    headers = auth_headers(token)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        found = httpx.get(deployment.url("web", "/.api/search"), params={"q": "zebra_needle"}, headers=headers)
        definition = httpx.get(
            deployment.url("web", "/.api/codenav/definition"),
            params={"repo": REPO, "path": "app/main.py", "symbol": "load_settings"},
            headers=headers,
        )
        nls = httpx.get(deployment.url("web", "/.api/nls/search"), params={"q": "read settings"}, headers=headers)
        if (
            found.status_code == 200
            and found.json()["matchCount"] > 0
            and definition.status_code == 200
            and definition.json()["definitions"]
            and nls.status_code == 200
            and nls.json()["results"]
        ):
            return
        time.sleep(0.5)
    raise AssertionError(f"{REPO} was not indexed in time:\n{deployment.log('web')[-4000:]}")


def _cli(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """`codewell ARGS` in a fresh process with an empty data directory and config dir of its own."""
    empty = tmp_path / "client-data"
    base = {k: v for k, v in os.environ.items() if not k.startswith("CODEWELL_")}
    full = {
        **base,
        "CODEWELL_DATA_DIR": str(empty),
        "CODEWELL_DATABASE_URL": f"sqlite:///{empty}/absent.db",
        "XDG_CONFIG_HOME": str(tmp_path / "client-config"),
        **(env or {}),
    }
    return subprocess.run([*CODEWELL, *args], env=full, input=stdin, capture_output=True, text=True, timeout=300)


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


def _rest(deployment: Deployment, token: str, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    response = httpx.get(deployment.url("web", path), params=params, headers=auth_headers(token), timeout=60)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _without_timing(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "durationMs"}


@pytest.mark.slow(minutes=2)
def test_reading_commands_against_a_live_server_print_the_rest_answers(
    served: tuple[Deployment, str], tmp_path: Path
) -> None:
    deployment, token = served
    server = deployment.url("web", "")
    env = {"CODEWELL_SERVER": server, "CODEWELL_TOKEN": token}

    # search: --json is GET /.api/search's body; the text is the route's text rendering.
    searched = json.loads(_ok(_cli(tmp_path, "search", "--json", "zebra_needle", env=env)))
    expected = _rest(deployment, token, "/.api/search", {"q": "zebra_needle"})
    assert _without_timing(searched) == _without_timing(expected)
    assert [(f["repository"], f["path"]) for f in searched["files"]] == [(REPO, "app/main.py")]
    text = _ok(_cli(tmp_path, "--server", server, "search", "zebra_needle", env={"CODEWELL_TOKEN": token}))
    assert (
        text.rstrip("\n") == _rest(deployment, token, "/.api/search", {"q": "zebra_needle", "format": "text"})["text"]
    )

    # read: the file's body, and the read_file tool's numbered lines.
    read = json.loads(_ok(_cli(tmp_path, "read", "--json", REPO, "app/config.py", env=env)))
    assert read == _rest(deployment, token, f"/.api/repos/{REPO}/-/file", {"path": "app/config.py"})
    lines = _ok(_cli(tmp_path, "read", REPO, "app/config.py", "--start", "2", "--end", "2", env=env)).splitlines()
    assert lines[0].startswith("URL: http")
    assert lines[1:] == ['2:     """Read the settings file."""']

    # definition and references: from the use in main.py to config.py, and back.
    params = {"repo": REPO, "path": "app/main.py", "symbol": "load_settings"}
    definition = json.loads(_ok(_cli(tmp_path, "definition", "--json", REPO, "app/main.py", "load_settings", env=env)))
    assert definition == _rest(deployment, token, "/.api/codenav/definition", params)
    assert definition["definitions"][0]["path"] == "app/config.py"
    shown = _ok(_cli(tmp_path, "definition", REPO, "app/main.py", "load_settings", env=env))
    assert shown.rstrip("\n") == definition["text"]
    refs = json.loads(_ok(_cli(tmp_path, "references", "--json", REPO, "app/config.py", "load_settings", env=env)))
    assert refs == _rest(deployment, token, "/.api/codenav/references", {**params, "path": "app/config.py"})
    assert {f["path"] for f in refs["files"]} >= {"app/main.py"}

    # nls and commit search.
    nls = json.loads(_ok(_cli(tmp_path, "nls", "--json", "read", "settings", env=env)))
    assert nls == _rest(deployment, token, "/.api/nls/search", {"q": "read settings"})
    commits = json.loads(_ok(_cli(tmp_path, "history", "search", "--repo", REPO, "--json", env=env)))
    assert commits == _rest(deployment, token, "/.api/history/commits", {"repos": REPO, "count": 20})
    assert [c["title"] for c in commits["commits"]] == ["initial commit"]
    log = _ok(_cli(tmp_path, "history", "search", "--repo", REPO, env=env))
    assert log.startswith(f"{REPO}@{commits['commits'][0]['commit'][:12]} ")
    assert log.rstrip().endswith("initial commit")

    # deep search: asked through the API, answered by the server's job runners, read back.
    asked = json.loads(_ok(_cli(tmp_path, "deepsearch", "ask", "--json", "where", "are", "settings", "read", env=env)))
    assert asked["status"] == "completed", asked
    conversation = _rest(deployment, token, f"/.api/deepsearch/{asked['readToken']}")
    assert asked == conversation
    shown = _ok(_cli(tmp_path, "deepsearch", "show", asked["url"], env=env))
    assert shown == conversation["text"]
    listed = json.loads(_ok(_cli(tmp_path, "deepsearch", "list", "--json", env=env)))
    assert [c["readToken"] for c in listed["conversations"]] == [asked["readToken"]]


@pytest.mark.slow(minutes=2)
def test_failures_say_what_happened_in_one_line_and_login_keeps_the_token_private(
    served: tuple[Deployment, str], tmp_path: Path
) -> None:
    deployment, token = served
    server = deployment.url("web", "")

    refused = _cli(tmp_path, "search", "x", env={"CODEWELL_SERVER": server, "CODEWELL_TOKEN": "cwp_" + "0" * 40})
    assert refused.returncode == 1
    assert refused.stderr.splitlines()[0] == f"error: {server} refused the token from CODEWELL_TOKEN (401)"
    assert "codewell login" in refused.stderr
    assert "Traceback" not in refused.stderr

    nobody = f"http://127.0.0.1:{free_port()}"
    unreachable = _cli(tmp_path, "--server", nobody, "read", REPO, "app/main.py", env={"CODEWELL_TOKEN": token})
    assert unreachable.returncode == 1
    assert unreachable.stderr.startswith(f"error: cannot reach {nobody}: ")
    assert "refused" in unreachable.stderr.splitlines()[0].lower()

    for bad in ("codewell.example.com", "ftp://codewell.example.com", "http://"):
        wrong = _cli(tmp_path, "--server", bad, "nls", "anything", env={"CODEWELL_TOKEN": token})
        assert wrong.returncode == 1
        assert wrong.stderr.startswith(f"error: not a server URL: {bad!r}"), wrong.stderr

    # A service error keeps the server's message and hint.
    missing = _cli(tmp_path, "--server", server, "read", "local/nope", "x.py", env={"CODEWELL_TOKEN": token})
    assert missing.returncode == 1
    assert missing.stderr.startswith("error: ")
    assert "local/nope" in missing.stderr

    # A command that only works on local data refuses --server rather than act on this machine.
    local = _cli(tmp_path, "--server", server, "users", "list", env={"CODEWELL_TOKEN": token})
    assert local.returncode == 1
    assert local.stderr.startswith("error: `codewell users list` works on this machine's data directory")

    # `codewell login` keeps the token where only its owner can read it; `logout` forgets it.
    stored = tmp_path / "client-config" / "codewell" / "credentials.json"

    refused = _cli(tmp_path, "login", server, stdin="cwp_" + "1" * 40 + "\n")
    assert refused.returncode == 1
    assert "(401)" in refused.stderr
    assert not stored.exists()

    _ok(_cli(tmp_path, "login", server + "/", stdin=token + "\n"))
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert stat.S_IMODE(stored.parent.stat().st_mode) == 0o700
    assert json.loads(stored.read_text()) == {"servers": {server: {"token": token}}}

    # The stored token is used when CODEWELL_TOKEN is not set.
    found = json.loads(_ok(_cli(tmp_path, "--server", server, "search", "--json", "zebra_needle")))
    assert found["matchCount"] == 1

    _ok(_cli(tmp_path, "logout", server))
    assert json.loads(stored.read_text()) == {"servers": {}}
    anonymous = _cli(tmp_path, "--server", server, "search", "zebra_needle")
    assert anonymous.returncode == 1
    assert "needs a token (401)" in anonymous.stderr


def test_help_choices_spelled_in_the_cli_match_their_sources() -> None:
    """Two option choices are spelled in the command modules so that `--help` imports no database model."""
    assert sorted(TOKEN_SCOPES) == sorted(SCOPES)
    assert JOB_STATES == STATES
