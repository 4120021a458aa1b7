"""An MCP call with a header credential is authenticated, gated and answered in one worker-thread hop (the
middleware leaves its authentication to the gate), with the same answers and refusals as any other route."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio.to_thread
import pytest
from starlette.requests import Request
from starlette.testclient import TestClient

from codewell.accounts.tokens import TokenService
from codewell.core.actors import INTERNAL
from codewell.http import threads
from codewell.http.requests import DEFERRED_AUTHENTICATION, AuthenticationPending, actor_of
from codewell.runtime import Runtime
from tests.factories import auth_headers, make_token, make_user

ACCEPT = {"Accept": "application/json, text/event-stream"}
LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
LIST_REPOS = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_repos", "arguments": {}}}


@pytest.fixture
def hops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The worker-thread hops taken while the test runs: the lean pool's and anyio's (Starlette's)."""
    taken: list[str] = []
    pool_submit = threads._POOL.submit
    anyio_run_sync = anyio.to_thread.run_sync

    def submit(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        taken.append("lean")
        return pool_submit(fn, *args, **kwargs)

    async def run_sync(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        taken.append("anyio")
        return await anyio_run_sync(fn, *args, **kwargs)

    monkeypatch.setattr(threads._POOL, "submit", submit)
    monkeypatch.setattr(anyio.to_thread, "run_sync", run_sync)
    return taken


def test_a_tool_call_with_a_token_takes_one_hop_and_other_routes_still_authenticate(
    client: TestClient, runtime: Runtime, hops: list[str]
) -> None:
    token = make_token(runtime, make_user(runtime, "alice"))
    host = {"Host": runtime.external_url.split("://", 1)[1]}
    headers = {**ACCEPT, **host, **auth_headers(token)}
    client.post("/.api/mcp", json=LIST_TOOLS, headers=headers)  # warm: the registry, the role cache
    hops.clear()
    for message in (LIST_TOOLS, LIST_REPOS):
        response = client.post("/.api/mcp", json=message, headers=headers)
        assert response.status_code == 200, response.text
        assert '"result"' in response.text
        assert hops == ["lean"], (message["method"], hops)  # two before: the middleware's, then the gate's
        hops.clear()
    # A route that does not take over its authentication still gets the middleware's hop, and the actor.
    me = client.get("/.api/users/me", headers=auth_headers(token))
    assert me.status_code == 200, me.text
    assert me.json()["username"] == "alice"
    assert hops[0] == "lean"


def test_refusals_are_unchanged_when_the_gate_authenticates(client: TestClient, runtime: Runtime) -> None:
    user = make_user(runtime, "bob")
    token = make_token(runtime, user)
    host = {"Host": runtime.external_url.split("://", 1)[1]}
    # A credential of the wrong scheme or an unknown token: 401 with the endpoint's challenge, whatever the host.
    for authorization in ("Bearer cwp_" + "0" * 40, "token nonsense"):
        refused = client.post("/.api/mcp", json=LIST_TOOLS, headers={**ACCEPT, "Authorization": authorization})
        assert refused.status_code == 401, (authorization, refused.text)
        assert "resource_metadata=" in refused.headers["www-authenticate"]
    # The host check still applies to a valid credential, after it.
    misdirected = client.post("/.api/mcp", json=LIST_TOOLS, headers={**ACCEPT, **auth_headers(token)})
    assert misdirected.status_code == 421
    # Revoked: refused on the very next call, in the same single hop.
    assert client.post("/.api/mcp", json=LIST_TOOLS, headers={**ACCEPT, **host, **auth_headers(token)}).is_success
    tokens = runtime.get(TokenService)
    (info,) = tokens.list(INTERNAL, user.id)
    tokens.revoke(INTERNAL, info.id)
    revoked = client.post("/.api/mcp", json=LIST_REPOS, headers={**ACCEPT, **host, **auth_headers(token)})
    assert revoked.status_code == 401
    assert "list_repos" not in revoked.text


def test_reading_the_actor_before_the_deferred_authentication_is_a_bug_not_anonymous() -> None:
    ran: list[bool] = []
    scope: dict[str, Any] = {"type": "http", "state": {DEFERRED_AUTHENTICATION: lambda: ran.append(True)}}
    with pytest.raises(AuthenticationPending):
        actor_of(Request(scope))
    assert ran == []
