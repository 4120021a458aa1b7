"""Whole files for people (#32 item 1): the file view, raw view and path list read past read_file's 200-line cut
(a rule for agents), long files are shown a page of lines at a time with the asked line highlighted, files too big
to show say how big they are and offer the raw file; and the browser journeys: a search hit at line 2048 of a
big file, go to a definition past line 200, the hover card, the references side panel and the `t` file finder."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect, sync_playwright
from starlette.testclient import TestClient

from codewell.core.actors import INTERNAL
from codewell.jobs.runner import drain
from codewell.repos.service import RepoService, repo_resource
from codewell.runtime import Runtime
from codewell.search.service import SearchService
from tests.browser import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    axe_source,
    serious_violations,
    serve_app,
    sign_in,
    watch_console,
)
from tests.factories import auth_headers, make_token, make_user
from tests.gitfixtures import commit, make_repo, register_local_repo

Headers = dict[str, str]
PASSWORD = "correct horse battery staple"
NEEDLE_LINE = 2048
NEEDLE = "resolve_command_needle"


def _core_py() -> str:
    """A click-like `core.py`: > 128 KB and > 3,000 lines, a searchable needle on line 2048, `helper_700` defined
    near line 2800 (its docstring on the next line) and used by `main` near the end, past line 3000."""
    lines: list[str] = ['"""A big module, like click\'s core.py."""', ""]
    for n in range(800):
        lines += [
            f"def helper_{n}(value):",
            f'    """Helper number {n}: adds {n} to the value given, padded to make a long file of this."""',
            f"    # keep every helper long enough that the file crosses 128 KB well before its end ({n:04d})",
            f"    return value + {n}",
        ]
    lines += ["", "def main():", "    return helper_700(1)", ""]
    lines[NEEDLE_LINE - 1] = f"    # {NEEDLE}: the line a search hit opens"
    text = "\n".join(lines)
    assert len(text.encode()) > 128 * 1024
    assert len(lines) > 3000
    return text


CORE = _core_py()
CORE_LINES = CORE.splitlines()
DEFINED_AT = CORE_LINES.index("def helper_700(value):") + 1
USED_AT = CORE_LINES.index("    return helper_700(1)") + 1
# A small file for the accessibility checks (axe on the 3,200-line file's ~10,000 elements takes minutes here).
SMALL = 'def greet(name):\n    """Say hello."""\n    return "hi " + name\n\n\ndef main():\n    return greet("x")\n'
LONG = "".join(f"line {n}\n" for n in range(1, 12_001))


def _index(runtime: Runtime, name: str) -> None:
    """Index `name`, then run what the new index causes (codenav's symbols), as a job runner would."""
    repo = runtime.get(RepoService).get(INTERNAL, name)
    runtime.get(SearchService).index(repo)
    drain(runtime, repo_resource(repo.id))


@pytest.fixture
def world(tmp_path: Path, runtime: Runtime) -> dict[str, Headers]:
    files: dict[str, str | bytes] = {
        "src/click/core.py": CORE,
        "src/click/long.txt": LONG,
        "src/click/crlf.txt": b"one\r\ntwo\r\n\xff not utf-8\n",
        "docs/huge.txt": b"x" * 99 + b"\n" + b"y" * (5 * 1024 * 1024),
        "README.md": "# click\n",
    }
    register_local_repo(runtime, make_repo(tmp_path / "click", files), "pallets/click")
    register_local_repo(runtime, make_repo(tmp_path / "secret", {"s.py": "S = 1\n"}), "acme/secret", private=True)
    owner = auth_headers(make_token(runtime, make_user(runtime, "root", site_admin=True)))
    other = auth_headers(make_token(runtime, make_user(runtime, "bob")))
    return {"owner": owner, "other": other}


def test_a_big_file_is_shown_whole_with_the_asked_line_highlighted(
    client: TestClient, runtime: Runtime, world: dict[str, Headers]
) -> None:
    page = client.get(f"/pallets/click/-/blob/src/click/core.py?L{NEEDLE_LINE}", headers=world["other"])
    assert page.status_code == 200
    assert page.text.count('<tr id="L') == len(CORE_LINES)  # every line, not the first 200
    assert f'<tr id="L{NEEDLE_LINE}" class="hit">' in page.text
    assert NEEDLE in page.text
    assert "startLine" not in page.text  # no notice written for agents
    assert 'class="lines-pager"' not in page.text  # under 5,000 lines: one page
    # The cut stays read_file's rule for agents: the same file through the service's default is 200 lines.
    agents = runtime.get(RepoService).read_file(INTERNAL, "pallets/click", "src/click/core.py")
    assert agents.truncated
    assert len(agents.lines) == 200


def test_a_long_file_is_paged_around_the_asked_line(client: TestClient, world: dict[str, Headers]) -> None:
    first = client.get("/pallets/click/-/blob/src/click/long.txt", headers=world["other"])
    assert first.text.count('<tr id="L') == 5000
    assert '<tr id="L1">' in first.text
    assert 'id="L5001"' not in first.text
    assert "Lines 1–5000 of 12000" in first.text
    assert 'href="/pallets/click@main/-/blob/src/click/long.txt?from=5001"' in first.text
    assert 'href="/pallets/click@main/-/blob/src/click/long.txt?from=10001"' in first.text

    hit = client.get("/pallets/click/-/blob/src/click/long.txt?L7000-7002", headers=world["other"])
    rows = re.findall(r'<tr id="L(\d+)"', hit.text)
    assert (rows[0], rows[-1]) == ("5001", "10000")
    assert '<tr id="L7001" class="hit">' in hit.text
    assert "line 7001" in hit.text

    last = client.get("/pallets/click/-/blob/src/click/long.txt?from=10001", headers=world["other"])
    rows = re.findall(r'<tr id="L(\d+)"', last.text)
    assert (rows[0], rows[-1]) == ("10001", "12000")
    assert 'class="hit"' not in last.text
    # A line past the end lands on the last page rather than failing.
    assert 'id="L12000"' in client.get("/pallets/click/-/blob/src/click/long.txt?L99999", headers=world["other"]).text


def test_a_file_too_big_to_show_says_its_size_and_the_raw_view_serves_it_whole(
    client: TestClient, world: dict[str, Headers]
) -> None:
    page = client.get("/pallets/click/-/blob/docs/huge.txt", headers=world["other"])
    assert page.status_code == 200
    assert "too big to show here (5.0 MB, 2 lines" in page.text
    assert '<tr id="L' not in page.text
    raw_link = re.search(r'<a href="([^"]+/-/raw/docs/huge.txt)">Open the raw file \((\d+) bytes\)</a>', page.text)
    assert raw_link is not None
    assert int(raw_link.group(2)) == 100 + 5 * 1024 * 1024
    raw = client.get(raw_link.group(1), headers=world["other"])
    assert raw.status_code == 200
    assert len(raw.content) == 100 + 5 * 1024 * 1024
    # The raw view is the blob's bytes: every line of a big file, CRLF and bytes that are not UTF-8 untouched.
    core = client.get("/pallets/click/-/raw/src/click/core.py", headers=world["other"])
    assert core.text == CORE
    crlf = client.get("/pallets/click/-/raw/src/click/crlf.txt", headers=world["other"])
    assert crlf.content == b"one\r\ntwo\r\n\xff not utf-8\n"
    assert crlf.headers["content-type"] == "text/plain; charset=utf-8"
    assert crlf.headers["x-content-type-options"] == "nosniff"
    assert "sandbox" in crlf.headers["content-security-policy"]


def test_the_file_view_has_the_repository_tree_beside_it(client: TestClient, world: dict[str, Headers]) -> None:
    """The tree beside the file: the root's entries, each directory on the way to the file opened with its
    entries, the file marked as the current page; other directories are links to their tree page."""
    page = client.get("/pallets/click/-/blob/src/click/core.py?L5", headers=world["other"])
    tree = re.search(r'<nav class="file-tree" aria-label="Files of pallets/click">(.*?)</nav>', page.text, re.S)
    assert tree is not None, page.text[:3000]
    links = re.findall(r'<a href="([^"]+)"[^>]*>([^<]+)</a>', tree.group(1))
    assert links == [
        ("/pallets/click@main/-/tree/docs", "docs/"),
        ("/pallets/click@main/-/tree/src", "src/"),
        ("/pallets/click@main/-/tree/src/click", "click/"),
        ("/pallets/click@main/-/blob/src/click/core.py", "core.py"),
        ("/pallets/click@main/-/blob/src/click/crlf.txt", "crlf.txt"),
        ("/pallets/click@main/-/blob/src/click/long.txt", "long.txt"),
        ("/pallets/click@main/-/blob/README.md", "README.md"),
    ]
    assert '<a href="/pallets/click@main/-/blob/src/click/core.py" aria-current="page">core.py</a>' in tree.group(1)
    assert "huge.txt" not in tree.group(1)  # docs/ stays closed


def test_blame_is_paged_like_the_file_view_and_a_file_too_big_offers_the_raw_file(
    client: TestClient, tmp_path: Path, runtime: Runtime, world: dict[str, Headers]
) -> None:
    """Blame of a 12,000-line file: the 5,000-line page holding the asked line, highlighted, each line with the
    commit that last changed it (libgit2 blames that page alone); a file over 5 MB says its size and links to the
    raw file instead of an error page."""
    source = make_repo(tmp_path / "blamed", {"long.txt": LONG})
    second = commit(source, {"long.txt": LONG.replace("line 7001\n", "line 7001 changed\n")}, message="change 7001")
    register_local_repo(runtime, source, "acme/blamed")
    viewer = world["owner"]

    first = client.get("/acme/blamed/-/blame/long.txt", headers=viewer)
    assert first.status_code == 200
    rows = re.findall(r'<tr id="L(\d+)"', first.text)
    assert (rows[0], rows[-1], len(rows)) == ("1", "5000", 5000)
    assert "Lines 1–5000 of 12000" in first.text
    assert 'href="/acme/blamed@main/-/blame/long.txt?from=5001"' in first.text

    hit = client.get("/acme/blamed/-/blame/long.txt?L7001", headers=viewer)
    rows = re.findall(r'<tr id="L(\d+)"', hit.text)
    assert (rows[0], rows[-1]) == ("5001", "10000")
    assert "Lines 5001–10000 of 12000" in hit.text
    changed = re.search(r'<tr id="L7001" class="hit"><td class="who">(.*?)</td>.*?</tr>', hit.text)
    assert changed is not None, hit.text[:2000]
    assert second[:8] in changed.group(1)  # the second commit, found by blaming this page's lines only
    after = re.search(r'<tr id="L7002"><td class="who">(.*?)</td>', hit.text)
    assert after is not None
    assert second[:8] not in after.group(1)  # the next line is the first commit's again
    assert after.group(1)  # a new run of lines names its commit
    # A line past the end: the last page, as the file view.
    last = client.get("/acme/blamed/-/blame/long.txt?from=99999", headers=viewer)
    assert re.findall(r'<tr id="L(\d+)"', last.text)[-1] == "12000"

    huge = client.get("/pallets/click/-/blame/docs/huge.txt", headers=viewer)
    assert huge.status_code == 200
    assert "too big to show here (5.0 MB, 2 lines" in huge.text
    assert '<a href="/pallets/click@' in huge.text
    assert re.search(r'<a href="/pallets/click@[0-9a-f]{40}/-/raw/docs/huge.txt">Open the raw file</a>', huge.text)


def test_the_path_list_of_the_file_finder(client: TestClient, runtime: Runtime, world: dict[str, Headers]) -> None:
    sha = runtime.get(RepoService).resolve(INTERNAL, "pallets/click").commit
    listed = client.get(f"/pallets/click@{sha}/-/files", headers=world["other"])
    assert listed.status_code == 200
    assert listed.text.splitlines() == [
        "README.md",
        "docs/huge.txt",
        "src/click/core.py",
        "src/click/crlf.txt",
        "src/click/long.txt",
    ]
    assert "immutable" in listed.headers["cache-control"]  # pinned to a commit
    assert "immutable" not in client.get("/pallets/click/-/files", headers=world["other"]).headers["cache-control"]
    # Unreadable answers 404 exactly like missing.
    assert client.get("/acme/secret/-/files", headers=world["other"]).status_code == 404
    assert client.get("/acme/missing/-/files", headers=world["other"]).status_code == 404
    assert client.get("/acme/secret/-/files", headers=world["owner"]).text == "s.py\n"


def test_hover_and_panel_fragments(client: TestClient, runtime: Runtime, world: dict[str, Headers]) -> None:
    _index(runtime, "pallets/click")
    sha = runtime.get(RepoService).resolve(INTERNAL, "pallets/click").commit
    page = client.get("/pallets/click/-/blob/src/click/core.py", headers=world["other"]).text
    use = re.search(rf'<tr id="L{USED_AT}">.*?<a class="n\w* ident" href="([^"]+)" title="Go to definition">', page)
    assert use is not None
    href = use.group(1).replace("&amp;", "&")
    hover = client.get(f"{href}&view=hover", headers=world["other"])
    assert hover.status_code == 200
    assert "<html" not in hover.text  # a fragment, not a page
    assert "def helper_700(value):" in hover.text
    assert "Helper number 700" in hover.text  # the docs under the definition line
    assert f"src/click/core.py:{DEFINED_AT}" in hover.text
    panel = client.get(
        f"/pallets/click@{sha}/-/references?path=src/click/core.py&line={DEFINED_AT}&symbol=helper_700&view=panel",
        headers=world["other"],
    )
    assert panel.status_code == 200
    assert "<html" not in panel.text
    assert "References of <code>helper_700</code>" in panel.text
    assert f"?L{USED_AT}#L{USED_AT}" in panel.text
    assert "return helper_700(1)" in panel.text


def test_a_big_file_view_stays_fast(client: TestClient, world: dict[str, Headers]) -> None:
    timings = []
    for _ in range(5):
        started = time.perf_counter()
        page = client.get(f"/pallets/click/-/blob/src/click/core.py?L{NEEDLE_LINE}", headers=world["other"])
        timings.append(time.perf_counter() - started)
        assert page.status_code == 200
    print(f"{len(CORE_LINES)}-line, {len(CORE) // 1024} KB file view, s:", [round(t, 3) for t in timings])
    print("page bytes:", len(page.content))
    assert sorted(timings)[2] < 0.5, timings


# -- browser journeys ---------------------------------------------------------------------------------------------
@pytest.fixture
def browser_page(runtime: Runtime, tmp_path: Path) -> Iterator[tuple[str, Page, list[str]]]:
    """The app over real HTTP with pallets/click indexed, and a chromium tab signed in as a user who can read it."""
    make_user(runtime, "carol", password=PASSWORD)
    register_local_repo(
        runtime,
        make_repo(
            tmp_path / "click", {"src/click/core.py": CORE, "src/click/small.py": SMALL, "README.md": "# click\n"}
        ),
        "pallets/click",
    )
    with serve_app(runtime) as site, sync_playwright() as playwright:
        _index(runtime, "pallets/click")  # once the app (whose setup wires codenav to search's indexing) exists
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            tab = browser.new_page(viewport={"width": 1280, "height": 800})
            console = watch_console(tab)
            sign_in(tab, site, "carol", PASSWORD)
            yield site, tab, console
        finally:
            browser.close()


def _in_view(tab: Page, selector: str) -> bool:
    return bool(
        tab.evaluate(
            "s => { const r = document.querySelector(s).getBoundingClientRect();"
            " return r.top >= -1 && r.bottom <= window.innerHeight + 1; }",  # sub-pixel row positions
            selector,
        )
    )


def _shot(tab: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / f"web-{name}.png"))


@pytest.mark.browser
def test_open_line_2048_of_a_big_file_from_a_search_hit(browser_page: tuple[str, Page, list[str]]) -> None:
    site, tab, console = browser_page
    tab.goto(f"{site}/search?q={NEEDLE}")
    with tab.expect_navigation():
        tab.locator(f'main a[href*="core.py?L{NEEDLE_LINE}"]').first.click()
    row = f"tr#L{NEEDLE_LINE}"
    expect(tab.locator(row)).to_have_class("hit")
    assert NEEDLE in tab.locator(row).inner_text()
    assert _in_view(tab, row)
    _shot(tab, "big-file-line-2048")
    # A fragment-only anchor far down the file scrolls there too (the whole file is on the page).
    tab.goto(f"{site}/pallets/click/-/blob/src/click/core.py#L3100")
    assert _in_view(tab, "tr#L3100")
    assert not [m for m in console if "Content Security Policy" in m]


@pytest.mark.browser
def test_go_to_a_definition_past_line_200_hover_and_references_panel(
    browser_page: tuple[str, Page, list[str]],
) -> None:
    site, tab, console = browser_page
    tab.goto(f"{site}/pallets/click/-/blob/src/click/core.py#L{USED_AT}")
    use = tab.locator(f'tr#L{USED_AT} a.ident[title="Go to definition"]', has_text="helper_700")

    # Hover: the definition line and its docs, without leaving the page.
    started = time.perf_counter()
    use.hover()
    card = tab.locator("#hover-card")
    expect(card).to_be_visible(timeout=20_000)  # the first definition lookup of a cold index, on a shared machine
    print(f"hover card shown after {time.perf_counter() - started:.2f} s")
    expect(card).to_contain_text("def helper_700(value):")
    expect(card).to_contain_text("Helper number 700")
    assert use.get_attribute("aria-describedby") == "hover-card"
    _shot(tab, "hover")

    # Go to definition: a line past 200 of the same big file, highlighted and in view.
    with tab.expect_navigation():
        use.click()
    assert f"core.py?L{DEFINED_AT}-" in tab.url
    expect(tab.locator(f"tr#L{DEFINED_AT}")).to_have_class("hit")
    assert _in_view(tab, f"tr#L{DEFINED_AT}")

    # References open beside the file, in the tree's place (the code keeps its width); the page does not move.
    url = tab.url
    tree = tab.locator("nav.file-tree")
    expect(tree).to_be_visible()
    expect(tree.locator('a[aria-current="page"]')).to_have_text("core.py")
    tab.locator(f'tr#L{DEFINED_AT} a.ident[title="Find references"]', has_text="helper_700").click()
    panel = tab.locator("#refs-panel")
    expect(panel).to_be_visible()
    expect(tree).to_be_hidden()
    expect(panel).to_contain_text("References of helper_700")
    expect(panel).to_contain_text("return helper_700(1)")
    assert tab.url == url
    _shot(tab, "references-panel")
    with tab.expect_navigation():
        panel.locator(f'a[href$="?L{USED_AT}#L{USED_AT}"]').first.click()
    expect(tab.locator(f"tr#L{USED_AT}")).to_be_attached()
    assert _in_view(tab, f"tr#L{USED_AT}")
    assert not [m for m in console if "Content Security Policy" in m]


@pytest.mark.browser
def test_t_opens_a_fuzzy_file_finder(browser_page: tuple[str, Page, list[str]]) -> None:
    site, tab, _console = browser_page
    tab.goto(f"{site}/pallets/click")
    tab.keyboard.press("t")
    dialog = tab.locator("dialog#finder")
    expect(dialog).to_be_visible()
    assert tab.evaluate("document.activeElement.id") == "finder-q"
    tab.keyboard.type("scco")  # s(rc) c(lick) co(re): letters in order, not adjacent
    options = tab.locator("#finder-list li")
    expect(options.first).to_have_text("src/click/core.py")
    expect(options).to_have_count(1)  # small.py has no "o"
    _shot(tab, "file-finder")
    with tab.expect_navigation():
        tab.keyboard.press("Enter")
    assert tab.url.endswith("/-/blob/src/click/core.py")
    # From a file view too, and Escape closes it.
    tab.keyboard.press("t")
    expect(dialog).to_be_visible()
    tab.keyboard.type("readme")
    expect(tab.locator("#finder-list li").first).to_have_text("README.md")
    tab.keyboard.press("Escape")
    expect(dialog).to_be_hidden()


@pytest.mark.browser
def test_the_file_view_with_its_finder_and_panel_has_no_serious_accessibility_violations(
    browser_page: tuple[str, Page, list[str]],
) -> None:
    site, tab, _console = browser_page
    axe = axe_source()
    found: dict[str, list[str]] = {}
    for scheme in ("light", "dark"):
        tab.emulate_media(color_scheme=scheme)
        tab.goto(f"{site}/pallets/click/-/blob/src/click/small.py?L1")
        for state in ("file", "references panel", "hover", "finder"):
            if state == "references panel":
                tab.locator('tr#L1 a.ident[title="Find references"]', has_text="greet").click()
                expect(tab.locator("#refs-panel")).to_contain_text("References of greet", timeout=20_000)
            elif state == "hover":
                tab.locator('tr#L7 a.ident[title="Go to definition"]', has_text="greet").hover()
                expect(tab.locator("#hover-card")).to_be_visible(timeout=20_000)
            elif state == "finder":
                tab.keyboard.press("t")
                tab.keyboard.type("small")
                expect(tab.locator("#finder-list li")).to_have_count(1)
            bad = serious_violations(tab, axe)
            if bad:
                found[f"{scheme} {state}"] = bad
    assert found == {}, json.dumps(found, indent=1)
