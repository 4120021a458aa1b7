"""The search page a person steers, over HTTP with real git repositories and a real index: toggles in the address
become query fields, filters come from the result set, matches show with context lines inside highlighted code,
and "show more" holds the rest of a file's matching lines."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from starlette.testclient import TestClient

from codewell.core.actors import INTERNAL
from codewell.runtime import Runtime
from codewell.search.service import SearchService
from tests.factories import auth_headers, make_token, make_user
from tests.gitfixtures import make_repo, register_local_repo

Headers = dict[str, str]
GO = "package cli\n\n// Execute runs the command.\nfunc (c *Command) Execute() error {\n\treturn c.run()\n}\n"
PY = "".join(f"def resolve_command_{n}(ctx):\n    return ctx\n\n" for n in range(14))
DOC = "Call Execute on a *Command to run it: func and c are the words.\n"


@pytest.fixture
def headers(runtime: Runtime, tmp_path: Path) -> Headers:
    cli = make_repo(tmp_path / "cli", {"cmd/command.go": GO, "README.md": DOC, "src/resolve.py": PY})
    register_local_repo(runtime, cli, "acme/cli")
    register_local_repo(
        runtime, make_repo(tmp_path / "web", {"app/views.py": "def resolve_command(x):\n    pass\n"}), "acme/web"
    )
    for name in ("acme/cli", "acme/web"):
        runtime.get(SearchService).index_repo(INTERNAL, name)
    return auth_headers(make_token(runtime, make_user(runtime, "root", site_admin=True)))


def _files(html: str) -> list[tuple[str, str]]:
    """(repository, path) of each result, in page order."""
    found = re.findall(r'<h3><a href="/[^"]+">([^<]+)</a> › <a href="[^"]+">([^<]+)</a></h3>', html)
    return [(repo, path) for repo, path in found]


def test_the_regex_toggle_in_the_address_runs_one_regex_with_its_spaces(client: TestClient, headers: Headers) -> None:
    query = r"func \(c \*Command\) Execute"
    keyword = client.get("/search", params={"q": "func c Command Execute"}, headers=headers)
    assert ("acme/cli", "README.md") in _files(keyword.text)  # bare words: ANDed anywhere in a file
    regexp = client.get("/search", params={"q": query, "patternType": "regexp"}, headers=headers)
    assert regexp.status_code == 200
    assert _files(regexp.text) == [("acme/cli", "cmd/command.go")]
    assert 'id="toggle-regexp" name="patternType" value="regexp" checked' in regexp.text
    same = client.get("/search", params={"q": f"{query} patterntype:regexp"}, headers=headers)
    assert _files(same.text) == [("acme/cli", "cmd/command.go")]
    assert 'value="regexp" checked disabled' in same.text  # the query's own field fixes the toggle


def test_the_case_and_whole_word_toggles(client: TestClient, headers: Headers) -> None:
    loose = client.get("/search", params={"q": "EXECUTE"}, headers=headers)
    assert len(_files(loose.text)) == 2
    strict = client.get("/search", params={"q": "EXECUTE", "case": "yes"}, headers=headers)
    assert _files(strict.text) == []
    assert "0 matches" in strict.text
    assert 'id="toggle-case" name="case" value="yes" checked' in strict.text
    part = client.get("/search", params={"q": "resolve_command"}, headers=headers)
    assert {p for _, p in _files(part.text)} == {"src/resolve.py", "app/views.py"}
    word = client.get("/search", params={"q": "resolve_command", "word": "yes"}, headers=headers)
    assert _files(word.text) == [("acme/web", "app/views.py")]  # resolve_command_3 is another word


def test_filters_from_the_result_set_add_repo_lang_and_file_to_the_query(client: TestClient, headers: Headers) -> None:
    page = client.get("/search", params={"q": "resolve_command", "case": "yes"}, headers=headers)
    links = dict(re.findall(r'<a href="(/search\?[^"]+)" title="add ([^"]+) to the query">', page.text))
    assert set(links.values()) >= {r"repo:^acme/cli$", r"repo:^acme/web$", "lang:python", "file:^src/", "file:^app/"}
    repo_link = next(url for url, added in links.items() if added == r"repo:^acme/web$")
    params = parse_qs(urlparse(repo_link.replace("&amp;", "&")).query)
    assert params == {"q": [r"resolve_command repo:^acme/web$"], "case": ["yes"]}  # the toggles are kept
    narrowed = client.get(repo_link.replace("&amp;", "&"), headers=headers)
    assert _files(narrowed.text) == [("acme/web", "app/views.py")]
    assert r"repo:^acme/web$" not in re.findall(r'title="add ([^"]+) to the query"', narrowed.text)


def test_context_lines_highlighting_and_show_more(client: TestClient, headers: Headers) -> None:
    page = client.get("/search", params={"q": "Execute() error", "context": "2"}, headers=headers)
    go = page.text[page.text.index("cmd/command.go</a></h3>") :]
    numbers = [int(n) for n in re.findall(r'<td class="num"><a href="[^"]+">(\d+)</a>', go.split("</section>")[0])]
    assert numbers == [2, 3, 4, 5, 6]  # line 4 and two lines either side
    assert '<tr class="match"><td class="num"><a href="/acme/cli@' in go
    assert '<span class="kd">func</span>' in go or '<span class="k">func</span>' in go  # highlighted
    assert "<mark>Execute() error</mark>" not in go  # the match is marked inside the highlighted tokens
    assert "<mark>" in go.split("</section>")[0]
    none = client.get("/search", params={"q": "Execute() error", "context": "0"}, headers=headers)
    section = none.text[none.text.index("cmd/command.go</a></h3>") :].split("</section>")[0]
    assert re.findall(r'<td class="num"><a href="[^"]+">(\d+)</a>', section) == ["4"]
    many = client.get("/search", params={"q": "def resolve_command_ repo:cli", "context": "0"}, headers=headers)
    section = many.text[many.text.index("src/resolve.py</a></h3>") :].split("</section>")[0]
    assert "Show 4 more matching lines</summary>" in section  # 14 matches: 10 shown, 4 behind "show more"
    assert section.count('<tr class="match">') == 14


def test_an_invalid_regex_shows_the_pattern_as_text(client: TestClient, headers: Headers) -> None:
    page = client.get("/search", params={"q": "a(", "patternType": "regexp"}, headers=headers)
    assert page.status_code == 400
    assert "invalid regex /a(/: missing ): a(" in page.text
    assert "b&#39;" not in page.text
    assert "(?m)" not in page.text


def test_a_phrase_as_typed_comes_before_files_that_merely_contain_the_words(
    client: TestClient, headers: Headers
) -> None:
    page = client.get("/search", params={"q": "func (c *Command) Execute"}, headers=headers)
    # The searcher lists README.md first (index order); the Go line holds the words as typed.
    assert _files(page.text) == [("acme/cli", "cmd/command.go"), ("acme/cli", "README.md")]
