"""The deep search sharing journey in a real browser (Debian's chromium through Playwright, the whole app over
real HTTP on loopback with externalURL at that address): alice asks a question whose answer cites a private
repository she can read, creates a shared link, and bob opens that very link in his own browser context: he
reads the question but not the answer, its sources, snippets or the private repository's name, and the source
links themselves are 404 for him. Screenshots go to tests/.artifacts/ (git-ignored)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, ConsoleMessage, Page

from codewell.agents.jobs import DeepSearchJobs
from codewell.agents.render import WITHHELD_NOTICE
from codewell.core.actors import INTERNAL
from codewell.repos.service import RepoService
from codewell.search.service import SearchService
from tests.browser import ARTIFACTS, chromium, sign_in
from tests.functional.mcp.served import Served, served, tool_specs
from tests.gitfixtures import make_repo, register_local_repo

__all__ = ["served", "tool_specs"]  # the real HTTP server fixtures (externalURL = the served address)

PASSWORD = "correct horse battery staple"
PUBLIC = {"billing/retry.py": "def retry_failed_charge(charge, attempts):\n    return charge, 2 ** attempts\n"}
SECRET = {
    "vault/keys.py": (
        "def rotate_vault_keys(vault):\n    # the master keys are rotated here, every week\n    return vault.rotate()\n"
    )
}
# The question names nothing private: whatever of acme/secret reaches bob's page is a leak.
QUESTION = "Where are the master keys rotated every week?"
LEAKS = ("acme/secret", "vault", "keys.py", "rotate_vault_keys", "vault.rotate()", "every week</")


@pytest.fixture
def site(served: Served, tmp_path: Path) -> tuple[Served, DeepSearchJobs]:
    runtime = served.runtime
    register_local_repo(runtime, make_repo(tmp_path / "app", PUBLIC), "acme/app")
    register_local_repo(runtime, make_repo(tmp_path / "secret", SECRET), "acme/secret", private=True)
    for name in ("acme/app", "acme/secret"):
        runtime.get(SearchService).index(runtime.get(RepoService).get(INTERNAL, name))
    alice = served.user("alice", password=PASSWORD)
    served.user("bob", password=PASSWORD)
    runtime.get(RepoService).set_user_repos(INTERNAL, alice.id, ["acme/secret"])
    served.configure(deepSearch={"sharing": {"enabled": True}})
    jobs = DeepSearchJobs(runtime)  # answered in the test thread: every state is observed
    runtime.provide(DeepSearchJobs, jobs)
    return served, jobs


@pytest.fixture
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


def _signed_in(browser: Browser, served: Served, username: str, console: list[str]) -> tuple[BrowserContext, Page]:
    """A browser context of its own (cookies not shared with any other user's) signed in as `username`."""
    context = browser.new_context()
    tab = context.new_page()

    def collect(message: ConsoleMessage) -> None:
        console.append(message.text)

    tab.on("console", collect)
    sign_in(tab, served.base_url, username, PASSWORD)
    assert "/sign-in" not in tab.url, f"{username} could not sign in"
    return context, tab


def _shot(tab: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / f"journey-deepsearch-{name}.png"), full_page=True)


@pytest.mark.browser
def test_a_shared_deep_search_shows_bob_the_question_but_nothing_of_alices_private_source(
    site: tuple[Served, DeepSearchJobs], browser: Browser
) -> None:
    served, jobs = site
    console: list[str] = []

    # Alice asks; the answer cites the private repository she may read.
    _, alice = _signed_in(browser, served, "alice", console)
    alice.goto(served.url("/deepsearch"))
    alice.fill("#question", QUESTION)
    with alice.expect_navigation():
        alice.click("form.ask button[type=submit]")
    conversation = alice.url
    assert conversation.startswith(served.url("/deepsearch/"))
    assert jobs.run_pending() == 1
    alice.wait_for_selector("#conversation[data-status=completed]", timeout=10_000)  # htmx polls it in
    source = alice.locator("ul.sources a").first
    assert source.inner_text().startswith("acme/secret – vault/keys.py:")
    source_url = str(source.get_attribute("href"))
    assert source_url.startswith("/acme/secret@")
    _shot(alice, "alice-answered")

    # Alice shares it: the page shows the link at this instance's external URL.
    with alice.expect_navigation():
        alice.click("text=Create a shared link")
    shared = alice.input_value("#share-url")
    assert shared.startswith(f"{served.runtime.external_url}/deepsearch/shared/")
    assert shared.startswith(served.base_url)
    assert alice.locator("ul.sources a").first.inner_text().startswith("acme/secret – vault/keys.py:")
    _shot(alice, "alice-shared")

    # Bob, in his own browser context, opens exactly that link.
    _, bob = _signed_in(browser, served, "bob", console)
    opened = bob.goto(shared)
    assert opened is not None
    assert opened.status == 200
    assert bob.locator("h2.question-text").first.inner_text() == QUESTION
    assert bob.locator("article.question p.notice").first.inner_text() == WITHHELD_NOTICE
    assert bob.locator("ul.sources").count() == 0
    assert bob.locator("div.answer").count() == 0
    assert bob.locator("#share-url").count() == 0  # he cannot manage alice's sharing either
    html = bob.content()
    seen = bob.locator("body").inner_text()
    for leak in LEAKS:
        assert leak not in html, leak
        assert leak not in seen, leak
    assert conversation.rsplit("/", 1)[1] not in html  # alice's read token (it would open her conversation)
    _shot(bob, "bob-shared")

    # What the answer cited and alice's own conversation are 404 for bob, the same page as a missing one.
    token = conversation.rsplit("/", 1)[1]
    for path, missing, name in (
        (source_url, source_url.replace("/acme/secret@", "/acme/absent@"), ("acme/secret", "acme/absent")),
        (f"/deepsearch/{token}", f"/deepsearch/{uuid.uuid4()}", (token, "X")),
    ):
        refused = bob.goto(served.url(path))
        assert refused is not None
        assert refused.status == 404, path
        # Each error page names its own request (its ID): the rest must be the same to the letter.
        hidden = _without_request_id(bob.content()).replace(name[0], "X")
        absent = bob.goto(served.url(missing))
        assert absent is not None
        assert absent.status == 404, missing
        shown = _without_request_id(bob.content())
        assert hidden == shown.replace(name[1], "X").replace(missing.rsplit("/", 1)[1], "X"), path
        assert "rotate_vault_keys" not in hidden
        assert "master keys" not in hidden
    _shot(bob, "bob-refused")
    assert [m for m in console if "Content Security Policy" in m] == []


def _without_request_id(html: str) -> str:
    return re.sub(r"Request ID <code>[0-9a-f]+</code>", "Request ID <code>-</code>", html)
