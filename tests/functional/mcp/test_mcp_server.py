"""The MCP endpoints over real HTTP: both protocol eras with the Python SDK client, the result envelope,
gating, transport guards and usage events."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from sqlalchemy import select

from codewell.accounts.roles import RoleService
from codewell.accounts.service import AccountService
from codewell.analytics.events import UsageRecorder
from codewell.analytics.models import UsageEventRow
from codewell.core.actors import INTERNAL
from codewell.core.tools import ToolSpec
from tests.functional.mcp.served import Served
from tests.functional.mcp.tools import TEST_TOOLS

LEGACY_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.fixture
def tool_specs() -> list[ToolSpec]:
    return TEST_TOOLS


@asynccontextmanager
async def connect(served: Served, token: str, path: str = "/.api/mcp", mode: str = "legacy") -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers={"Authorization": f"token {token}"}, timeout=30)
    async with http, Client(streamable_http_client(served.url(path), http_client=http), mode=mode) as client:
        yield client


def rpc(
    served: Served, body: Any, token: str | None = None, path: str = "/.api/mcp", **headers: str
) -> httpx2.Response:
    sent = {**LEGACY_HEADERS, **headers}
    if token:
        sent["authorization"] = f"token {token}"
    payload = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx2.post(served.url(path), content=payload, headers=sent, timeout=30)


def sse_json(response: httpx2.Response) -> dict[str, Any]:
    """The first SSE `data:` line (how the reference system's own client reads answers)."""
    for line in response.text.splitlines():
        if line.startswith("data:"):
            return dict(json.loads(line[5:]))
    return dict(response.json())


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_sdk_client_lists_and_calls_tools_in_both_eras(served: Served, mode: str) -> None:
    alice = served.user("alice")
    async with connect(served, served.token(alice), mode=mode) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("echo", {"message": "hi"})
        who = await client.call_tool("whoami", {})
    # Core endpoint: no /all-only tools; nls_search hidden because code_finder is available.
    assert names == {"echo", "whoami", "big_file", "missing_repo", "crash", "code_finder"}
    assert result.is_error is False
    assert len(result.content) == 1
    assert json.loads(result.content[0].text) == {"text": "echo: hi"}  # type: ignore[union-attr]
    assert result.structured_content == {"text": "echo: hi", "message": "hi"}
    assert "alice via access_token" in json.loads(who.content[0].text)["text"]  # type: ignore[union-attr]


async def test_modern_era_answers_server_discover(served: Served) -> None:
    token = served.token(served.user("alice"))
    response = rpc(
        served,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "server/discover",
            "params": {
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                }
            },
        },
        token,
        **{"mcp-protocol-version": "2026-07-28", "mcp-method": "server/discover"},
    )
    assert response.status_code == 200, response.text
    result = sse_json(response)["result"]
    assert "2026-07-28" in result["supportedVersions"]
    assert "tools" in result["capabilities"]


async def test_bare_tools_call_without_initialize_reads_first_sse_line(served: Served) -> None:
    token = served.token(served.user("alice"))
    listed = sse_json(rpc(served, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, token, path="/.api/mcp/all"))
    assert {"list_refs_like", "nls_search", "deepsearch"} <= {t["name"] for t in listed["result"]["tools"]}
    for tool in listed["result"]["tools"]:
        assert tool["inputSchema"]["additionalProperties"] is False
    called = sse_json(
        rpc(
            served,
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"message": "x"}},
            },
            token,
        )
    )
    assert json.loads(called["result"]["content"][0]["text"]) == {"text": "echo: x"}


async def test_endpoint_views_follow_membership(served: Served) -> None:
    token = served.token(served.user("alice"))

    def names(path: str) -> set[str]:
        body = sse_json(rpc(served, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, token, path=path))
        return {t["name"] for t in body["result"]["tools"]}

    assert names("/.api/mcp/deepsearch") == {"echo", "whoami", "missing_repo", "crash", "deepsearch"}
    assert "deepsearch" not in names("/.api/mcp")
    # A tool of another endpoint is unknown here: a JSON-RPC error, not a tool result.
    body = sse_json(
        rpc(served, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "deepsearch"}}, token)
    )
    assert body["error"]["code"] == -32602
    assert "Unknown tool: deepsearch" in body["error"]["message"]


async def test_nls_search_is_the_core_fallback_when_code_finder_is_disabled(served: Served) -> None:
    token = served.token(served.user("alice"))
    served.configure(**{"mcp.tools.disabled": ["code_finder"]})
    async with connect(served, token) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("code_finder", {})
    assert "nls_search" in names
    assert "code_finder" not in names
    assert result.is_error
    assert "mcp.tools.disabled" in result.content[0].text  # type: ignore[union-attr]


async def test_disabled_tool_vanishes_everywhere_without_restart(served: Served) -> None:
    token = served.token(served.user("alice"))
    async with connect(served, token, "/.api/mcp/all") as client:
        assert "echo" in {t.name for t in (await client.list_tools()).tools}
        served.configure(**{"mcp.tools.disabled": ["echo"]})
        assert "echo" not in {t.name for t in (await client.list_tools()).tools}
        rejected = await client.call_tool("echo", {"message": "hi"})
        served.configure(**{"mcp.tools.disabled": []})
        accepted = await client.call_tool("echo", {"message": "hi"})
    assert rejected.is_error
    assert "tool echo is disabled" in rejected.content[0].text  # type: ignore[union-attr]
    assert "mcp.tools.disabled" in rejected.content[0].text  # type: ignore[union-attr]
    assert accepted.is_error is False


async def test_tool_errors_are_is_error_results(served: Served) -> None:
    token = served.token(served.user("alice"))
    async with connect(served, token) as client:
        missing = await client.call_tool("missing_repo", {"repo": "github.com/x/y"})
        crash = await client.call_tool("crash", {})
        bad_type = await client.call_tool("echo", {"message": 5})
        unknown_arg = await client.call_tool("echo", {"message": "a", "colour": "red"})
        missing_arg = await client.call_tool("echo", {})
        too_small = await client.call_tool("echo", {"message": "a", "times": 0})
        with pytest.raises(MCPError, match="Unknown tool: nope"):
            await client.call_tool("nope", {})

    def text(result: Any) -> str:
        assert result.is_error is True
        return str(result.content[0].text)

    assert text(missing) == "repository github.com/x/y not found. list_repos shows the repositories you can read"
    assert "internal error in tool crash" in text(crash)
    assert "secret internal detail" not in text(crash)
    assert "argument 'message' must be of type string, got 5" in text(bad_type)
    assert "unknown argument 'colour' (allowed: message, times)" in text(unknown_arg)
    assert "missing required argument 'message'" in text(missing_arg)
    assert "argument 'times' must be >= 1, got 0" in text(too_small)


async def test_output_budget_truncates_with_a_note(served: Served) -> None:
    token = served.token(served.user("alice"))
    async with connect(served, token) as client:
        result = await client.call_tool("big_file", {})
    text = json.loads(result.content[0].text)["text"]  # type: ignore[union-attr]
    assert len(text) <= 80_000
    assert "[output truncated: showing" in text
    last_shown = int(text.split("\n\n[output truncated")[0].splitlines()[-1].split(":")[0])
    assert f"call big_file again with startLine={last_shown + 1}" in text
    assert result.structured_content is not None
    assert result.structured_content.get("structuredTruncated") is True
    assert "lines" not in result.structured_content


async def test_gating_disabled_unauthenticated_and_forbidden(served: Served) -> None:
    alice = served.user("alice")
    token = served.token(alice)
    list_body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}

    anonymous = rpc(served, list_body)
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{served.base_url}/.well-known/oauth-protected-resource/.api/mcp", scope="mcp"'
    )
    on_all = rpc(served, list_body, path="/.api/mcp/all")
    assert "/.well-known/oauth-protected-resource/.api/mcp/all" in on_all.headers["www-authenticate"]

    served.configure(**{"mcp.enabled": False})
    for path in ("/.api/mcp", "/.api/mcp/all", "/.api/mcp/deepsearch", "/.api/mcp/anything/else"):
        response = rpc(served, list_body, token, path=path)
        assert (response.status_code, response.text) == (404, "no route"), path
    prm = httpx2.get(served.url("/.well-known/oauth-protected-resource/.api/mcp"))
    assert (prm.status_code, prm.text) == (404, "no route")
    served.configure(**{"mcp.enabled": True})
    assert rpc(served, list_body, token).status_code == 200
    assert rpc(served, list_body, token, path="/.api/mcp/unknown").status_code == 404


async def test_caller_without_mcp_access_gets_403(served: Served) -> None:

    alice = served.user("alice")
    token = served.token(alice)
    roles = served.runtime.get(RoleService)
    roles.set_permission(INTERNAL, "User", "MCP#ACCESS", granted=False)
    response = rpc(served, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, token)
    assert (response.status_code, response.text) == (403, "forbidden")


async def test_demoted_site_admin_loses_access_on_the_very_next_request(served: Served) -> None:
    """Site admins skip the (cached) permission lookup; the flag comes with the credential on each request,
    so taking it away applies at once, not after the permission cache's lifetime."""

    served.user("keeper", site_admin=True)  # demoting the last site admin is refused
    root = served.user("root", site_admin=True)
    token = served.token(root)
    roles = served.runtime.get(RoleService)
    roles.set_permission(INTERNAL, "User", "MCP#ACCESS", granted=False)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    assert rpc(served, body, token).status_code == 200
    served.runtime.get(AccountService).set_site_admin(INTERNAL, root.id, False)
    response = rpc(served, body, token)
    assert (response.status_code, response.text) == (403, "forbidden")


async def test_host_origin_body_and_protocol_guards(served: Served) -> None:
    token = served.token(served.user("alice"))
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    assert rpc(served, body, token, host="evil.example:80").status_code == 421
    assert rpc(served, body, token, origin="https://evil.example").status_code == 403
    assert rpc(served, body, token, origin="http://localhost:6274").status_code == 200
    assert rpc(served, b"x" * (4 * 1024 * 1024 + 1), token).status_code == 413
    malformed = rpc(served, b"{not json", token)
    assert malformed.status_code == 400
    assert sse_json(malformed)["error"]["code"] == -32700
    wrong_version = rpc(served, body, token, **{"mcp-protocol-version": "1999-01-01"})
    assert wrong_version.status_code == 400


@pytest.mark.parametrize("path", ["/.api/mcp", "/.api/mcp/all", "/.api/mcp/deepsearch"])
async def test_a_stateless_server_answers_405_to_get_streams_and_other_methods(served: Served, path: str) -> None:
    token = served.token(served.user("alice"))
    headers = {"authorization": f"token {token}", "accept": "text/event-stream"}
    # The SDK used to open a stream that never ended (a ping every 15 s): the timeout would fire here.
    response = httpx2.get(served.url(path), headers=headers, timeout=5)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert response.json()["error"]["code"] == -32600
    for method in ("DELETE", "PUT", "HEAD"):
        assert httpx2.request(method, served.url(path), headers=headers, timeout=5).status_code == 405
    # The gate still comes first: anonymous callers get the OAuth challenge, not 405.
    anonymous = httpx2.get(served.url(path), headers={"accept": "text/event-stream"}, timeout=5)
    assert anonymous.status_code == 401
    assert "resource_metadata" in anonymous.headers["www-authenticate"]


@pytest.mark.parametrize("version", ["1999-01-01", "2025-13-45", "latest"])
async def test_an_unsupported_protocol_version_lists_the_supported_ones(served: Served, version: str) -> None:
    token = served.token(served.user("alice"))
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}
    response = rpc(served, body, token, **{"mcp-protocol-version": version})
    assert response.status_code == 400
    error = response.json()["error"]
    assert response.json()["id"] == 7
    assert error["code"] == -32022
    assert "supported versions: 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25, 2026-07-28" in error["message"]
    assert error["data"] == {
        "supported": ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"],
        "requested": version,
    }


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}], "JSON-RPC batches are not supported"),
        ([], "JSON-RPC batches are not supported"),
        (42, "the body must be one JSON-RPC message object"),
        ({"jsonrpc": "1.0", "id": 1, "method": "tools/list"}, '"jsonrpc" must be "2.0"'),
        ({"jsonrpc": "2.0", "id": 1}, 'a request needs a "method"'),
        ({"jsonrpc": "2.0", "id": 1, "method": 5}, '"method" must be a string'),
    ],
)
async def test_a_body_that_is_no_json_rpc_message_is_invalid_request(served: Served, body: Any, message: str) -> None:
    token = served.token(served.user("alice"))
    response = rpc(served, body, token)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32600
    assert message in error["message"]
    assert "pydantic" not in response.text
    assert "validation error" not in response.text.lower()


async def test_every_tool_call_records_a_usage_event(served: Served) -> None:
    alice = served.user("alice")
    async with connect(served, served.token(alice), "/.api/mcp/all", mode="auto") as client:
        await client.call_tool("whoami", {})
        await client.call_tool("missing_repo", {"repo": "r"})
    served.runtime.get(UsageRecorder).flush()
    with served.runtime.db.session() as session:
        rows = list(session.scalars(select(UsageEventRow).order_by(UsageEventRow.id)))
    assert [(r.tool, r.error, r.endpoint, r.user_id, r.feature) for r in rows] == [
        ("whoami", "", "/.api/mcp/all", alice.id, "mcp"),
        ("missing_repo", "not_found", "/.api/mcp/all", alice.id, "mcp"),
    ]
    assert rows[0].client.startswith("mcp")  # the SDK client's own name from the modern request envelope
    assert rows[0].language == "Go"
    assert rows[0].result_bytes > 0
