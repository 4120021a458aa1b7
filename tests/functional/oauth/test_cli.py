"""`codewell oauth clients ...` as an administrator runs it (in-process through click, against the test
database: a process start per command would make this test slow for no extra coverage)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from click.testing import CliRunner

from codewell.cli.main import cli
from codewell.core.settings import Settings


@dataclass
class Outcome:
    returncode: int
    stdout: str
    stderr: str


def run(settings: Settings, *args: str) -> Outcome:
    root = ["--data-dir", str(settings.data_dir), "--database-url", settings.database_url]
    result = CliRunner().invoke(cli, [*root, "oauth", "clients", *args])
    return Outcome(result.exit_code, result.stdout, result.stderr)


def test_add_list_remove_static_clients(settings: Settings) -> None:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    added = run(settings, "add", "Claude Code", "--redirect-uri", "http://localhost:3334/oauth/callback")
    assert added.returncode == 0, added.stderr
    client_id = added.stdout.split("client_id: ")[1].split()[0]
    assert "client_secret" not in added.stdout
    secret = run(settings, "add", "Bot", "--redirect-uri", "https://bot.example.com/cb", "--confidential")
    assert "client_secret: cwcs_" in secret.stdout
    listed = json.loads(run(settings, "list", "--json", "--kind", "static").stdout)
    assert [c["client_name"] for c in listed] == ["Claude Code", "Bot"]
    assert listed[0]["redirect_uris"] == ["http://localhost:3334/oauth/callback"]
    assert run(settings, "remove", client_id).returncode == 0
    again = run(settings, "remove", client_id)
    assert again.returncode == 1
    assert f"error: no OAuth client '{client_id}'" in again.stderr
    bad = run(settings, "add", "X", "--redirect-uri", "http://evil.example/cb")
    assert bad.returncode == 1
    assert "is not allowed" in bad.stderr
