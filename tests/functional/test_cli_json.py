"""`--json` on the listing and search commands answers what the REST API answers for the same data, and piped
tables print every value whole: real `codewell` processes over the data dir an in-process app serves."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from starlette.testclient import TestClient

from codewell.cli.main import cli
from codewell.core.settings import Settings
from codewell.runtime import Runtime
from tests import cliprocess
from tests.factories import auth_headers, make_token, make_user
from tests.gitfixtures import make_repo

# Longer than the 80 columns rich assumes when stdout is not a terminal: cut to "github.com/acme-platf…" before.
LONG_NAME = "github.com/acme-platform-engineering/a-repository-whose-name-is-longer-than-eighty-columns"


def run(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    """A real `codewell` process on the test's data dir and database; stdout is a file, as in `codewell ... | less`.
    COLUMNS is left out: a pipe has no width of its own."""
    env = {key: value for key, value in os.environ.items() if key != "COLUMNS"}
    env |= {"CODEWELL_DATA_DIR": str(settings.data_dir), "CODEWELL_DATABASE_URL": settings.database_url}
    result = cliprocess.run(*args, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    return result


def run_json(settings: Settings, *args: str) -> Any:
    return json.loads(run(settings, *args, "--json").stdout)


def add_indexed_repo(settings: Settings, tmp_path: Path) -> None:
    files = {
        "src/retry.py": "def retry_with_backoff(call):\n    # wait longer after each failure\n    return call()\n",
        "src/other.py": "def unrelated():\n    return 2\n",
    }
    source = make_repo(tmp_path / "proj", files)
    run(settings, "repos", "add", str(source), "--name", LONG_NAME)
    run(settings, "index", LONG_NAME, "--force", "--workers", "1")


def test_json_outputs_match_the_rest_answers(
    tmp_path: Path, settings: Settings, runtime: Runtime, client: TestClient
) -> None:
    add_indexed_repo(settings, tmp_path)
    headers = auth_headers(make_token(runtime, make_user(runtime, "admin", site_admin=True)))

    def rest(path: str, **params: str) -> Any:
        response = client.get(path, params=params, headers=headers)
        assert response.status_code == 200, response.text
        return response.json()

    listed = run_json(settings, "repos", "list")
    assert [repo["name"] for repo in listed["repos"]] == [LONG_NAME]
    assert listed == rest("/.api/repos", limit="1000")

    searched = run_json(settings, "search", "retry_with_backoff")
    answered = rest("/.api/search", q="retry_with_backoff")
    assert searched["files"][0]["repository"] == LONG_NAME
    assert searched["files"][0]["lineMatches"][0]["lineNumber"] == 1
    # The same answer but for the time each search took.
    assert {**searched, "durationMs": 0} == {**answered, "durationMs": 0}

    status = run_json(settings, "index", "--status")
    assert status["repositories"][0]["repository"] == LONG_NAME
    assert status["repositories"][0]["state"] == "indexed"
    assert status == rest("/.api/search/status")

    question = "how do we retry after failures?"
    answer = run_json(settings, "nls", *question.split())
    assert answer["results"][0]["path"] == "src/retry.py"
    assert answer == rest("/.api/nls/search", q=question)

    roles = run_json(settings, "roles", "list")
    assert roles["roles"]
    assert roles == rest("/.api/roles")


def test_piped_tables_print_long_names_whole(tmp_path: Path, settings: Settings) -> None:
    add_indexed_repo(settings, tmp_path)
    for args in (("repos", "status"), ("index", "--status")):
        printed = run(settings, *args).stdout
        row = next(line for line in printed.splitlines() if "github.com/" in line)
        assert LONG_NAME in row, printed
        assert "…" not in printed, printed


# Commands that print no listing: they change something, serve, or write another format (the CSV report,
# the site config, which `config show` prints as JSON already). Every other command must take --json.
NOT_LISTINGS = {
    "analytics rebuild", "analytics report", "analytics tokens create", "analytics tokens revoke",
    "codehosts sync", "codehosts sync-repo", "codehosts sync-user", "codeintel autoindex", "codeintel upload",
    "config show", "config validate", "credits allocate", "db upgrade", "deepsearch cancel", "deepsearch delete",
    "deepsearch share", "history reindex", "jobs cancel", "jobs retry", "license clear", "license set", "login",
    "logout", "oauth clients add", "oauth clients remove", "repos add", "repos remove", "repos sync",
    "roles assign", "roles create", "roles delete", "roles grant", "roles rename", "roles revoke",
    "roles unassign", "searcher drain", "serve", "tokens create", "tokens revoke", "users create",
    "users delete", "users reset-link", "users set-admin", "users unlock", "users verify-email", "worker",
}  # fmt: skip


def _leaves(group: click.Group, ctx: click.Context, path: tuple[str, ...] = ()) -> Iterator[tuple[str, click.Command]]:
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        if isinstance(command, click.Group):
            yield from _leaves(command, ctx, (*path, name))
        else:
            yield " ".join((*path, name)), command


def test_every_listing_command_takes_json() -> None:
    commands = dict(_leaves(cli, click.Context(cli)))
    assert set(commands) >= NOT_LISTINGS, NOT_LISTINGS - set(commands)
    missing = [
        name
        for name, command in commands.items()
        if name not in NOT_LISTINGS and not any("--json" in getattr(p, "opts", ()) for p in command.params)
    ]
    assert missing == []


def test_json_of_grants_permissions_and_migrations(
    tmp_path: Path, settings: Settings, runtime: Runtime, client: TestClient
) -> None:
    add_indexed_repo(settings, tmp_path)
    admin = make_user(runtime, "admin", site_admin=True)
    make_user(runtime, "carol")
    headers = auth_headers(make_token(runtime, admin))
    run(settings, "users", "repos", "carol", "--set", LONG_NAME)
    granted = run_json(settings, "users", "repos", "carol")
    assert granted == {"repos": [LONG_NAME]}
    assert granted == client.get("/.api/users/carol/repos", headers=headers).json()

    permissions = run_json(settings, "roles", "permissions")["permissions"]
    assert {"name", "description"} == set(permissions[0])
    assert "MCP#ACCESS" in [p["name"] for p in permissions]

    migrations = run_json(settings, "db", "status")
    assert migrations["pending"] is False
    assert migrations["applied"] == migrations["latest"] != []

    # One job as JSON: the same object `jobs list --json` prints for it.
    listed = [json.loads(line) for line in run(settings, "jobs", "list", "--json", "--limit", "5").stdout.splitlines()]
    assert listed
    assert run_json(settings, "jobs", "show", str(listed[0]["id"]), "--json") == listed[0]
