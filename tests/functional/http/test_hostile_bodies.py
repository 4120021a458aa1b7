"""The request-body policy (codewell.http.bodies, issue #33) on every route of the app: the permission battery's
route table walked with the same hostile bodies (5,000-deep objects and arrays, NaN, a list where an object is
expected, 50 MB with and without a Content-Length), as a site admin and as anonymous, then the MCP JSON-RPC
edge cases and the size caps over real HTTP.

Nothing may answer 5xx. Every route that reads a JSON body answers the policy's 400 (or, for MCP, its JSON-RPC
parse error) naming the rule; a body over the cap is a 413 naming the limit of the route's family.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx2
import pytest
from starlette.testclient import TestClient

from codewell.core.tools import ToolSpec
from codewell.http.bodies import FAMILIES, MAX_JSON_DEPTH, family_of, size_text
from tests.functional.mcp.served import Served, served
from tests.functional.mcp.tools import TEST_TOOLS
from tests.functional.test_permission_battery import ROWS, Row, World, world

__all__ = ["served", "world"]

DEPTH = 5000
BODIES: dict[str, bytes] = {
    "deep object": b'{"a":' * DEPTH + b"1" + b"}" * DEPTH,
    "deep array": b"[" * DEPTH + b"]" * DEPTH,
    "NaN": b'{"question": NaN, "note": NaN, "script": NaN, "name": NaN}',
    "Infinity": b'{"amount": Infinity}',
    "list": b'[{"username": "x"}]',
}
TOO_DEEP = f"the request body is JSON nested more than {MAX_JSON_DEPTH} levels deep"
POLICY_MESSAGES = {
    "deep object": TOO_DEEP,
    "deep array": TOO_DEEP,
    "NaN": "the request body contains NaN, which is not a JSON number",
    "Infinity": "the request body contains Infinity, which is not a JSON number",
}
BIG = 50 * 1024 * 1024

# Every route that reads a JSON body (the accounts API reads one on every POST, PUT and PATCH).
JSON_ROUTES = {
    ("POST", "/.api/users"),
    ("PATCH", "/.api/users/{username}"),
    ("POST", "/.api/users/{username}/password-reset-link"),
    ("POST", "/.api/users/{username}/emails"),
    ("PATCH", "/.api/users/{username}/emails/{email}"),
    ("POST", "/.api/users/{username}/emails/{email}/verification"),
    ("PUT", "/.api/users/{username}/repos"),
    ("POST", "/.api/tokens"),
    ("POST", "/.api/roles"),
    ("PATCH", "/.api/roles/{name}"),
    ("PUT", "/.api/roles/{name}/permissions/{permission}"),
    ("PUT", "/.api/roles/{name}/users/{username}"),
    ("POST", "/.api/repos"),
    ("POST", "/.api/oauth/clients"),
    ("POST", "/.api/evaluate"),
    ("POST", "/.api/deepsearch"),
    ("POST", "/.api/deepsearch/{token}/questions"),
    ("POST", "/analytics/api/credits"),
    ("POST", "/analytics/api/service-access-tokens"),
    ("POST", "/.auth/idp/oauth/register"),
    ("POST", "/.api/mcp"),
    ("POST", "/.api/mcp/{rest}"),
}
MCP_ROUTES = {("POST", "/.api/mcp"), ("POST", "/.api/mcp/{rest}")}
# What a list instead of an object earns, per route (the routes' own checks after the policy's parse).
LIST_MESSAGES = {
    ("POST", "/.api/evaluate"): "`script` must be a string",
    ("POST", "/.auth/idp/oauth/register"): None,  # the client metadata rules decide the words
}


def _key(row: Row) -> tuple[str, str]:
    return row.method, row.path


def _message(response: Any) -> str:
    """The refusal's words, whatever the shape: the JSON error envelope, JSON-RPC, OAuth, or plain text."""
    try:
        body = response.json()
    except ValueError:
        return str(response.text)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("message", ""))
    if isinstance(body, dict) and "error_description" in body:
        return str(body["error_description"])
    return str(response.text)


def _url(world: World, row: Row) -> str:
    path = row.path
    for key, value in row.params(world).items():
        path = path.replace("{" + key + ":repo}", quote(value, safe="/@"))
        path = path.replace("{" + key + ":subpath}", quote(value, safe="/@"))
        path = path.replace("{" + key + ":path}", quote(value, safe="/@"))
        path = path.replace("{" + key + "}", quote(value, safe="/@"))
    return path + (f"?{row.query}" if row.query else "")


def _send(world: World, principal: str, row: Row, content: bytes | Iterator[bytes]) -> Any:
    headers = {"content-type": "application/json"}
    if world.csrf[principal]:
        headers["X-CSRF-Token"] = world.csrf[principal]
    client: TestClient = world.clients[principal]
    return client.request(row.method, _url(world, row), content=content, headers=headers)


def _check_json(principal: str, row: Row, kind: str, response: Any) -> str | None:
    """What is wrong with the answer to a hostile JSON body, or None."""
    status, message = response.status_code, _message(response)
    if status >= 500:
        return f"{status} {message[:200]}"
    if _key(row) in JSON_ROUTES and (principal == "admin" or status == 400):
        if _key(row) in MCP_ROUTES:
            error = response.json()["error"]
            if kind == "list":  # a batch
                return None if (status, error["code"]) == (400, -32600) else f"{status} {error}"
            wanted = (400, -32700, f"Parse error: {POLICY_MESSAGES[kind]}")
            return None if (status, error["code"], error["message"]) == wanted else f"{status} {error}"
        if status != 400:
            return f"{status} instead of 400: {message[:200]}"
        if kind == "list":
            expected = LIST_MESSAGES.get(_key(row), "the request body must be a JSON object")
            return None if expected is None or message == expected else f"400 {message[:200]}"
        return None if message == POLICY_MESSAGES[kind] else f"400 {message[:200]}"
    if status == 400 and "JSON" in message and message not in POLICY_MESSAGES.values():
        return f"a JSON refusal outside the policy: {message[:200]}"  # a route parsing bodies its own way
    return None


@pytest.mark.parametrize("principal", ["admin", "anonymous"])
@pytest.mark.parametrize("kind", sorted(BODIES))
def test_hostile_json_bodies_on_every_route(world: World, principal: str, kind: str) -> None:
    problems = {}
    for row in ROWS:
        if row.method == "GET" and row.path.startswith("/{repo:repo}"):
            continue  # repository pages read no bodies; their table rows differ only by repository
        problem = _check_json(principal, row, kind, _send(world, principal, row, BODIES[kind]))
        if problem:
            problems[f"{row.method} {row.path}"] = problem
    assert problems == {}


def _check_too_large(principal: str, row: Row, response: Any) -> str | None:
    status, message = response.status_code, _message(response)
    family = family_of(row.path.split("{", 1)[0])
    if family.limit is None:  # routes with a configured cap of their own
        if row.path.startswith("/.api/webhooks/"):
            return None if status == 413 and "over the 5 MB limit" in message else f"{status} {message[:200]}"
        return None if status < 500 else f"{status} {message[:200]}"  # SCIP uploads: 512 MB by default
    if status != 413:
        return f"{status} instead of 413: {message[:200]}"
    return None if size_text(family.limit) in message else f"413 without the limit: {message[:200]}"


@pytest.mark.parametrize("principal", ["admin", "anonymous"])
def test_a_50_mb_body_is_refused_by_its_length_on_every_route(world: World, principal: str) -> None:
    body = b"x" * BIG
    problems = {}
    for row in ROWS:
        problem = _check_too_large(principal, row, _send(world, principal, row, body))
        if problem:
            problems[f"{row.method} {row.path}"] = problem
    assert problems == {}


@pytest.mark.parametrize("principal", ["admin", "anonymous"])
def test_a_50_mb_chunked_body_is_cut_off_wherever_it_is_read(world: World, principal: str) -> None:
    """No Content-Length: the bytes are counted as they are read. A route that reads no body answers as usual."""
    problems = {}
    for row in ROWS:
        if row.method == "GET":
            continue
        response = _send(world, principal, row, iter([b" " * (1024 * 1024)] * 50))
        status = response.status_code
        if status >= 500:
            problems[f"{row.method} {row.path}"] = f"{status} {_message(response)[:200]}"
        elif principal == "admin" and _key(row) in JSON_ROUTES:
            problem = _check_too_large(principal, row, response)
            if problem:
                problems[f"{row.method} {row.path}"] = problem
    assert problems == {}


def test_the_json_routes_exist_and_every_path_has_a_family(world: World) -> None:
    declared = {(row.method, row.path) for row in ROWS}
    assert declared >= JSON_ROUTES
    assert FAMILIES[-1].matches("/anything")
    assert family_of("/.api/mcpx").name == "REST API"
    assert family_of("/.api/mcp/all").name == "MCP"


# -- over real HTTP --------------------------------------------------------------------------------------------
@pytest.fixture
def tool_specs() -> list[ToolSpec]:
    return TEST_TOOLS


MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def _rpc(served: Served, token: str, body: bytes | Iterator[bytes]) -> httpx2.Response:
    headers = {**MCP_HEADERS, "authorization": f"token {token}"}
    return httpx2.post(served.url("/.api/mcp"), content=body, headers=headers, timeout=60)


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        (b'{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}', -32600, '"id" must be a string or an integer'),
        (b'{"jsonrpc":"2.0","id":[1],"method":"tools/list"}', -32600, '"id" must be a string or an integer'),
        (b'{"jsonrpc":"2.0","id":true,"method":"tools/list"}', -32600, '"id" must be a string or an integer'),
        (b'{"jsonrpc":"2.0","id":null,"method":"tools/list"}', -32600, '"id" must be a string or an integer'),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}', -32600, '"id" must be a string or an integer'),
        (b'{"jsonrpc":"2.0","id":{"a":1},"method":"notifications/initialized"}', -32600, '"id" must be'),
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","arguments":{"n":NaN}}}', -32700, "NaN"),
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":-Infinity}}', -32700, "-Infinity"),
        (BODIES["deep object"], -32700, f"nested more than {MAX_JSON_DEPTH} levels"),
        (BODIES["deep array"], -32700, f"nested more than {MAX_JSON_DEPTH} levels"),
        (b'[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]', -32600, "batches are not supported"),
        (b"{not json", -32700, "is not valid JSON"),
        (b"\xff\xfe{}", -32700, "is not valid JSON"),
    ],
)
def test_mcp_json_rpc_edge_cases_get_a_json_rpc_error(served: Served, body: bytes, code: int, message: str) -> None:
    token = served.token(served.user("alice"))
    response = _rpc(served, token, body)
    assert response.status_code == 400, response.text  # never 202 with an empty body
    answer = response.json()
    assert answer["jsonrpc"] == "2.0"
    assert answer["id"] is None  # no id the server could trust
    assert answer["error"]["code"] == code
    assert message in answer["error"]["message"]


def test_mcp_still_accepts_what_json_allows(served: Served) -> None:
    """The policy refuses only what JSON does not allow: big integers, a string id, a notification (202)."""
    token = served.token(served.user("alice"))
    listed = _rpc(served, token, b'{"jsonrpc":"2.0","id":"x-1","method":"tools/list"}')
    assert listed.status_code == 200
    assert '"id":"x-1"' in listed.text
    big = _rpc(served, token, b'{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"tools/list"}')
    assert big.status_code == 200, big.text
    assert "123456789012345678901234567890" in big.text
    note = _rpc(served, token, b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert (note.status_code, note.text) == (202, "")
    nested = b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}'
    assert _rpc(served, token, nested).status_code == 200


def test_mcp_body_over_the_cap_is_a_json_rpc_413(served: Served) -> None:
    token = served.token(served.user("alice"))
    limit = family_of("/.api/mcp").limit
    assert limit == 4 * 1024 * 1024
    for body in (b" " * (limit + 1), iter([b" " * 1024 * 1024] * 6)):  # declared, then chunked
        response = _rpc(served, token, body)
        assert response.status_code == 413
        error = response.json()["error"]
        assert error["code"] == -32600
        assert "4 MiB (4194304 bytes) limit of MCP requests" in error["message"]


def test_rest_50_mb_bodies_are_refused_over_real_http(served: Served) -> None:
    """The issue's finding: 1 MB and 50 MB bodies were accepted by POST /.api/tokens and PATCH /.api/users/<u>."""
    token = served.token(served.user("alice"))
    auth = {"authorization": f"token {token}", "content-type": "application/json"}
    limit_text = "1 MiB (1048576 bytes) limit of REST API requests"
    padded = json.dumps({"note": "x" * (1024 * 1024)}).encode()
    for method, path in (("POST", "/.api/tokens"), ("PATCH", "/.api/users/alice")):
        for content in (padded, b" " * BIG, iter([b" " * (1024 * 1024)] * 50)):
            response = httpx2.request(method, served.url(path), content=content, headers=auth, timeout=60)
            assert response.status_code == 413, response.text
            assert limit_text in response.json()["error"]["message"]
    # Under the cap, the same routes work.
    created = httpx2.post(served.url("/.api/tokens"), json={"note": "ok"}, headers=auth, timeout=60)
    assert created.status_code == 201
