"""The app under real storage faults (issue #33 item 5; docs/security.md, "Storage faults").

- Another process holds SQLite's write lock past the busy timeout (CODEWELL_DB_BUSY_TIMEOUT, 1 s here): reads,
  read-only MCP calls included, answer at once (an access token's last_used_at is best-effort); writes answer
  503 with Retry-After, a sign-in hands out no session, the cause is logged once, /readyz says why, and all
  of it clears by itself when the lock goes.
- The data directory on a full disk (a small tmpfs, filled): /readyz reports it, writes answer 503, and it is
  ready again once there is room.
- A running `codewell serve` whose data directory becomes immutable (chattr -R +i, which made SQLite's -shm
  mapping kill the server with SIGBUS): it stays up, answers 503, /readyz reports both probes, and it recovers
  when the flag is lifted.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from sqlalchemy import select, update
from starlette.testclient import TestClient

from codewell.accounts.audit import AuditService
from codewell.accounts.models import AccessTokenRow, AuditEntryRow
from codewell.app import create_app
from codewell.capabilities import CAPABILITIES
from codewell.core.errors import StorageUnavailable
from codewell.core.settings import Settings
from codewell.core.storage import log_storage_fault
from codewell.db import Database
from codewell.runtime import Runtime
from tests.factories import auth_headers, make_token, make_user, set_site_config
from tests.functional.accounts.test_pages import csrf_of
from tests.functional.jobs.test_processes import deployed
from tests.storage_faults import fill, immutable, tmpfs, write_lock_held

BUSY_TIMEOUT = 1.0
ACCEPT = {"Accept": "application/json, text/event-stream"}
PASSWORD = "correct horse battery staple"


def _sqlite_copy(database_template: str, target: Path) -> str:
    """A migrated SQLite database at `target`: these faults are SQLite's (a file lock, a file, a mapping)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if database_template.startswith(("postgres", "postgresql")):  # the PostgreSQL pass: migrate a SQLite file
        database = Database(f"sqlite:///{target}")
        database.upgrade()
        database.dispose()
    else:
        shutil.copyfile(database_template, target)
    return f"sqlite:///{target}"


def _open(data_dir: Path, database_url: str) -> Runtime:
    settings = Settings.from_env({}, data_dir=data_dir, database_url=database_url, db_busy_timeout=BUSY_TIMEOUT)
    runtime = Runtime.open(settings)
    if runtime.db.busy_timeout != settings.db_busy_timeout:
        # Until Runtime.open hands the setting to the Database (docs/security.md names the line).
        runtime.db.dispose()
        runtime.db = Database(settings.database_url, busy_timeout=settings.db_busy_timeout)
    runtime.capabilities = CAPABILITIES
    return runtime


@pytest.fixture
def faulty(tmp_path: Path, database_template: str) -> Iterator[tuple[Runtime, TestClient]]:
    log_storage_fault.reset()
    data = tmp_path / "data"
    runtime = _open(data, _sqlite_copy(database_template, data / "codewell.db"))
    with TestClient(create_app(runtime, background=False)) as client:
        client.headers["Host"] = runtime.external_url.split("://", 1)[1]  # the tool server checks Host
        yield runtime, client
    runtime.close()


def _mcp_list_repos(client: TestClient, token: str) -> tuple[int, dict[str, Any]]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "list_repos", "arguments": {"query": ""}},
    }
    response = client.post("/.api/mcp/all", json=body, headers={**ACCEPT, **auth_headers(token)})
    for line in response.text.splitlines():
        if line.startswith("data:"):
            return response.status_code, dict(json.loads(line[5:]))
    return response.status_code, dict(response.json()) if response.text else {}


def _ready_again(client: TestClient, within: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while True:
        response = client.get("/readyz")
        if response.status_code == 200 or time.monotonic() > deadline:
            return dict(response.json())
        time.sleep(0.2)


def _storage_lines(caplog: pytest.LogCaptureFixture, cause: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "storage_cause", None) == cause]


def test_a_write_lock_held_past_the_busy_timeout(
    faulty: tuple[Runtime, TestClient], caplog: pytest.LogCaptureFixture
) -> None:
    runtime, client = faulty
    alice = make_user(runtime, "alice", password=PASSWORD)
    token = make_token(runtime, alice)
    headers = auth_headers(token)
    sign_in_page = client.get("/sign-in")
    # A first call creates the system roles of a fresh database (once); then the token's use is due again.
    assert _mcp_list_repos(client, token)[0] == 200
    with runtime.db.session() as session:
        session.execute(update(AccessTokenRow).values(last_used_at=None))
    caplog.set_level(logging.INFO)
    with write_lock_held(runtime.settings.data_dir / "codewell.db"):
        # Reads: a read-only MCP call whose token's last_used_at is due (never written yet) answers at once.
        for _ in range(3):
            started = time.monotonic()
            status, answer = _mcp_list_repos(client, token)
            assert (status, "error" in answer, answer["result"]["isError"]) == (200, False, False), answer
            assert time.monotonic() - started < BUSY_TIMEOUT, "a read waited for the bookkeeping write"
        assert client.get("/.api/users/me", headers=headers).json()["username"] == "alice"

        # Writes: 503 with Retry-After after the busy timeout, in the JSON envelope.
        for _ in range(3):
            started = time.monotonic()
            response = client.post("/.api/tokens", json={"note": "ci"}, headers=headers)
            waited = time.monotonic() - started
            assert response.status_code == 503, response.text
            assert response.headers["retry-after"] == "5"
            assert response.json()["error"]["code"] == "storage_unavailable"
            assert "database locked" in response.json()["error"]["message"]
            assert BUSY_TIMEOUT * 0.8 < waited < BUSY_TIMEOUT * 6, waited

        # A sign-in neither goes ahead unaudited nor hands out a session.
        response = client.post(
            "/sign-in",
            data={"username": "alice", "password": PASSWORD, "csrf_token": csrf_of(sign_in_page.text)},
            follow_redirects=False,
        )
        assert response.status_code == 503
        assert "set-cookie" not in response.headers or "codewell_session=" not in response.headers["set-cookie"]

        # An audit entry that cannot be written fails its caller and says so in the log.
        with pytest.raises(StorageUnavailable):
            runtime.get(AuditService).record("test.entity", "tested", reason="under a lock")
        assert any("test.entity tested NOT written" in r.getMessage() for r in caplog.records)

        # Ready no more, and why.
        ready = client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["checks"]["database"] == "ok"
        assert "database locked" in ready.json()["checks"]["database_writes"]

    # Seven failed writes and a probe: the cause logged once.
    assert len(_storage_lines(caplog, "database locked")) == 1
    with runtime.db.session() as session:
        assert session.scalar(select(AccessTokenRow.last_used_at).where(AccessTokenRow.user_id == alice.id)) is None
        assert session.scalar(select(AuditEntryRow).where(AuditEntryRow.entity == "test.entity")) is None

    # The lock is gone: ready again by itself, writes work.
    assert _ready_again(client)["status"] == "ready"
    assert client.post("/.api/tokens", json={"note": "ci"}, headers=headers).status_code == 201


def test_a_full_data_directory(tmp_path: Path, database_template: str, caplog: pytest.LogCaptureFixture) -> None:
    log_storage_fault.reset()
    with tmpfs(tmp_path / "data", size="8m") as data:
        runtime = _open(data, _sqlite_copy(database_template, data / "codewell.db"))
        try:
            alice = make_user(runtime, "alice")
            headers = auth_headers(make_token(runtime, alice))
            with TestClient(create_app(runtime, background=False)) as client:
                assert client.get("/readyz").status_code == 200
                filler = fill(data)
                time.sleep(2.1)  # past the probes' cache
                ready = client.get("/readyz")
                assert ready.status_code == 503, ready.text
                assert "no space left on device" in ready.json()["checks"]["data_dir"]
                assert "database disk full" in ready.json()["checks"]["database_writes"]
                response = client.post("/.api/tokens", json={"note": "x" * 200}, headers=headers)
                assert (response.status_code, response.headers.get("retry-after")) == (503, "30"), response.text
                assert "database disk full" in response.json()["error"]["message"]
                assert client.get("/.api/users/me", headers=headers).status_code == 200  # reads go on
                filler.unlink()
                assert _ready_again(client)["status"] == "ready"
                assert client.post("/.api/tokens", json={"note": "x"}, headers=headers).status_code == 201
        finally:
            runtime.close()
    assert len(_storage_lines(caplog, "database disk full")) == 1


def test_serve_survives_an_immutable_data_directory(tmp_path: Path, database_template: str) -> None:
    data = tmp_path / "data"
    url = _sqlite_copy(database_template, data / "codewell.db")
    settings = Settings.from_env({}, data_dir=data, database_url=url)
    runtime = Runtime.open(settings)
    try:
        token = make_token(runtime, make_user(runtime, "alice"))
    finally:
        runtime.close()
    with deployed(tmp_path, settings) as deployment:
        deployment.serve("web")
        deployment.wait_ready("web")
        headers = {**ACCEPT, **auth_headers(token)}
        mcp = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "list_repos", "arguments": {"query": ""}},
        }
        assert httpx.post(deployment.url("web", "/.api/mcp/all"), json=mcp, headers=headers).status_code == 200
        with immutable(data):
            deadline = time.monotonic() + 6  # the job threads and worker children use the database meanwhile
            statuses: set[int] = set()
            while time.monotonic() < deadline:
                statuses.add(httpx.get(deployment.url("web", "/.api/users/me"), headers=headers).status_code)
                statuses.add(httpx.post(deployment.url("web", "/.api/mcp/all"), json=mcp, headers=headers).status_code)
                time.sleep(0.2)
            write = httpx.post(deployment.url("web", "/.api/tokens"), json={"note": "x"}, headers=headers)
            ready = httpx.get(deployment.url("web", "/readyz"), timeout=15)
            alive = deployment.processes["web"].poll() is None
        assert alive, f"codewell serve died: {deployment.processes['web'].poll()}\n{deployment.log('web')[-3000:]}"
        assert statuses <= {200, 503}, statuses  # never a 500, nor a dropped connection
        assert write.status_code == 503, write.text
        assert ready.status_code == 503
        checks = ready.json()["checks"]
        assert "not writable" in checks["data_dir"]
        assert "database read-only" in checks["database_writes"]
        deadline = time.monotonic() + 15
        while httpx.get(deployment.url("web", "/readyz"), timeout=15).status_code != 200:
            assert time.monotonic() < deadline, deployment.log("web")[-3000:]
            time.sleep(0.3)
        assert httpx.post(deployment.url("web", "/.api/tokens"), json={"note": "x"}, headers=headers).status_code == 201
        log = deployment.log("web")
        assert "Bus error" not in log
        assert "Fatal Python error" not in log


def _mcp_deepsearch(client: TestClient, token: str, *, modern: bool) -> httpx.Response:
    """A `deepsearch` call (it writes the conversation's row) through the fast path (a bare handshake-era call)
    or through the SDK transport (a 2026-07-28 request)."""
    params: dict[str, Any] = {"name": "deepsearch", "arguments": {"question": "where is the helper defined?"}}
    headers = {**ACCEPT, **auth_headers(token)}
    if modern:
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        headers |= {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "deepsearch"}
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
    return client.post("/.api/mcp/all", json=body, headers=headers)  # type: ignore[return-value]


@pytest.mark.parametrize("modern", [False, True], ids=["fast-path", "sdk-transport"])
def test_an_mcp_call_that_meets_a_held_lock_answers_503(
    faulty: tuple[Runtime, TestClient], caplog: pytest.LogCaptureFixture, modern: bool
) -> None:
    runtime, client = faulty
    token = make_token(runtime, make_user(runtime, "alice", password=PASSWORD))
    set_site_config(runtime, {"deepSearch": {"mcpWaitSeconds": 0}})  # answer with the conversation's link at once
    # Outside the fault the same call is answered as usual (a conversation row, its link in the result).
    answered = _mcp_deepsearch(client, token, modern=modern)
    assert answered.status_code == 200, answered.text
    assert '"isError":false' in answered.text.replace(" ", ""), answered.text
    assert "/deepsearch/" in answered.text
    caplog.set_level(logging.INFO)
    with write_lock_held(runtime.settings.data_dir / "codewell.db"):
        for _ in range(2):
            response = _mcp_deepsearch(client, token, modern=modern)
            assert response.status_code == 503, response.text
            assert response.headers["retry-after"] == "5"
            assert response.headers["content-type"] == "application/json"
            answer = response.json()
            assert answer["id"] == 7
            assert answer["error"]["code"] == -32004
            assert "database locked" in answer["error"]["message"]
            assert answer["error"]["data"]["code"] == "storage_unavailable"
            assert answer["error"]["data"]["retryAfter"] == 5
            assert "result" not in answer
    # Two failed calls: the cause logged once, and no tool crash in the log.
    assert len(_storage_lines(caplog, "database locked")) == 1
    assert not [r for r in caplog.records if "crashed" in r.getMessage() or "failed:" in r.getMessage()]
    # The lock is gone: the call works again.
    again = _mcp_deepsearch(client, token, modern=modern)
    assert again.status_code == 200, again.text
