"""The deep search pages over real HTTP (the app served by uvicorn on loopback, browser sessions signed in with
a password, forms with their CSRF token): ask, list, the answered page whose source links open the file view
at those lines, follow-ups, cancel, sharing and its redaction, reset, delete, CSRF refusals, another user's
404, and hostile Markdown. Answers come from the real answering path (the retrieval pipeline, no model) unless
a test scripts one; the jobs run in the test thread (`run_pending`) so every state is observed."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Sequence
from html import unescape
from pathlib import Path

import pytest
import requests

from codewell.agents.answers import AgentAnswer, AgentStats, Citation
from codewell.agents.jobs import DeepSearchJobs, answer_with_agents
from codewell.agents.render import WITHHELD_NOTICE
from codewell.core.actors import INTERNAL, Actor
from codewell.core.errors import Unavailable
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from codewell.search.service import SearchService
from tests.browser import serve_app
from tests.factories import make_user, set_site_config
from tests.gitfixtures import make_repo, register_local_repo

PASSWORD = "correct horse battery staple"
APP = {
    "billing/retry.py": (
        "def retry_failed_charge(charge, attempts):\n"
        "    # charges that failed are retried with exponential backoff\n"
        "    delay = 2 ** attempts\n"
        "    return schedule_charge(charge, delay)\n"
    ),
    "billing/schedule.py": "def schedule_charge(charge, delay):\n    return (charge, delay)\n",
}
SECRET = {"vault/rotate.py": "def rotate_vault_keys(vault):\n    # rotate the vault master keys\n    return vault\n"}
QUESTION = "How does retry_failed_charge retry failed charges?"
SECRET_QUESTION = "Where does rotate_vault_keys rotate the vault master keys?"
HOSTILE_QUESTION = "Show me something hostile"
FAILING_QUESTION = "What happens when the model is down?"
HOSTILE_ANSWER = (
    "# Findings\n\n<script>alert('x')</script>\n\n<img src=x onerror=alert(1)>\n\n"
    "[click](javascript:alert(1)) [ok](https://example.com/doc) [rel](/acme/app)\n"
)
TOKEN_LINK = re.compile(r"/deepsearch/([0-9a-f-]{36})")


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match, "page has no CSRF field"
    return match.group(1)


class Site:
    def __init__(self, runtime: Runtime, tmp_path: Path, url: str) -> None:
        self.runtime = runtime
        self.url = url
        self.jobs = DeepSearchJobs(runtime, self._answer)
        runtime.provide(DeepSearchJobs, self.jobs)
        self.sessions: list[requests.Session] = []

    def _answer(
        self, runtime: Runtime, actor: Actor, question: str, history: Sequence[tuple[str, str]], deadline: float
    ) -> AgentAnswer:
        if question == HOSTILE_QUESTION:
            sha = runtime.get(RepoService).resolve(INTERNAL, "acme/app").commit
            source = Citation("acme/app", sha, "billing/schedule.py", 1, 2, "<b>note</b>")
            return AgentAnswer(HOSTILE_ANSWER, [source], AgentStats(tool_calls=3, credits=2), "retrieval", "")
        if question == FAILING_QUESTION:
            raise Unavailable("the model endpoint did not answer in time")
        return answer_with_agents(runtime, actor, question, history, deadline)

    def session(self, username: str) -> requests.Session:
        """A browser-like session of `username`, signed in with the sign-in form."""
        http = requests.Session()
        self.sessions.append(http)
        page = http.get(f"{self.url}/sign-in")
        signed = http.post(
            f"{self.url}/sign-in",
            data={"username": username, "password": PASSWORD, "csrf_token": csrf_of(page.text)},
            allow_redirects=False,
        )
        assert signed.status_code == 303, signed.text
        return http

    def get(self, http: requests.Session, path: str) -> requests.Response:
        return http.get(f"{self.url}{path}", allow_redirects=False)

    def post(
        self, http: requests.Session, path: str, data: dict[str, str], page: str | None = None
    ) -> requests.Response:
        """Submit a form the way a browser does: with the CSRF token of a page of the same session."""
        html = self.get(http, page or "/deepsearch").text
        return http.post(f"{self.url}{path}", data={**data, "csrf_token": csrf_of(html)}, allow_redirects=False)

    def ask(self, http: requests.Session, question: str) -> str:
        asked = self.post(http, "/deepsearch", {"question": question})
        assert asked.status_code == 303, asked.text
        match = TOKEN_LINK.fullmatch(asked.headers["location"])
        assert match, asked.headers["location"]
        return match.group(1)


@pytest.fixture
def site(runtime: Runtime, tmp_path: Path) -> Iterator[Site]:
    register_local_repo(runtime, make_repo(tmp_path / "app", APP), "acme/app")
    register_local_repo(runtime, make_repo(tmp_path / "secret", SECRET), "acme/secret", private=True)
    for name in ("acme/app", "acme/secret"):
        runtime.get(SearchService).index(runtime.get(RepoService).get(INTERNAL, name))
    alice = make_user(runtime, "alice", password=PASSWORD)
    make_user(runtime, "bob", password=PASSWORD)
    runtime.get(RepoService).set_user_repos(INTERNAL, alice.id, ["acme/secret"])
    with serve_app(runtime) as url:
        site = Site(runtime, tmp_path, url)
        yield site
        for http in site.sessions:
            http.close()


def _sha(runtime: Runtime, repo: str) -> str:
    return runtime.get(RepoService).resolve(INTERNAL, repo).commit


def _our_scripts(html: str) -> int:
    return html.count('<script src="/.static/') + html.count("<script nonce=")


def test_ask_lists_and_answers_with_source_links_that_open_at_their_lines(site: Site) -> None:
    alice = site.session("alice")
    index = site.get(alice, "/deepsearch")
    assert index.status_code == 200
    assert "No conversations yet." in index.text
    token = site.ask(alice, QUESTION)

    pending = site.get(alice, f"/deepsearch/{token}")
    assert pending.status_code == 200
    assert 'data-status="pending"' in pending.text
    # Live status while open: htmx polls the page; without JavaScript it refreshes itself.
    assert f'hx-get="/deepsearch/{token}"' in pending.text
    assert '<noscript><meta http-equiv="refresh"' in pending.text
    assert "Ask a follow-up" not in pending.text  # one open question per conversation
    listed = site.get(alice, "/deepsearch").text
    assert f'<a href="/deepsearch/{token}">{QUESTION}</a>' in listed
    assert '<td class="status-pending">pending</td>' in listed

    assert site.jobs.run_pending() == 1
    done = site.get(alice, f"/deepsearch/{token}")
    assert 'data-status="completed"' in done.text
    assert "http-equiv" not in done.text  # nothing left to wait for
    assert "hx-get" not in done.text
    assert "No model wrote this answer" in done.text  # the retrieval pipeline's notice
    assert re.search(r"Answered by the retrieval pipeline \(no model\) in [\d.]+ s: \d+ tool calls,", done.text)
    assert re.search(r"\d+ tokens, \d+ credits\.", done.text)
    sha = _sha(site.runtime, "acme/app")
    links = re.findall(r'<li><a href="(/acme/app@[0-9a-f]{40}/-/blob/[^"]+)">', done.text)
    assert any(unescape(link).startswith(f"/acme/app@{sha}/-/blob/billing/retry.py?L1-") for link in links)
    for link in links:
        opened = site.get(alice, unescape(link))  # the file view, pinned to the commit, at those lines
        assert opened.status_code == 200, link
        start, end = map(int, re.findall(r"\?L(\d+)-(\d+)$", unescape(link))[0])
        for line in (start, end):
            assert f'id="L{line}" class="hit"' in opened.text
    assert "Ask a follow-up" in done.text
    assert '<td class="status-completed">completed</td>' in site.get(alice, "/deepsearch").text


def test_follow_up_conflict_and_cancel(site: Site) -> None:
    alice = site.session("alice")
    token = site.ask(alice, QUESTION)
    page = f"/deepsearch/{token}"
    site.jobs.run_pending()
    asked = site.post(alice, f"{page}/questions", {"question": "And where is schedule_charge?"}, page)
    assert asked.status_code == 303
    assert asked.headers["location"] == page
    html = site.get(alice, page).text
    assert html.count('<article class="question"') == 2
    assert 'id="q2" data-status="pending"' in html
    assert "Cancel the open question" in html

    # A follow-up while one is open is refused on the page, with what to do and the question kept.
    again = site.post(alice, f"{page}/questions", {"question": "A third one?"}, "/deepsearch")
    assert again.status_code == 409
    assert "previous question is still being answered (wait for its answer (or cancel it)" in again.text
    assert 'role="alert"' in again.text

    cancelled = site.post(alice, f"{page}/cancel", {}, page)
    assert cancelled.status_code == 303
    html = site.get(alice, page).text
    assert 'id="q2" data-status="cancelled"' in html
    assert "This question was cancelled." in html
    assert site.jobs.run_pending() == 0  # cancelling ended its job: nothing answers it later
    assert 'id="q2" data-status="cancelled"' in site.get(alice, page).text


def test_failed_question_shows_its_stored_error_to_the_owner(site: Site) -> None:
    alice = site.session("alice")
    token = site.ask(alice, FAILING_QUESTION)
    site.jobs.run_pending()
    html = site.get(alice, f"/deepsearch/{token}").text
    assert 'data-status="failed"' in html
    assert "This question failed (provider): the model endpoint did not answer in time" in html


def test_shared_page_redacts_and_reset_share_ends_the_old_link(site: Site) -> None:
    set_site_config(site.runtime, {"deepSearch": {"sharing": {"enabled": True}}})
    alice, bob = site.session("alice"), site.session("bob")
    token = site.ask(alice, SECRET_QUESTION)
    page = f"/deepsearch/{token}"
    site.jobs.run_pending()
    own = site.get(alice, page).text
    assert "acme/secret – vault/rotate.py" in own  # alice may read acme/secret
    assert "Create a shared link" in own

    assert site.post(alice, f"{page}/share", {}, page).status_code == 303
    own = site.get(alice, page).text
    shared_url = re.search(r'id="share-url" readonly value="([^"]+)"', own)
    assert shared_url, "the share URL is shown"
    shared_path = "/deepsearch/shared/" + shared_url.group(1).rsplit("/", 1)[1]
    assert shared_url.group(1) == site.runtime.external_url + shared_path

    as_bob = site.get(bob, shared_path)
    assert as_bob.status_code == 200
    assert SECRET_QUESTION in as_bob.text  # questions as their owner wrote them
    assert WITHHELD_NOTICE in as_bob.text
    leaks = (
        "acme/secret",
        "vault/rotate.py",
        token,
        "Answered by",
        "Reset the link",
        "/delete",
        'action="/deepsearch/',
    )
    for leak in leaks:
        assert leak not in as_bob.text, leak
    # Bob's view is the service's redaction, not a page's choice: the same answer is whole for alice.
    assert WITHHELD_NOTICE not in site.get(alice, shared_path).text

    assert site.post(alice, f"{page}/reset-share", {}, page).status_code == 303
    assert site.get(bob, shared_path).status_code == 404
    fresh = re.search(r'id="share-url" readonly value="[^"]+/deepsearch/shared/([^"]+)"', site.get(alice, page).text)
    assert fresh
    assert fresh.group(1) not in shared_path
    assert site.get(bob, f"/deepsearch/shared/{fresh.group(1)}").status_code == 200

    set_site_config(site.runtime, {"deepSearch": {"sharing": {"enabled": False}}})
    assert site.get(bob, f"/deepsearch/shared/{fresh.group(1)}").status_code == 404
    off = site.get(alice, page).text
    assert "Create a shared link" not in off
    assert 'id="share-url"' not in off
    assert site.post(alice, f"{page}/share", {}, page).status_code == 403


def test_another_user_gets_404_exactly_like_a_missing_conversation(site: Site) -> None:
    alice, bob = site.session("alice"), site.session("bob")
    token = site.ask(alice, QUESTION)
    missing = str(uuid.uuid4())
    for suffix in ("", "/delete"):
        hidden = site.get(bob, f"/deepsearch/{token}{suffix}")
        gone = site.get(bob, f"/deepsearch/{missing}{suffix}")
        assert hidden.status_code == gone.status_code == 404
        assert hidden.text == gone.text
    assert site.get(bob, f"/deepsearch/shared/{token}").status_code == 404  # a read token is not a share token
    assert site.get(bob, "/deepsearch/not-a-token").status_code == 404
    for action in ("cancel", "delete", "share", "reset-share"):
        refused = site.post(bob, f"/deepsearch/{token}/{action}", {})
        assert refused.status_code == 404, action
    assert site.post(bob, f"/deepsearch/{token}/questions", {"question": "mine now?"}).status_code == 404
    assert token not in site.get(bob, "/deepsearch").text
    assert site.get(alice, f"/deepsearch/{token}").status_code == 200  # untouched by bob's attempts


def test_delete_asks_for_confirmation_then_deletes(site: Site) -> None:
    alice = site.session("alice")
    token = site.ask(alice, QUESTION)
    page = f"/deepsearch/{token}"
    assert f'href="{page}/delete"' in site.get(alice, page).text
    confirm = site.get(alice, f"{page}/delete")
    assert confirm.status_code == 200
    assert "Delete this conversation?" in confirm.text
    assert f'action="{page}/delete"' in confirm.text
    assert site.get(alice, page).status_code == 200  # looking at the confirmation deletes nothing
    deleted = site.post(alice, f"{page}/delete", {}, f"{page}/delete")
    assert deleted.status_code == 303
    assert deleted.headers["location"] == "/deepsearch"
    assert site.get(alice, page).status_code == 404
    assert token not in site.get(alice, "/deepsearch").text


def test_an_empty_question_is_refused_on_the_form(site: Site) -> None:
    alice = site.session("alice")
    refused = site.post(alice, "/deepsearch", {"question": "   "})
    assert refused.status_code == 400
    assert '<p class="error" role="alert">the question is empty (ask a detailed' in refused.text
    assert "No conversations yet." in refused.text


def test_forms_without_their_csrf_token_are_refused(site: Site) -> None:
    alice = site.session("alice")
    token = site.ask(alice, QUESTION)
    for path, data in (
        ("/deepsearch", {"question": "forged?"}),
        (f"/deepsearch/{token}/questions", {"question": "forged?"}),
        (f"/deepsearch/{token}/cancel", {}),
        (f"/deepsearch/{token}/delete", {}),
    ):
        for forged in ({}, {"csrf_token": "forged"}):
            refused = alice.post(f"{site.url}{path}", data={**data, **forged}, allow_redirects=False)
            assert refused.status_code == 403, path
            assert "CSRF" in refused.text
    html = site.get(alice, "/deepsearch").text
    assert "forged?" not in html
    assert html.count("<tr>") == 2  # the header and the one conversation
    assert 'data-status="pending"' in site.get(alice, f"/deepsearch/{token}").text  # not cancelled, not deleted


def test_answer_markdown_is_rendered_safely(site: Site) -> None:
    alice = site.session("alice")
    token = site.ask(alice, HOSTILE_QUESTION)
    site.jobs.run_pending()
    html = site.get(alice, f"/deepsearch/{token}").text
    assert "<h3>Findings</h3>" in html  # Markdown rendered, its headings below the page's own
    assert html.count("<script") == _our_scripts(html)  # the answer's script tag is text
    assert "&lt;script&gt;alert('x')&lt;/script&gt;" in html.replace("&#39;", "'")
    assert "<img" not in html
    assert "javascript:" not in html.replace("[click](javascript:alert(1))", "")
    assert '<a href="https://example.com/doc" rel="nofollow noopener noreferrer">ok</a>' in html
    assert '<a href="/acme/app" rel="nofollow noopener noreferrer">rel</a>' in html
    assert "&lt;b&gt;note&lt;/b&gt;" in html  # a source's note is escaped too
    assert re.search(r"3 tool calls, 0 tokens, \d+ credits\.", html)


def test_anonymous_visitors_are_sent_to_sign_in_and_come_back(site: Site) -> None:
    anonymous = requests.Session()
    site.sessions.append(anonymous)
    token = str(uuid.uuid4())
    for path in ("/deepsearch", f"/deepsearch/{token}", f"/deepsearch/shared/{token}"):
        response = site.get(anonymous, path)
        assert response.status_code in (302, 303)  # the auth middleware's redirect, before routing
        assert response.headers["location"].startswith("/sign-in?returnTo=")
    page = site.get(anonymous, "/sign-in").text
    refused = anonymous.post(
        f"{site.url}/deepsearch", data={"question": "x", "csrf_token": csrf_of(page)}, allow_redirects=False
    )
    assert refused.status_code == 401
