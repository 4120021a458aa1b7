"""Every URL an MCP tool prints opens: each tool the /.api/mcp/all endpoint lists is called over real MCP HTTP
(uvicorn on loopback, the real discovered tools) on a public and a private fixture repository, every
`<externalURL>/...` URL in its answers (text and structured content) is opened in a signed-in browser session:
200 for the owner, and for a signed-in user who may not read the private repository (or the owner's deep search
conversation) the same 404 as a missing one. A tool added later without a call here fails the test."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import requests

from codewell.core.actors import INTERNAL
from codewell.history.service import HistoryService
from codewell.jobs.runner import JobRunner
from codewell.repos.service import RepoService
from codewell.search.service import SearchService
from tests.functional.mcp.served import Served, served, tool_specs
from tests.gitfixtures import commit, make_repo, register_local_repo

__all__ = ["served", "tool_specs"]  # the real HTTP server fixtures, with the real tools

PASSWORD = "correct horse battery staple"
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
APP = {
    "app/__init__.py": "",
    "app/util.py": "def helper(x):\n    return x * 2\n",
    "app/main.py": "from .util import helper\n\n\ndef run():\n    # helper is called here\n    return helper(21)\n",
}
SECRET = {
    "vault/__init__.py": "",
    "vault/keys.py": "def rotate_vault_keys(vault):\n    # rotate the vault master keys\n    return vault\n",
    "vault/main.py": "from .keys import rotate_vault_keys\n\n\ndef run(v):\n    return rotate_vault_keys(v)\n",
}
QUESTION = "Where does rotate_vault_keys rotate the vault master keys?"

# What each tool is asked, on both repositories. Every tool /.api/mcp/all lists must be here.
CALLS: dict[str, list[dict[str, Any]]] = {
    "keyword_search": [{"query": "helper"}, {"query": "rotate_vault_keys"}],
    "nls_search": [{"query": "How is the helper called?"}, {"query": "How are the vault master keys rotated?"}],
    "list_repos": [{"query": "acme"}],
    "list_files": [{"repo": r} for r in ("acme/app", "acme/secret")] + [{"repo": "acme/secret", "path": "vault"}],
    "read_file": [
        {"repo": "acme/app", "path": "app/main.py"},
        {"repo": "acme/secret", "path": "vault/keys.py", "startLine": 2, "endLine": 3},
        {"repo": "acme/secret", "path": "vault/keys.py", "revision": "main~1"},
    ],
    "list_refs": [{"repo": r} for r in ("acme/app", "acme/secret")],
    "go_to_definition": [
        {"repo": "acme/app", "path": "app/main.py", "symbol": "helper"},
        {"repo": "acme/secret", "path": "vault/main.py", "symbol": "rotate_vault_keys"},
    ],
    "find_references": [
        {"repo": "acme/app", "path": "app/util.py", "symbol": "helper"},
        {"repo": "acme/secret", "path": "vault/keys.py", "symbol": "rotate_vault_keys"},
    ],
    "commit_search": [{"repos": ["acme/app", "acme/secret"]}],
    "diff_search": [{"pattern": "vault|helper", "repos": ["acme/app", "acme/secret"]}],
    "compare_revisions": [{"repo": r, "base": "main~1", "head": "main"} for r in ("acme/app", "acme/secret")],
    "get_contributor_repos": [{"authors": ["Test"]}],
    "code_finder": [{"task": "Where are the vault master keys rotated in acme/secret?"}],
    "deepsearch": [{"question": QUESTION}],
    "deepsearch_read": [],  # called below with the conversation deepsearch printed
    "evaluator": [{"script": "local files = search('rotate_vault_keys') return #files"}],
}
# Tools whose answers carry URLs of this instance on these repositories (keyword_search, nls_search and the
# navigation tools print `# repo – path` headers, no URLs; if they start printing some, those are checked too).
MUST_PRINT_URLS = {
    "read_file",
    "commit_search",
    "diff_search",
    "compare_revisions",
    "code_finder",
    "deepsearch",
    "deepsearch_read",
}


def _rpc(served: Served, token: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = httpx2.post(
        served.url("/.api/mcp/all"), content=json.dumps(body).encode(),
        headers={**HEADERS, "authorization": f"token {token}"}, timeout=60,
    )  # fmt: skip
    assert response.status_code == 200, response.text
    for line in response.text.splitlines():
        if line.startswith("data:"):
            return dict(json.loads(line[5:]))
    return dict(response.json())


def _call(served: Served, token: str, name: str, arguments: dict[str, Any]) -> str:
    """The whole answer (text and structured content) of one successful tools/call, as JSON text."""
    result = _rpc(served, token, "tools/call", {"name": name, "arguments": arguments})["result"]
    assert result.get("isError") is not True, (name, arguments, result)
    return json.dumps(result, ensure_ascii=False)


def _session(served: Served, username: str) -> requests.Session:
    http = requests.Session()
    page = http.get(served.url("/sign-in"))
    match = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert match, "sign-in page has no CSRF field"
    form = {"username": username, "password": PASSWORD, "csrf_token": match.group(1)}
    signed = http.post(served.url("/sign-in"), data=form, allow_redirects=False)
    assert signed.status_code == 303, signed.text
    return http


@pytest.fixture
def world(served: Served, tmp_path: Path) -> Iterator[dict[str, Any]]:
    runtime = served.runtime
    app = make_repo(tmp_path / "app", APP)
    commit(app, {"app/util.py": "def helper(x):\n    return x * 3\n"}, message="triple the helper")
    secret = make_repo(tmp_path / "secret", SECRET)
    commit(secret, {"vault/keys.py": SECRET["vault/keys.py"] + "# rotated weekly\n"}, message="note the vault")
    register_local_repo(runtime, app, "acme/app")
    register_local_repo(runtime, secret, "acme/secret", private=True)
    for name in ("acme/app", "acme/secret"):
        repo = runtime.get(RepoService).get(INTERNAL, name)
        runtime.get(SearchService).index(repo)
        runtime.get(HistoryService).index_repo(repo)
    alice = served.user("alice", password=PASSWORD)
    served.user("bob", password=PASSWORD)
    runtime.get(RepoService).set_user_repos(INTERNAL, alice.id, ["acme/secret"])
    served.configure(deepSearch={"mcpWaitSeconds": 30})
    owner, other = _session(served, "alice"), _session(served, "bob")
    # The deep search answers, as `codewell serve`'s job threads run them (the test app runs no background work).
    answering = JobRunner(runtime, role="test", kinds=frozenset({"agents.deepsearch"}), concurrency=1)
    answering.start()
    yield {"token": served.token(alice), "owner": owner, "other": other}
    answering.stop()
    owner.close()
    other.close()


def test_every_url_the_tools_print_opens_for_its_owner_and_is_404_for_others(
    served: Served, world: dict[str, Any]
) -> None:
    token: str = world["token"]
    owner: requests.Session = world["owner"]
    other: requests.Session = world["other"]
    listed = {t["name"] for t in _rpc(served, token, "tools/list", {})["result"]["tools"]}
    assert listed == set(CALLS), "a tool of /.api/mcp/all has no call in CALLS (or CALLS names a gone tool)"

    external = served.runtime.external_url
    assert external == served.base_url
    found = re.compile(re.escape(external) + r"/[^\s\"'<>()\[\]`\\]*")
    printed: dict[str, set[str]] = {}
    for name, calls in CALLS.items():
        for arguments in calls:
            printed.setdefault(name, set()).update(found.findall(_call(served, token, name, arguments)))
    conversations = {u for u in printed["deepsearch"] if "/deepsearch/" in u}
    assert conversations, printed["deepsearch"]
    for url in conversations:
        printed.setdefault("deepsearch_read", set()).update(
            found.findall(_call(served, token, "deepsearch_read", {"identifier": url}))
        )
    missing = sorted(MUST_PRINT_URLS - {name for name, urls in printed.items() if urls})
    assert missing == [], f"these tools printed no URL: {missing}"
    # The private repository is really in the answers (else the 404 half below would prove nothing).
    every = {url for urls in printed.values() for url in urls}
    assert any("/acme/secret" in url for url in every)
    assert any("/acme/app" in url for url in every)

    for url in sorted(every):
        path = url.removeprefix(external).rstrip(".,;:")
        opened = owner.get(served.url(path), allow_redirects=False)
        assert opened.status_code == 200, (path, opened.status_code)
        lines = re.search(r"%3FL(\d+)-(\d+)$", path)  # a cited range opens the file view at those lines
        if lines:
            assert {f'id="L{n}" class="hit"' for n in lines.groups()} <= set(
                re.findall(r'id="L\d+" class="hit"', opened.text)
            ), path
        if "/acme/secret" in path:
            hidden = other.get(served.url(path), allow_redirects=False)
            absent = other.get(served.url(path.replace("/acme/secret", "/acme/absent")), allow_redirects=False)
            assert hidden.status_code == absent.status_code == 404, path
            assert hidden.text.replace("acme/secret", "X") == absent.text.replace("acme/absent", "X"), path
            assert "vault" not in hidden.text, path
        elif "/deepsearch/" in path:
            hidden = other.get(served.url(path), allow_redirects=False)
            absent = other.get(served.url(re.sub(r"[0-9a-f-]{36}", str(uuid.uuid4()), path)), allow_redirects=False)
            assert hidden.status_code == absent.status_code == 404, path
            assert QUESTION not in hidden.text
        else:
            assert other.get(served.url(path), allow_redirects=False).status_code == 200, path
