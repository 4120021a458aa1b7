"""Search over REST and MCP with real git repositories, synced and indexed through the real services."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from starlette.testclient import TestClient
from tests.factories import auth_headers, make_token, make_user
from tests.gitfixtures import commit, make_repo, register_local_repo

from codewell.analytics.events import UsageRecorder
from codewell.analytics.models import UsageEventRow
from codewell.core.actors import ANONYMOUS, INTERNAL
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from codewell.search.service import SearchService


@pytest.fixture
def repos(tmp_path: Path, runtime: Runtime, client: TestClient) -> dict[str, Path]:
    """A public and a private repository, mirrored and indexed (the sync listener indexes them)."""
    public = make_repo(
        tmp_path / "pub",
        {
            "src/locks.c": "void f(void) {\n\tmutex_lock(&m);\n\treturn 0;\n}\n",
            "README.md": "Mutex notes\nsecret_word is not here\n",
            "mutex_lock.h": "#define MUTEX_LOCK 1\n",
            "logo.bin": b"\x00\x01mutex_lock\x00",
        },
        tags=["v1"],
    )
    commit(public, {"src/new.c": "int added_later = 1;\n"}, message="second")
    private = make_repo(tmp_path / "priv", {"hidden.c": "mutex_lock(secret_word);\n"})
    register_local_repo(runtime, public, "local/pub")
    register_local_repo(runtime, private, "local/priv", private=True)
    return {"pub": public, "priv": private}


@pytest.fixture
def user_headers(runtime: Runtime) -> dict[str, str]:
    """A signed-in user with no grants: reads public repositories only."""
    return auth_headers(make_token(runtime, make_user(runtime, "reader")))


def search(client: TestClient, q: str, headers: dict[str, str] | None = None, **params: str) -> dict[str, Any]:
    response = client.get("/.api/search", params={"q": q, **params}, headers=headers or client.headers)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def paths(body: dict[str, Any]) -> set[str]:
    return {f"{f['repository']}:{f['path']}" for f in body["files"]}


def test_user_without_grants_sees_only_public_repositories(
    client: TestClient, repos: dict[str, Path], user_headers: dict[str, str]
) -> None:
    client.headers.update(user_headers)
    body = search(client, "mutex_lock")
    assert paths(body) == {"local/pub:src/locks.c", "local/pub:mutex_lock.h"}
    # The file-name match ranks first; the binary file is never a content match.
    assert body["files"][0]["path"] == "mutex_lock.h"
    locks = next(f for f in body["files"] if f["path"] == "src/locks.c")
    assert locks["lineMatches"] == [{"lineNumber": 2, "line": "\tmutex_lock(&m);", "ranges": [[1, 11]]}]
    assert search(client, "secret_word")["matchCount"] == 1  # only README.md of the public repository


def test_granted_user_sees_private_repository(runtime: Runtime, client: TestClient, repos: dict[str, Path]) -> None:
    user = make_user(runtime, "alice")
    runtime.get(RepoService).set_repo_users(INTERNAL, "local/priv", [user.id])
    headers = auth_headers(make_token(runtime, user))
    assert "local/priv:hidden.c" in paths(search(client, "secret_word", headers))
    outsider = auth_headers(make_token(runtime, make_user(runtime, "bob")))
    body = search(client, "secret_word", outsider)
    assert "local/priv:hidden.c" not in paths(body)
    assert not any("priv" in s for s in body["skipped"])


def test_query_language_over_rest(client: TestClient, repos: dict[str, Path], user_headers: dict[str, str]) -> None:
    client.headers.update(user_headers)
    assert paths(search(client, "mutex_lock case:yes")) == {"local/pub:src/locks.c"}
    assert paths(search(client, "mutex_lock file:\\.c$")) == {"local/pub:src/locks.c"}
    assert paths(search(client, "mutex_lock -file:\\.c$")) == {"local/pub:mutex_lock.h"}
    assert paths(search(client, "mutex_lock lang:c")) == {"local/pub:src/locks.c", "local/pub:mutex_lock.h"}
    assert paths(search(client, "mutex NOT secret_word")) == {
        "local/pub:src/locks.c",
        "local/pub:mutex_lock.h",
    }
    assert paths(search(client, "/return \\d/ OR added_later")) == {"local/pub:src/locks.c", "local/pub:src/new.c"}
    assert paths(search(client, "type:path mutex")) == {"local/pub:mutex_lock.h"}
    assert paths(search(client, "file:logo")) == {"local/pub:logo.bin"}
    assert search(client, "mutex_lock -repo:pub")["files"] == []
    limited = search(client, "mutex count:1")
    assert limited["matchCount"] == 1
    assert limited["limitHit"] is True


def test_unindexed_revision_is_searched(
    client: TestClient, repos: dict[str, Path], user_headers: dict[str, str]
) -> None:
    client.headers.update(user_headers)
    assert paths(search(client, "added_later")) == {"local/pub:src/new.c"}
    body = search(client, "added_later repo:pub@v1")
    assert body["files"] == [], body
    body = search(client, "mutex_lock repo:pub rev:v1")
    assert paths(body) >= {"local/pub:src/locks.c"}, body


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("", "empty query"),
        ("foo rev:v1", "rev: needs repo:"),
        ('"open', "unbalanced quote"),
        ("/a(/", "invalid regex"),
        ("x file:*.py", "looks like a glob"),
        ("x lang:klingon", "unknown language"),
        ("repo:pub", "only filters"),
        ("(" * 1000 + "a" + ")" * 1000, "levels deep"),  # #22: was a RecursionError (500)
        ("NOT " * 1200 + "a", "levels deep"),
        (" ".join(f"t{i}" for i in range(150)), "too many search terms (150 different ones, at most 100)"),
        ("x" * 20_000, "query is too long"),
    ],
)
def test_bad_queries_get_specific_errors(
    client: TestClient, user_headers: dict[str, str], query: str, message: str
) -> None:
    response = client.get("/.api/search", params={"q": query}, headers=user_headers)
    assert response.status_code == 400
    error = response.json()["error"]
    assert message in error["message"]
    assert error["hint"]


def test_new_commit_is_searchable_soon_after_sync(
    tmp_path: Path, runtime: Runtime, client: TestClient, user_headers: dict[str, str]
) -> None:
    client.headers.update(user_headers)
    files = {f"pkg/m{i:04}.py": f"def f{i}():\n    return {i}\n" for i in range(1000)}
    source = make_repo(tmp_path / "big", files)
    register_local_repo(runtime, source, "local/big")
    assert search(client, "brand_new_symbol")["files"] == []
    commit(source, {"pkg/m0001.py": "def brand_new_symbol():\n    pass\n"}, message="change")
    started = time.monotonic()
    outcome = runtime.get(RepoService).sync_repo(INTERNAL, "local/big")
    assert outcome.ok
    body = search(client, "brand_new_symbol")
    elapsed = time.monotonic() - started
    print(f"commit searchable {elapsed:.2f} s after sync started")
    assert elapsed <= 10
    assert paths(body) == {"local/big:pkg/m0001.py"}
    statuses = client.get("/.api/search/status", params={"repo": "local/big"}).json()["repositories"]
    assert statuses[0]["state"] == "indexed"
    assert statuses[0]["documents"] == 1000


def test_shard_of_an_older_format_is_reported_and_rebuilt(
    runtime: Runtime, client: TestClient, repos: dict[str, Path], user_headers: dict[str, str]
) -> None:
    """An index written by an earlier version is never read: the repository says so, then gets re-indexed."""
    client.headers.update(user_headers)
    service = runtime.get(SearchService)
    repo = runtime.get(RepoService).get(INTERNAL, "local/pub")
    shard = service.shard(repo)
    assert shard is not None
    meta_file = shard.path / "meta.json"
    meta_file.write_text(json.dumps({**json.loads(meta_file.read_text()), "format": 1}))
    service._forget_loaded()  # as after a restart with the new version
    body = search(client, "mutex_lock")
    assert body["skipped"] == ["local/pub: not indexed yet"]
    assert paths(body) == set()
    assert service.needs_index(repo)
    assert service.reconcile() == 1
    assert "local/pub:src/locks.c" in paths(search(client, "mutex_lock"))
    assert search(client, "mutex_lock")["skipped"] == []


def test_rest_searches_are_recorded_as_usage(
    runtime: Runtime, client: TestClient, repos: dict[str, Path], user_headers: dict[str, str]
) -> None:
    """Each REST search is one usage event (feature, client, language, size), failed ones with their error."""

    client.headers.update(user_headers)
    body = search(client, "mutex_lock file:\\.c$")
    assert client.get("/.api/search", params={"q": "lang:klingon x"}).status_code == 400
    runtime.get(UsageRecorder).flush()
    with runtime.db.session() as session:
        rows = session.execute(
            select(
                UsageEventRow.feature,
                UsageEventRow.client,
                UsageEventRow.endpoint,
                UsageEventRow.language,
                UsageEventRow.error,
                UsageEventRow.result_bytes,
            ).order_by(UsageEventRow.id)
        ).all()
    assert [tuple(r[:5]) for r in rows] == [
        ("search", "rest", "/.api/search", "C", ""),
        ("search", "rest", "/.api/search", "", "invalid_input"),
    ]
    assert rows[0][5] == len(json.dumps(body, separators=(",", ":")).encode())


def test_keyword_search_tool_over_mcp(runtime: Runtime, client: TestClient, repos: dict[str, Path]) -> None:
    token = make_token(runtime, make_user(runtime, "agent"))
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "keyword_search", "arguments": {"query": "mutex_lock"}},
    }
    response = client.post(
        "/.api/mcp",
        content=json.dumps(body),
        headers={
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "host": "127.0.0.1",
            **auth_headers(token),
        },
    )
    assert response.status_code == 200, (response.headers, response.text)
    data = next(json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:"))
    result = data["result"]
    assert not result.get("isError")
    text = json.loads(result["content"][0]["text"])["text"]
    assert "# local/pub – src/locks.c\n2: \tmutex_lock(&m);" in text
    assert "# local/pub – mutex_lock.h" in text


def test_search_service_api(runtime: Runtime, client: TestClient, repos: dict[str, Path]) -> None:
    service = runtime.get(SearchService)
    results = service.search(INTERNAL, "mutex_lock", count=10)
    assert {f.repo for f in results.files} == {"local/pub", "local/priv"}
    assert all(len(f.commit) == 40 for f in results.files)
    statuses = {s.repo: s for s in service.status(INTERNAL)}
    assert statuses["local/pub"].state == "indexed"
    anonymous = service.search(ANONYMOUS, "secret_word")
    assert [f.repo for f in anonymous.files] == ["local/pub"]


def test_extra_branches_are_indexed_and_cloning_repos_are_reported(
    tmp_path: Path, runtime: Runtime, client: TestClient
) -> None:
    source = make_repo(tmp_path / "multi", {"a.txt": "shared line\n"}, branches={"dev": {"dev.txt": "dev_only_word\n"}})
    repos = runtime.get(RepoService)
    repos.add_repo(INTERNAL, str(source), name="local/multi", branches=["dev"])
    assert repos.sync_repo(INTERNAL, "local/multi").ok
    repos.add_repo(INTERNAL, str(make_repo(tmp_path / "pending", {"p.txt": "shared\n"})), name="local/pending")
    service = runtime.get(SearchService)
    assert service.search(INTERNAL, "dev_only_word").files == []
    on_dev = service.search(INTERNAL, "dev_only_word repo:multi@dev")
    assert [(f.path, f.commit) for f in on_dev.files] == [
        ("dev.txt", service.status(INTERNAL, "local/multi")[0].branches["dev"])
    ]
    shard = service.shard(repos.get(INTERNAL, "local/multi"))
    assert shard is not None
    assert shard.doc_count == 2  # a.txt is shared by both branches and stored once
    skipped = service.search(INTERNAL, "shared").skipped
    assert skipped == ["local/pending: still cloning, not searchable yet"]


def call_keyword_search(client: TestClient, token: str, arguments: dict[str, str]) -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "keyword_search", "arguments": arguments},
    }
    response = client.post(
        "/.api/mcp",
        content=json.dumps(body),
        headers={
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "host": "127.0.0.1",
            **auth_headers(token),
        },
    )
    assert response.status_code == 200, response.text
    data = next(json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:"))
    result: dict[str, Any] = data["result"]
    return result


def test_keyword_search_count_shows_every_match_and_pages_by_cursor(
    tmp_path: Path, runtime: Runtime, client: TestClient
) -> None:
    """#22: a word in 37 files with count:all shows 37 files; past the budget a cursor gives the rest."""
    files = {f"pkg/mod{i:02}.py": f"import os\nvalue = 'frobword {i}'\n" for i in range(37)}
    files["big.txt"] = "".join(f"frobword line {n} " + "y" * 150 + "\n" for n in range(400))
    register_local_repo(runtime, make_repo(tmp_path / "many", files), "local/many")
    token = make_token(runtime, make_user(runtime, "counter"))

    def text_of(result: dict[str, Any]) -> str:
        assert not result.get("isError"), result
        text: str = json.loads(result["content"][0]["text"])["text"]
        return text

    plain = text_of(call_keyword_search(client, token, {"query": "frobword file:\\.py$"}))
    assert plain.count("# local/many – ") == 15
    counted = text_of(call_keyword_search(client, token, {"query": "frobword file:\\.py$ count:all"}))
    assert counted.count("# local/many – pkg/") == 37
    assert "(Showing matches 1-37 of 37: all collected matches.)" in counted

    query = "frobword count:all"
    lines: set[str] = set()
    cursor: str | None = None
    for _page in range(10):
        text = text_of(call_keyword_search(client, token, {"query": query, **({"cursor": cursor} if cursor else {})}))
        lines.update(line for line in text.splitlines() if "frobword line" in line)
        found = re.search(r'cursor "([^"]+)"', text)
        if found is None:
            break
        cursor = found.group(1)
    assert len(lines) == 400  # every line of big.txt, over several pages
    bad = call_keyword_search(client, token, {"query": "frobword", "cursor": "3.abc"})
    assert bad.get("isError")


def test_repeated_terms_are_searched_once(
    client: TestClient, repos: dict[str, Path], user_headers: dict[str, str]
) -> None:
    """#22: `a a a …` with 3,000 terms took 32 s; identical terms are one term now."""
    client.headers.update(user_headers)
    started = time.monotonic()
    body = search(client, "mutex " * 1400)
    assert time.monotonic() - started < 5
    assert paths(body) == paths(search(client, "mutex"))
    assert not body["timedOut"]
