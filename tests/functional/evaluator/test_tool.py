"""The `evaluator` MCP tool and POST /.api/evaluate over real HTTP, with real repositories and search."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx2

from codewell.core.actors import INTERNAL
from codewell.core.tools import Endpoint, ToolContext
from codewell.evaluator.tools import TOOLS
from codewell.mcp.registry import ToolRegistry
from codewell.runtime import Runtime
from codewell.search.service import SearchService
from tests.functional.mcp.served import Served
from tests.gitfixtures import make_repo, register_local_repo

HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def index_sample(runtime: Runtime, tmp_path: Path) -> None:
    path = make_repo(tmp_path / "sample", {"a.py": "import os\nos.getcwd()\n", "b.py": "import os\n"})
    runtime.get(SearchService).index(register_local_repo(runtime, path, "acme/sample"))


def call_tool(served: Served, token: str, script: str, path: str = "/.api/mcp") -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "evaluator", "arguments": {"script": script}},
    }
    response = httpx2.post(
        served.url(path),
        content=json.dumps(body).encode(),
        headers={**HEADERS, "authorization": f"token {token}"},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    for line in response.text.splitlines():
        if line.startswith("data:"):
            return dict(json.loads(line[5:]))
    return dict(response.json())


def test_tool_is_registered_on_core_and_all(runtime: Runtime) -> None:
    registry = ToolRegistry.create(runtime)
    tool = registry.get("evaluator")
    assert tool is not None
    assert tool.spec.endpoints == frozenset({Endpoint.CORE, Endpoint.ALL})
    assert tool.spec.input_schema["required"] == ["script"]
    assert "search(query)" in tool.spec.description
    assert "read_file(repo, path[, startLine, endLine])" in tool.spec.description
    assert registry.offered("evaluator", Endpoint.CORE, runtime.config, runtime)
    assert not registry.offered("evaluator", Endpoint.DEEPSEARCH, runtime.config, runtime)


def test_handler_renders_result_and_output(runtime: Runtime, tmp_path: Path) -> None:
    index_sample(runtime, tmp_path)
    [spec] = TOOLS
    ctx = ToolContext(runtime, INTERNAL, Endpoint.CORE)
    result = spec.handler(
        ctx, {"script": "local files = search('import os') print(#files, 'files') return {n = #files}"}
    )
    assert not result.is_error
    assert result.text == 'Result:\n{\n  "n": 2\n}\n\nOutput:\n2\tfiles'
    assert result.structured is not None
    assert result.structured["result"] == {"n": 2}
    assert result.structured["stats"]["searchCalls"] == 1
    failed = spec.handler(ctx, {"script": "print('partial')\nlocal t = nil\nreturn t.x"})
    assert failed.is_error
    assert failed.text.startswith(
        "Script error (runtime_error) at line 3: attempt to index a nil value (local 't')\nHint: "
    )
    assert failed.text.endswith("Output:\npartial")


def test_tool_over_mcp_http(served: Served, tmp_path: Path) -> None:
    index_sample(served.runtime, tmp_path)
    token = served.token(served.user("alice"))
    script = "local per = {} for _, f in ipairs(search('os')) do per[f.path] = #f.matches end return per"
    body = call_tool(served, token, script)
    result = body["result"]
    assert result.get("isError") is not True
    assert result["structuredContent"]["result"] == {"a.py": 2, "b.py": 1}
    assert '"a.py": 2' in json.loads(result["content"][0]["text"])["text"]
    on_all = call_tool(served, token, "return 40 + 2", path="/.api/mcp/all")["result"]
    assert on_all["structuredContent"]["result"] == 42
    loop = call_tool(served, token, "while true do end")["result"]
    assert loop["isError"] is True
    # The default limits: 100M instructions or 3 s, whichever this machine reaches first.
    assert re.search(r"\((instruction_limit|time_limit)\)", loop["content"][0]["text"])
    # The server is unaffected: the next call is served normally.
    assert call_tool(served, token, "return 'ok'")["result"]["structuredContent"]["result"] == "ok"


def test_rest_endpoint(served: Served) -> None:
    token = served.token(served.user("bob"))
    url = served.url("/.api/evaluate")
    anonymous = httpx2.post(url, json={"script": "return 1"}, timeout=30)
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "unauthenticated"
    auth = {"authorization": f"token {token}"}
    ok = httpx2.post(url, json={"script": "print('hi') return {1, 2}"}, headers=auth, timeout=30)
    assert ok.status_code == 200
    assert ok.json()["result"] == [1, 2]
    assert ok.json()["output"] == "hi\n"
    assert ok.json()["ok"] is True
    failed = httpx2.post(url, json={"script": "x = = 1"}, headers=auth, timeout=30)
    assert failed.status_code == 200
    assert failed.json()["error"]["kind"] == "syntax_error"
    assert failed.json()["error"]["line"] == 1
    bad = httpx2.post(url, content=b"not json", headers=auth, timeout=30)
    assert bad.status_code == 400
    assert bad.json()["error"]["message"] == "the request body is not valid JSON"
    huge = httpx2.post(url, json={"script": "x" * 500_000}, headers=auth, timeout=30)
    assert huge.status_code == 413
    assert huge.json()["error"]["message"] == (
        "the request body is larger than the 385 KiB (394240 bytes) limit of evaluator requests"
    )
    assert huge.json()["error"]["hint"] == "scripts are limited to 65536 bytes"
    empty = httpx2.post(url, json={"script": ""}, headers=auth, timeout=30)
    assert empty.status_code == 400
    assert empty.json()["error"]["message"] == "the script is empty"
