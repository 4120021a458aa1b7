"""The search page's natural-language mode over real HTTP: nls_search's chunks, the terms used, links to the file
view at the chunk's lines, the toggle on the form, and nothing from a private repository."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from codewell.core.actors import INTERNAL
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from codewell.search.service import SearchService
from tests.factories import auth_headers, make_token, make_user
from tests.gitfixtures import make_repo, register_local_repo

Headers = dict[str, str]
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
}
SECRET = {"hidden/vault.py": "def purge_expired_vault_sessions():\n    # purge expired sessions\n    return 0\n"}


@pytest.fixture
def headers(tmp_path: Path, runtime: Runtime) -> Headers:
    register_local_repo(runtime, make_repo(tmp_path / "app", APP), "acme/app")
    register_local_repo(runtime, make_repo(tmp_path / "secret", SECRET), "acme/secret", private=True)
    for name in ("acme/app", "acme/secret"):
        runtime.get(SearchService).index(runtime.get(RepoService).get(INTERNAL, name))
    return auth_headers(make_token(runtime, make_user(runtime, "bob")))


def test_a_question_finds_its_file_and_links_to_the_chunk(
    client: TestClient, runtime: Runtime, headers: Headers
) -> None:
    sha = runtime.get(RepoService).resolve(INTERNAL, "acme/app").commit
    page = client.get("/search", params={"q": "How are expired sessions purged?", "mode": "nls"}, headers=headers)
    assert page.status_code == 200, page.text
    html = page.text
    assert "terms used:" in html
    assert "<code>expir" in html  # the index's terms, not the question's words ("how" is dropped)
    assert "<code>how</code>" not in html
    first = html.index("app/session.py:1-5")
    assert first < html.find("app/http_client.py") or "app/http_client.py" not in html
    assert f'href="/acme/app@{sha}/-/blob/app/session.py?L1-5#L1"' in html
    assert f'href="/acme/app@{sha}/-/blob/app/session.py?L2#L2"' in html
    assert "remove sessions whose lifetime has ended" in html
    assert 'value="nls" checked' in html  # the toggle keeps the mode
    assert "vault" not in html  # bob cannot read acme/secret
    # `patternType=nls` is the same mode; the keyword mode is the default and finds only exact words.
    same = client.get(
        "/search", params={"q": "How are expired sessions purged?", "patternType": "nls"}, headers=headers
    )
    assert "app/session.py:1-5" in same.text
    keyword = client.get("/search", params={"q": "How are expired sessions purged?"}, headers=headers)
    assert "app/session.py:1-5" not in keyword.text
    assert 'value="keyword" checked' in keyword.text


def test_nls_errors_are_shown_on_the_page(client: TestClient, headers: Headers) -> None:
    empty = client.get("/search", params={"q": "what is the", "mode": "nls"}, headers=headers)
    assert empty.status_code == 400
    assert 'role="alert"' in empty.text
    hidden = client.get("/search", params={"q": "purge repo:acme/secret", "mode": "nls"}, headers=headers)
    missing = client.get("/search", params={"q": "purge repo:acme/nothing", "mode": "nls"}, headers=headers)
    assert hidden.status_code == missing.status_code == 404
    assert "vault" not in hidden.text
