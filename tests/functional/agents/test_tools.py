"""The agents' MCP tools over real HTTP (uvicorn on loopback), called the way the reference system's client
calls them (one POST per JSON-RPC call, no session): endpoint membership and the nls_search fallback,
deepsearch waiting vs returning its Link, deepsearch_read, not-found sameness, and 100 concurrent deep
searches that neither block other MCP calls nor lose a conversation."""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx2
import pytest
from sqlalchemy import func, select

from codewell.agents.jobs import KIND, SWEEP
from codewell.agents.models import ConversationRow, QuestionRow
from codewell.core.actors import INTERNAL
from codewell.jobs.runner import JobRunner
from codewell.repos.service import RepoService
from codewell.search.service import SearchService
from tests.functional.mcp.served import Served
from tests.gitfixtures import make_repo, register_local_repo

pytestmark = pytest.mark.database

HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
APP = {
    "billing/retry.py": (
        "def retry_failed_charge(charge, attempts):\n"
        "    # charges that failed are retried with exponential backoff\n"
        "    return schedule_charge(charge, 2 ** attempts)\n"
    ),
    "billing/schedule.py": "def schedule_charge(charge, delay):\n    return (charge, delay)\n",
}
QUESTION = "How does retry_failed_charge retry failed charges?"
# Who answers deep search questions: the jobs layer's runner, for these kinds.
ANSWERING = frozenset({KIND, SWEEP})
LINK = re.compile(r"^Link: (http://127\.0\.0\.1:\d+/deepsearch/([0-9a-f-]{36}))\n")


def rpc(served: Served, token: str, path: str, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
    response = httpx2.post(
        served.url(path), content=json.dumps(body).encode(), headers={**HEADERS, "authorization": f"token {token}"},
        timeout=60,
    )  # fmt: skip
    assert response.status_code == 200, response.text
    for line in response.text.splitlines():
        if line.startswith("data:"):
            return dict(json.loads(line[5:]))
    return dict(response.json())


def call(
    served: Served, token: str, name: str, arguments: dict[str, Any], path: str = "/.api/mcp/all"
) -> tuple[bool, str]:
    """(is error, text) of one tools/call."""
    result = rpc(served, token, path, "tools/call", {"name": name, "arguments": arguments})["result"]
    text = result["content"][0]["text"]
    return bool(result.get("isError")), (text if result.get("isError") else json.loads(text)["text"])


def names(served: Served, token: str, path: str) -> set[str]:
    return {t["name"] for t in rpc(served, token, path, "tools/list")["result"]["tools"]}


@pytest.fixture
def app_repo(served: Served, tmp_path: Path) -> None:
    register_local_repo(served.runtime, make_repo(tmp_path / "app", APP), "acme/app")
    served.runtime.get(SearchService).index(served.runtime.get(RepoService).get(INTERNAL, "acme/app"))


@pytest.fixture
def token(served: Served) -> str:
    return served.token(served.user("alice"))


def test_endpoint_membership_and_the_nls_search_fallback(served: Served, token: str) -> None:
    core, every, deep = (names(served, token, p) for p in ("/.api/mcp", "/.api/mcp/all", "/.api/mcp/deepsearch"))
    assert {"code_finder", "deepsearch_read"} <= core
    assert "deepsearch" not in core  # the core endpoint reads conversations but cannot start them
    assert "nls_search" not in core  # code_finder is available, so no fallback
    assert {"code_finder", "deepsearch", "deepsearch_read", "nls_search"} <= every
    assert deep == {"deepsearch", "deepsearch_read"}

    served.configure(**{"mcp.tools.disabled": ["code_finder"]})
    core = names(served, token, "/.api/mcp")
    assert "nls_search" in core
    assert "code_finder" not in core
    assert "code_finder" not in names(served, token, "/.api/mcp/all")
    refused = rpc(served, token, "/.api/mcp", "tools/call", {"name": "deepsearch", "arguments": {"question": "x"}})
    assert "Unknown tool: deepsearch" in refused["error"]["message"]  # not a tool of the core endpoint
    served.configure(**{"mcp.tools.disabled": []})


def test_deepsearch_waits_for_a_quick_answer(served: Served, token: str, app_repo: None, workers: None) -> None:
    served.configure(deepSearch={"mcpWaitSeconds": 30})
    started = time.monotonic()
    is_error, text = call(served, token, "deepsearch", {"question": QUESTION}, path="/.api/mcp/deepsearch")
    assert not is_error, text
    assert time.monotonic() - started < 20
    link = rf"Link: {re.escape(served.base_url)}/deepsearch/[0-9a-f-]{{36}}\n\n"
    assert re.match(link + rf"# {re.escape(QUESTION)}\n\n", text)
    assert text.count(QUESTION) == 1
    assert f"\n# {QUESTION}\n\n" in text
    assert "## Sources\n\n- [acme/app – billing/retry.py:1-" in text
    assert f"{served.base_url}/acme/app@" in text


def test_deepsearch_returns_its_link_and_deepsearch_read_polls(
    served: Served, token: str, app_repo: None, stops: list[Callable[[], None]]
) -> None:
    served.configure(deepSearch={"mcpWaitSeconds": 0})
    runner = JobRunner(served.runtime, role="test", kinds=ANSWERING, concurrency=1)  # starts late: "pending" shows
    is_error, text = call(served, token, "deepsearch", {"question": QUESTION})
    assert not is_error, text
    match = LINK.match(text)
    assert match is not None, text
    url, read_token = match.groups()
    assert f'Call deepsearch_read with identifier "{url}"' in text

    is_error, pending = call(served, token, "deepsearch_read", {"identifier": url}, path="/.api/mcp")
    assert not is_error
    assert "\nstatus: pending\n" in pending
    assert f"# {QUESTION}\n\n_Status: pending: the answer is not ready yet; call deepsearch_read" in pending

    runner.start()
    stops.append(runner.stop)
    deadline = time.monotonic() + 30
    while True:
        is_error, text = call(served, token, "deepsearch_read", {"identifier": read_token}, path="/.api/mcp/deepsearch")
        if "\nstatus: completed\n" in text or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert "\nstatus: completed\n" in text
    assert "## Sources" in text

    bob = served.token(served.user("bob"))
    hidden = call(served, bob, "deepsearch_read", {"identifier": url})
    missing = call(served, bob, "deepsearch_read", {"identifier": str(uuid.uuid4())})
    assert hidden == missing
    assert hidden[0] is True
    assert "not found" in hidden[1]
    assert call(served, token, "deepsearch_read", {"identifier": "nonsense"})[0] is True


def test_hundred_concurrent_deepsearch_calls_block_nothing_and_lose_nothing(
    served: Served, token: str, app_repo: None, workers: None
) -> None:
    # Up to 8 calls wait (20 s at most) for their answers, the others return their Link at once. Had the
    # waiting calls taken the server's worker threads, a call made meanwhile would wait for them (20 s); it
    # only queues behind the 100 calls themselves (a few seconds on a loaded 2-core machine).
    served.configure(deepSearch={"mcpWaitSeconds": 20, "maxWaitingCalls": 8})
    results: list[tuple[bool, str]] = []
    lock = threading.Lock()

    def ask(n: int) -> None:
        outcome = call(served, token, "deepsearch", {"question": f"{QUESTION} (#{n})"})
        with lock:
            results.append(outcome)

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=100) as pool:
        futures = [pool.submit(ask, n) for n in range(100)]
        time.sleep(0.5)  # the calls are in flight (and up to 8 of them are waiting for their answers)
        probe_started = time.monotonic()
        is_error, listed = call(served, token, "list_repos", {"query": "acme"}, path="/.api/mcp")
        probe = time.monotonic() - probe_started
        for future in futures:
            future.result()
    calls = time.monotonic() - started
    assert not is_error
    assert "acme/app" in listed
    assert probe < 8.0, f"an MCP call took {probe:.2f} s during 100 deep searches"
    assert all(not e for e, _ in results), [t for e, t in results if e][:3]
    deadline = time.monotonic() + 120
    with served.runtime.db.session() as session:
        assert session.scalar(select(func.count()).select_from(ConversationRow)) == 100
    while time.monotonic() < deadline:
        with served.runtime.db.session() as session:
            statuses = dict(
                session.execute(select(QuestionRow.status, func.count()).group_by(QuestionRow.status)).all()
            )
        if statuses.get("completed") == 100:
            break
        time.sleep(0.2)
    answered = time.monotonic() - started
    print(
        f"100 deepsearch calls returned in {calls:.2f} s, all answered in {answered:.2f} s; probe {probe * 1000:.0f} ms"
    )
    assert statuses == {"completed": 100}
    assert len(results) == 100
    with served.runtime.db.session() as session:
        titles = set(session.scalars(select(ConversationRow.title)))
    assert titles == {f"{QUESTION} (#{n})" for n in range(100)}  # every call has its own conversation


@pytest.fixture
def stops() -> Iterator[list[Callable[[], None]]]:
    found: list[Callable[[], None]] = []
    yield found
    for stop in found:
        stop()


@pytest.fixture
def workers(served: Served, stops: list[Callable[[], None]]) -> None:
    """The server's job runner for deep search (`codewell serve` runs every kind; the test app runs none)."""
    runner = JobRunner(served.runtime, role="test", kinds=ANSWERING, concurrency=4)
    runner.start()
    stops.append(runner.stop)
