"""The repos tools through the real MCP server over HTTP (session-less calls, as the reference client makes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2

from tests.functional.mcp.served import Served, served, tool_specs
from tests.gitfixtures import register_local_repo

__all__ = ["served", "tool_specs"]

HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def call(served: Served, token: str, path: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = httpx2.post(
        served.url(path), content=json.dumps(body), headers={**HEADERS, "authorization": f"token {token}"}, timeout=30
    )
    for line in response.text.splitlines():
        if line.startswith("data:"):
            return dict(json.loads(line[5:]))
    return dict(response.json())


def test_repos_tools_over_mcp(served: Served, sample_source: Path) -> None:
    register_local_repo(served.runtime, sample_source, "local/sample")
    register_local_repo(served.runtime, sample_source, "local/secret", private=True)
    token = served.token(served.user("alice"))
    core = {t["name"] for t in call(served, token, "/.api/mcp", "tools/list", {})["result"]["tools"]}
    every = {t["name"] for t in call(served, token, "/.api/mcp/all", "tools/list", {})["result"]["tools"]}
    assert {"list_repos", "list_files", "read_file"} <= core
    assert "list_refs" not in core
    assert {"list_repos", "list_files", "read_file", "list_refs"} <= every

    read = call(
        served,
        token,
        "/.api/mcp",
        "tools/call",
        {"name": "read_file", "arguments": {"repo": "local/sample", "path": "src/util.py"}},
    )["result"]
    text = json.loads(read["content"][0]["text"])["text"]
    assert text.startswith(f"URL: {served.base_url}/local/sample@")
    assert text.splitlines()[1:] == ["1: def helper():", "2:     return 42"]

    repos = call(served, token, "/.api/mcp", "tools/call", {"name": "list_repos", "arguments": {"query": "local"}})
    assert json.loads(repos["result"]["content"][0]["text"])["text"] == "local/sample"
    assert repos["result"]["structuredContent"]["hasMoreResults"] is False

    hidden = call(
        served,
        token,
        "/.api/mcp",
        "tools/call",
        {"name": "list_files", "arguments": {"repo": "local/secret"}},
    )["result"]
    assert hidden["isError"] is True
    assert "repository 'local/secret' not found" in hidden["content"][0]["text"]
