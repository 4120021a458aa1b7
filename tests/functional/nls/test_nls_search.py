"""nls_search end to end: the index built when search indexes a revision, the MCP tool, permissions, fallbacks."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from codewell.core.actors import INTERNAL
from codewell.core.errors import InvalidInput, NotFound
from codewell.nls.service import NlsService
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from codewell.search.service import SearchService
from tests.factories import auth_headers, make_token, make_user
from tests.gitfixtures import make_repo, register_local_repo

ACCEPT = {"Accept": "application/json, text/event-stream"}
FILLER = "".join(f"\ndef filler_{i}(value):\n    return value + {i}\n" for i in range(40))
APP = {
    "app/session.py": (
        "def purgeExpiredSessions(store, now):\n"
        "    # remove sessions whose lifetime has ended\n"
        "    for key in list(store):\n"
        "        if store[key] < now:\n"
        "            del store[key]\n" + FILLER
    ),
    "app/http_client.py": "def send_request(url, retries):\n    # retry the request on failure\n    return url\n",
    "README.md": "A sample app.\n",
}
SECRET = {"hidden/vault.py": "def purge_secret_sessions():\n    return 0\n"}


def rpc(client: TestClient, token: str, path: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = client.post(path, json=body, headers={**ACCEPT, **auth_headers(token)})
    assert response.status_code == 200, response.text
    for line in response.text.splitlines():
        if line.startswith("data:"):
            return dict(json.loads(line[5:]))
    return dict(response.json())


def _index(runtime: Runtime, name: str) -> None:
    runtime.get(SearchService).index(runtime.get(RepoService).get(INTERNAL, name))


def test_question_finds_function_and_hides_private(client: TestClient, runtime: Runtime, tmp_path: Path) -> None:
    register_local_repo(runtime, make_repo(tmp_path / "app", APP), "acme/app")
    register_local_repo(runtime, make_repo(tmp_path / "secret", SECRET), "acme/secret", private=True)
    _index(runtime, "acme/app")
    _index(runtime, "acme/secret")
    token = make_token(runtime, make_user(runtime, "alice"))
    client.headers["Host"] = runtime.external_url.split("://", 1)[1]

    every = {t["name"] for t in rpc(client, token, "/.api/mcp/all", "tools/list", {})["result"]["tools"]}
    core = {t["name"] for t in rpc(client, token, "/.api/mcp", "tools/list", {})["result"]["tools"]}
    assert "nls_search" in every
    # code_finder is available here, so /.api/mcp does not offer its fallback nls_search (registry rule; with
    # code_finder disabled it does: tests/functional/agents/test_tools.py).
    assert "nls_search" not in core
    assert "code_finder" in core

    params = {"name": "nls_search", "arguments": {"query": "How are expired sessions purged?"}}
    result = rpc(client, token, "/.api/mcp/all", "tools/call", params)["result"]
    text = json.loads(result["content"][0]["text"])["text"]
    first, rest = text.split("\n", 1)
    assert first.startswith("Searched for:")
    assert "expir" in first
    assert "how" not in first.split()
    assert rest.lstrip("\n").startswith("# acme/app – app/session.py\n1: def purgeExpiredSessions")
    # The function is one chunk (it ends at line 5), the filler functions are chunks of their own.
    assert "\n5:             del store[key]\n\n7: def filler_0" in rest
    assert "secret" not in text
    assert "vault" not in text

    # A private repository reads exactly like a missing one.
    arguments = {"query": "purge repo:acme/secret"}
    hidden = rpc(client, token, "/.api/mcp/all", "tools/call", {**params, "arguments": arguments})["result"]
    arguments = {"query": "purge repo:acme/nothing"}
    absent = rpc(client, token, "/.api/mcp/all", "tools/call", {**params, "arguments": arguments})["result"]
    assert hidden["isError"] is True
    assert absent["isError"] is True
    assert hidden["content"][0]["text"].replace("secret", "X") == absent["content"][0]["text"].replace("nothing", "X")


def test_bad_input_and_fallback(client: TestClient, runtime: Runtime, tmp_path: Path) -> None:
    register_local_repo(runtime, make_repo(tmp_path / "app", APP), "acme/app")  # wired: synced and indexed
    nls = runtime.get(NlsService)
    for bad in ("", "   ", "repo:acme/app", "what is the", "how count:0 retry"):
        with pytest.raises(InvalidInput):
            nls.search(INTERNAL, bad)
    with pytest.raises(NotFound):
        nls.search(INTERNAL, "retry repo:nothing/here")
    # The nls index gone (as while it is being built): said so, and keyword search answers over the shard.
    repo = runtime.get(RepoService).get(INTERNAL, "acme/app")
    shutil.rmtree(nls.root / str(repo.id))
    fallback = nls.search(INTERNAL, "send_request retries repo:acme/app")
    assert any("does not exist" in n and "keyword search used" in n for n in fallback.notes), fallback.notes
    assert fallback.hits
    assert fallback.hits[0].path == "app/http_client.py"
    long = nls.search(INTERNAL, " ".join(f"word{i}" for i in range(100)) + " repo:acme/app")
    assert any("cut to its first 32 words" in n for n in long.notes)
    nls.on_indexed(repo, {"main": runtime.get(RepoService).resolve(INTERNAL, "acme/app").commit})
    found = nls.search(INTERNAL, "retry request on failure file:http")
    assert [h.path for h in found.hits][:1] == ["app/http_client.py"]
    assert all(h.path.startswith("app/http") for h in found.hits)
    assert not found.notes


def test_unindexed_revision_falls_back_to_keyword_search(client: TestClient, runtime: Runtime, tmp_path: Path) -> None:
    source = make_repo(tmp_path / "app", APP)
    git = ["git", "-C", str(source), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "checkout", "-q", "-b", "feature"], check=True)
    (source / "app" / "jobs.py").write_text("def nightly_cleanup_job():\n    return 1\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "jobs"], check=True)
    subprocess.run([*git, "checkout", "-q", "main"], check=True)
    register_local_repo(runtime, source, "acme/app")  # indexes main only

    found = runtime.get(NlsService).search(INTERNAL, "nightly_cleanup_job repo:acme/app rev:feature")
    assert any("acme/app@feature" in n and "not indexed" in n for n in found.notes), found.notes
    assert [h.path for h in found.hits] == ["app/jobs.py"]
    assert not runtime.get(NlsService).search(INTERNAL, "nightly cleanup job repo:acme/app").hits


def test_replaced_index_is_not_served_from_the_cache(client: TestClient, runtime: Runtime, tmp_path: Path) -> None:
    repo = register_local_repo(runtime, make_repo(tmp_path / "app", APP), "acme/app")
    nls = runtime.get(NlsService)
    assert not nls.search(INTERNAL, "retry request repo:acme/app").notes  # loaded and cached
    nls.on_indexed(repo, {})  # a generation without this commit: its index is removed
    assert any("does not exist" in n for n in nls.search(INTERNAL, "retry request repo:acme/app").notes)
