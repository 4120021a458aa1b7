"""A deep search in a real browser (Debian's chromium through Playwright, the app over real HTTP): the question
asked with the form, the page following the answer's progress (pending → processing → completed) by itself,
without a reload or a navigation, under the page's CSP; and an axe-core check of the deep search pages."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from playwright.sync_api import Frame

from codewell.agents.answers import AgentAnswer
from codewell.agents.jobs import DeepSearchJobs, answer_with_agents
from codewell.core.actors import INTERNAL, Actor
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from codewell.search.service import SearchService
from tests.browser import (
    ARTIFACTS,
    axe_source,
    serve_app,
    signed_in_tab,
)
from tests.factories import make_user
from tests.gitfixtures import make_repo, register_local_repo

PASSWORD = "correct horse battery staple"
QUESTION = "How does retry_failed_charge retry failed charges?"


class Gate:
    """An answerer that holds the answer (the question stays `processing`) until the test lets it go."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(
        self, runtime: Runtime, actor: Actor, question: str, history: Sequence[tuple[str, str]], deadline: float
    ) -> AgentAnswer:
        self.started.set()
        assert self.release.wait(30), "the test never released the answer"
        return answer_with_agents(runtime, actor, question, history, deadline)


@pytest.fixture
def site(runtime: Runtime, tmp_path: Path) -> Iterator[tuple[str, DeepSearchJobs, Gate]]:
    files = {"billing/retry.py": "def retry_failed_charge(charge, attempts):\n    return charge, 2 ** attempts\n"}
    register_local_repo(runtime, make_repo(tmp_path / "app", files), "acme/app")
    runtime.get(SearchService).index(runtime.get(RepoService).get(INTERNAL, "acme/app"))
    make_user(runtime, "alice", password=PASSWORD)
    gate = Gate()
    jobs = DeepSearchJobs(runtime, gate)
    runtime.provide(DeepSearchJobs, jobs)
    with serve_app(runtime) as url:
        yield url, jobs, gate
    gate.release.set()


@pytest.mark.browser
def test_the_page_turns_into_the_answer_without_a_reload(site: tuple[str, DeepSearchJobs, Gate]) -> None:
    url, jobs, gate = site
    with signed_in_tab(url, "alice", PASSWORD) as (tab, console):
        tab.goto(f"{url}/deepsearch")
        tab.fill("#question", QUESTION)
        with tab.expect_navigation():
            tab.click("form.ask button[type=submit]")
        assert "/deepsearch/" in tab.url
        assert tab.get_attribute("#conversation", "data-status") == "pending"

        navigations: list[str] = []

        def navigated(frame: Frame) -> None:
            navigations.append(frame.url)

        tab.on("framenavigated", navigated)
        worker = threading.Thread(target=jobs.run_pending, daemon=True)
        worker.start()
        assert gate.started.wait(10)
        tab.wait_for_selector("#conversation[data-status=processing]", timeout=10_000)
        gate.release.set()
        tab.wait_for_selector("#conversation[data-status=completed]", timeout=10_000)
        worker.join(10)
        assert navigations == []  # htmx swapped the conversation in: no reload, no navigation
        source = tab.locator("ul.sources a").first
        assert source.inner_text().startswith("acme/app – billing/retry.py:")
        assert tab.locator("form.follow-up textarea").count() == 1
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=str(ARTIFACTS / "deepsearch-answered.png"), full_page=True)
        conversation = tab.url
        with tab.expect_navigation():
            source.click()
        assert "/acme/app@" in tab.url
        assert tab.locator("tr.hit").count() >= 1  # the file view at the cited lines
        assert [m for m in console if "Content Security Policy" in m] == []

        axe = axe_source()
        for page in (f"{url}/deepsearch", conversation):
            tab.goto(page)
            tab.evaluate(axe)  # through the devtools protocol: the page's CSP does not apply
            result = tab.evaluate("axe.run(document, {resultTypes: ['violations']})")
            serious = [v["id"] for v in result["violations"] if v["impact"] in ("serious", "critical")]
            assert serious == [], page
