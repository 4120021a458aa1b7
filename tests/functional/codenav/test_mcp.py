"""go_to_definition and find_references through /.api/mcp/all (in-process app, real git repositories)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from codewell.runtime import Runtime
from tests.factories import auth_headers, make_token, make_user
from tests.gitfixtures import make_repo, register_local_repo

ACCEPT = {"Accept": "application/json, text/event-stream"}

APP = {
    "app/__init__.py": "",
    "app/util.py": "def helper(x):\n    return x * 2\n",
    "app/main.py": "from .util import helper\n\n\ndef run():\n    # helper is called here\n    return helper(21)\n",
}
SECRET = {"hidden/__init__.py": "def helper():\n    return 0\n"}


def rpc(client: TestClient, token: str, path: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = client.post(path, json=body, headers={**ACCEPT, **auth_headers(token)})
    assert response.status_code == 200, response.text
    for line in response.text.splitlines():
        if line.startswith("data:"):
            return dict(json.loads(line[5:]))
    return dict(response.json())


def call(client: TestClient, token: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return dict(rpc(client, token, "/.api/mcp/all", "tools/call", {"name": name, "arguments": arguments})["result"])


def text_of(result: dict[str, Any]) -> str:
    raw = result["content"][0]["text"]
    try:
        return str(json.loads(raw)["text"])
    except (ValueError, KeyError, TypeError):
        return str(raw)


def test_navigation_tools_over_mcp_all(client: TestClient, runtime: Runtime, tmp_path: Path) -> None:
    register_local_repo(runtime, make_repo(tmp_path / "app", APP), "acme/app")
    register_local_repo(runtime, make_repo(tmp_path / "secret", SECRET), "acme/secret", private=True)
    token = make_token(runtime, make_user(runtime, "alice"))
    # The MCP endpoints only answer requests addressed to the instance's own host (DNS rebinding guard).
    client.headers["Host"] = runtime.external_url.split("://", 1)[1]

    core = {t["name"] for t in rpc(client, token, "/.api/mcp", "tools/list", {})["result"]["tools"]}
    every = {t["name"] for t in rpc(client, token, "/.api/mcp/all", "tools/list", {})["result"]["tools"]}
    assert {"go_to_definition", "find_references"} <= every
    assert not {"go_to_definition", "find_references"} & core

    found = call(client, token, "go_to_definition", {"repo": "acme/app", "path": "app/main.py", "symbol": "helper"})
    assert found.get("isError") is not True, found
    text = text_of(found)
    assert "# acme/app – app/util.py" in text
    assert "1: def helper(x):" in text
    assert "function helper · syntactic: imported from .util" in text
    structured = found["structuredContent"]["definitions"][0]
    assert (structured["path"], structured["range"]["startLine"], structured["how"]) == ("app/util.py", 1, "syntactic")

    refs = call(client, token, "find_references", {"repo": "acme/app", "path": "app/util.py", "symbol": "helper"})
    assert refs.get("isError") is not True, refs
    files = refs["structuredContent"]["files"]
    assert [(f["path"], [r["line"] for r in f["references"]]) for f in files] == [("app/main.py", [1, 6])]
    assert "# acme/app – app/main.py" in text_of(refs)

    limited = call(
        client, token, "find_references", {"repo": "acme/app", "path": "app/util.py", "symbol": "helper", "limit": 1}
    )
    assert limited["structuredContent"]["hasMoreResults"] is True
    assert "1 more references not shown" in text_of(limited)

    # A private repository reads exactly like a missing one.
    hidden = call(
        client, token, "go_to_definition", {"repo": "acme/secret", "path": "hidden/__init__.py", "symbol": "helper"}
    )
    missing = call(
        client, token, "go_to_definition", {"repo": "acme/nothing", "path": "hidden/__init__.py", "symbol": "helper"}
    )
    assert hidden["isError"] is True
    assert text_of(hidden).replace("acme/secret", "X") == text_of(missing).replace("acme/nothing", "X")
