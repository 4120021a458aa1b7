"""`codewell serve` on an empty data directory, as a new user starts it (issue #32, item 4): once it listens it
prints one block saying where it is, how to sign in (the admin's password, shown once), how to add repositories
and how to connect an agent (the MCP URL and a token that works); no demo repository unless `--demo`."""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx2 as httpx

from codewell.cli.bootstrap import DEMO_DESCRIPTION, run_bootstrap
from codewell.core.actors import INTERNAL
from codewell.repos.bootstrap import DEMO_NAME
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from tests.browser import free_port
from tests.gitfixtures import make_repo, register_local_repo

CODEWELL = [sys.executable, "-m", "codewell"]


def _read_block(process: subprocess.Popen[str], deadline: float) -> str:
    """stdout up to the block's closing rule (the block is the last thing printed at start)."""
    assert process.stdout is not None
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in process.stdout or ():
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    text = ""
    while text.count("-" * 72) < 2:
        assert time.monotonic() < deadline, f"no start-up block in time; got {text!r}"
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        with contextlib.suppress(queue.Empty):
            text += lines.get(timeout=0.5)
    return text


def test_serve_prints_one_block_with_next_steps_and_working_credentials(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEWELL_")}
    process = subprocess.Popen(
        [*CODEWELL, "--data-dir", str(tmp_path / "data"), "serve", "--port", str(port), "--no-jobs"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    site = f"http://127.0.0.1:{port}"
    try:
        block = _read_block(process, time.monotonic() + 90)
        # The server already listens when the block appears.
        assert httpx.get(f"{site}/readyz", timeout=5).status_code == 200
        password = re.search(r"sign in as admin with password (\S+)", block)
        token = re.search(r"access token: (cwp_[0-9a-f]{40})", block)
        assert password, block
        assert token, block
        assert f"serving on {site}" in block
        assert f"Open {site}/ in a browser." in block
        assert "codewell repos add /path/to/a/git/repository" in block
        assert f"{site}/site-admin/repositories" in block
        assert f"URL:   {site}/.api/mcp" in block
        assert "token: the access token above" in block
        # The printed credentials work: the token on the REST API and on the printed MCP URL.
        auth = {"Authorization": f"token {token.group(1)}"}
        me = httpx.get(f"{site}/.api/repos", headers=auth, timeout=10)
        assert me.status_code == 200, me.text
        assert me.json()["repos"] == []  # no demo repository without --demo
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        mcp = httpx.post(
            f"{site}/.api/mcp",
            json=initialize,
            headers={**auth, "Accept": "application/json, text/event-stream"},
            timeout=10,
        )
        assert mcp.status_code == 200, mcp.text
        # And the password on the sign-in form, as a person uses it.
        with httpx.Client(base_url=site, timeout=10) as browser:
            form = browser.get("/sign-in")
            csrf = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
            assert csrf, form.text
            fields = {"username": "admin", "password": password.group(1), "csrf_token": csrf.group(1)}
            signed_in = browser.post("/sign-in", data=fields)
            assert signed_in.status_code == 303, signed_in.text
            assert browser.get("/site-admin").status_code == 200
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)

    # A second start: no new credentials, the block says where the password went and how to reset it.
    process = subprocess.Popen(
        [*CODEWELL, "--data-dir", str(tmp_path / "data"), "serve", "--port", str(port), "--no-jobs"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        again = _read_block(process, time.monotonic() + 90)
        assert "password were printed at the first start" in again
        assert "codewell users reset-link admin" in again
        assert "access token:" not in again
        assert f"create one with scope mcp on {site}/settings/tokens" in again
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)


def test_the_demo_gives_way_to_the_users_own_repositories(runtime: Runtime, tmp_path: Path) -> None:
    """`--demo` (scripts/serve) keeps codewell's own source only while the instance has nothing else: once the
    user registered a repository, a start neither adds the demo nor keeps it (its files crowded their answers)."""
    service = runtime.get(RepoService)
    demo = make_repo(tmp_path / "codewell", {"README.md": "the demo\n"})
    service.add_repo(INTERNAL, str(demo), name=DEMO_NAME, description=DEMO_DESCRIPTION)
    register_local_repo(runtime, make_repo(tmp_path / "mine", {"main.go": "package main\n"}), "acme/mine")
    lines = run_bootstrap(runtime, True)
    assert [r.name for r in service.all_repos(INTERNAL)] == ["acme/mine"]
    assert any(line.startswith(f"demo: removed {DEMO_NAME}") for line in lines), lines
    again = run_bootstrap(runtime, True)
    assert [r.name for r in service.all_repos(INTERNAL)] == ["acme/mine"]
    assert not any(line.startswith("demo:") for line in again)
    # A repository of the user's that happens to have the demo's name stays.
    service.add_repo(INTERNAL, str(demo), name=DEMO_NAME, description="my fork of codewell")
    run_bootstrap(runtime, True)
    assert sorted(r.name for r in service.all_repos(INTERNAL)) == ["acme/mine", DEMO_NAME]
