"""`codewell credits ...` and `codewell analytics ...` as a user runs them: a real process on the test database."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from codewell.core.settings import Settings
from codewell.runtime import Runtime
from tests import cliprocess
from tests.factories import make_user

pytestmark = pytest.mark.database


def run(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CODEWELL_DATA_DIR": str(settings.data_dir), "CODEWELL_DATABASE_URL": settings.database_url}
    return cliprocess.run(*args, env=env, timeout=120)


def test_credits_and_tokens_from_the_command_line(runtime: Runtime, settings: Settings) -> None:
    make_user(runtime, "ada", site_admin=True)
    allocated = run(settings, "credits", "allocate", "--amount", "500", "--start", "2026-01-01", "--end", "2026-12-31")
    assert allocated.returncode == 0, allocated.stderr
    assert "500 credits, 2026-01-01 to 2026-12-31" in allocated.stdout
    listed = json.loads(run(settings, "credits", "list", "--json").stdout)
    assert [(b["allocation"], b["remaining"]) for b in listed] == [(500, 500)]
    bad = run(settings, "credits", "allocate", "--amount", "5", "--start", "2026-02-30", "--end", "2026-03-01")
    assert bad.returncode == 1
    assert "error: --start must be a date" in bad.stderr
    created = run(settings, "analytics", "tokens", "create", "--user", "ada", "--name", "BI")
    assert created.returncode == 0, created.stderr
    token_id = created.stdout.split()[3]
    assert created.stdout.strip().split()[-1].startswith("cwa_")
    assert "BI" in run(settings, "analytics", "tokens", "list").stdout
    assert run(settings, "analytics", "tokens", "revoke", token_id).returncode == 0
    assert "BI" not in run(settings, "analytics", "tokens", "list").stdout
