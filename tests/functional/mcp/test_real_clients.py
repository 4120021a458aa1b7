"""Black-box runs of real MCP clients against a real `codewell serve` process: the MCP Inspector CLI (both
protocol eras) and a headless OAuth run with the TypeScript SDK (DCR → PKCE → token → tool call)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import httpx2
import pytest

from codewell.auth.service import AuthService, ClientInfo
from codewell.core.settings import Settings
from codewell.http.sessions import SESSION_COOKIE
from codewell.runtime import Runtime
from tests.factories import make_token, make_user
from tests.functional.mcp.served import free_port
from tests.gitfixtures import make_repo, register_local_repo

CLIENTS = Path(__file__).resolve().parents[2] / "mcp_clients"
INSPECTOR = CLIENTS / "node_modules" / ".bin" / "mcp-inspector"
REPO = "local/hello"


@pytest.fixture(autouse=True)
def clients_installed() -> None:
    """The real clients are part of the test setup (never skipped): say how to install them when missing."""
    assert INSPECTOR.exists(), "MCP test clients missing: run `npm ci` in tests/mcp_clients (./scripts/test does)"


@dataclass
class Process:
    url: str
    token: str
    session_cookie: str
    home: Path


@pytest.fixture
def codewell_serve(settings: Settings, tmp_path: Path) -> Iterator[Process]:
    """`codewell serve` as a subprocess on a free port, with one user, one token and one repository."""
    port = free_port()
    runtime = Runtime.open(settings.with_changes(port=port))
    source = make_repo(tmp_path / "src" / "hello", {"main.go": "package main\n\nfunc main() {}\n", "README.md": "hi\n"})
    register_local_repo(runtime, source, REPO)
    alice = make_user(runtime, "alice", password="correct horse battery staple")
    token = make_token(runtime, alice)
    cookie, _ = runtime.get(AuthService).start_session(alice, ClientInfo())
    runtime.close()
    env = {
        **os.environ,
        "CODEWELL_DATA_DIR": str(settings.data_dir),
        "CODEWELL_DATABASE_URL": settings.database_url,
        "CODEWELL_LOG_LEVEL": "warning",
    }
    log = tmp_path / "serve.log"
    output = log.open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "codewell", "serve", "--port", str(port)],
        env=env,
        stdout=output,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90  # a slow, loaded machine starts `codewell serve` slowly
        while True:
            try:
                if httpx2.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"codewell serve did not start:\n{log.read_text()}")
            time.sleep(0.1)
        home = tmp_path / "home"
        home.mkdir()
        yield Process(base + "/.api/mcp", token, f"{SESSION_COOKIE}={cookie}", home)
    finally:
        process.terminate()
        process.wait(timeout=20)
        output.close()


def inspector(proc: Process, *args: str) -> dict[str, object]:
    command = [
        str(INSPECTOR),
        "--cli",
        proc.url,
        "--transport",
        "http",
        "--header",
        f"Authorization: token {proc.token}",
    ]
    result = subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=CLIENTS,
        env={**os.environ, "HOME": str(proc.home)},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return dict(json.loads(result.stdout))


@pytest.mark.slow(minutes=2)
def test_inspector_cli_lists_and_calls_tools_in_both_eras(codewell_serve: Process) -> None:
    for era in ("legacy", "modern"):
        check_inspector(codewell_serve, era)


def check_inspector(codewell_serve: Process, era: str) -> None:
    listed = inspector(codewell_serve, "--protocol-era", era, "--method", "tools/list")
    names = {tool["name"] for tool in listed["tools"]}  # type: ignore[attr-defined]
    assert {"list_repos", "read_file", "list_files"} <= names
    assert "list_refs" not in names  # /.api/mcp/all only
    called = inspector(
        codewell_serve,
        "--protocol-era",
        era,
        "--method",
        "tools/call",
        "--tool-name",
        "read_file",
        "--tool-arg",
        f"repo={REPO}",
        "--tool-arg",
        "path=main.go",
    )
    assert called.get("isError") in (False, None)
    text = json.loads(called["content"][0]["text"])["text"]  # type: ignore[index]
    assert "1: package main" in text
    assert "3: func main() {}" in text


def node(proc: Process, *args: str) -> dict[str, object]:
    env = {**os.environ, "CODEWELL_SESSION_COOKIE": proc.session_cookie}
    result = subprocess.run(
        ["node", "oauth_flow.mjs", *args], capture_output=True, text=True, timeout=120, cwd=CLIENTS, env=env
    )
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def test_typescript_sdk_completes_oauth_and_calls_a_tool(codewell_serve: Process) -> None:
    out = node(codewell_serve, codewell_serve.url, "list_repos", json.dumps({"query": "hello"}))
    assert out["ok"] is True, out
    assert out["steps"] == ["registered", "authorize", "tokens"]
    assert out["iss"] == codewell_serve.url.removesuffix("/.api/mcp")
    assert "resource=" + quote(codewell_serve.url, safe="") in str(out["authorizationUrl"])
    assert "code_challenge_method=S256" in str(out["authorizationUrl"])
    assert "list_repos" in out["tools"]  # type: ignore[operator]
    result = out["result"]
    assert json.loads(result["content"][0]["text"])["text"].startswith(REPO)  # type: ignore[index]
    assert result["structuredContent"]["hasMoreResults"] is False  # type: ignore[index]
