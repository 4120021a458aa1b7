"""code_finder (agents/finder.py) at the service level: the repository named by the task, the decline rules,
unreadable = not found, revisions, metering from the credit buckets (charged after the answer, all or nothing,
also under 32 concurrent calls) and the rendered links."""

from __future__ import annotations

import subprocess
import threading
from datetime import timedelta
from pathlib import Path

import pytest

from codewell.agents.finder import find_code, named_repositories, render_finder
from codewell.analytics.credits import CreditService
from codewell.capabilities import wire
from codewell.core.actors import INTERNAL, Actor
from codewell.core.errors import CodewellError, InvalidInput, NotFound, QuotaExceeded
from codewell.db.base import utcnow
from codewell.http.urls import blob_url
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from codewell.search.service import SearchService
from tests.factories import actor_of_user, make_user
from tests.gitfixtures import make_repo, register_local_repo

pytestmark = pytest.mark.database

BILLING = {
    "billing/retry.py": (
        "import time\n"
        "\n"
        "\n"
        "def retry_failed_charge(charge, attempts=3):\n"
        "    # Retry a declined card charge with exponential backoff.\n"
        "    for attempt in range(attempts):\n"
        "        if charge.submit():\n"
        "            return True\n"
        "        time.sleep(2**attempt)\n"
        "    return False\n"
    ),
    "billing/refunds.py": (
        "def issue_refund(charge, amount):\n    # Give money back to the customer.\n    return -amount\n"
    ),
    "billing/schedule.py": "def schedule_charge(charge, delay):\n    return (charge, delay)\n",
}
WEB = {"web/app.js": "export function renderCart(items) {\n  return items.map(String);\n}\n"}
VAULT = {"vault/keys.py": "def rotate_keys():\n    return 0\n"}
TASK = "Where are failed charges retried in acme/billing?"


@pytest.fixture
def repos(runtime: Runtime, tmp_path: Path) -> RepoService:
    wire(runtime)
    source = make_repo(tmp_path / "billing", BILLING, tags=["v1"])
    git = ["git", "-C", str(source), "-c", "user.name=t", "-c", "user.email=t@t"]
    (source / "billing" / "disputes.py").write_text("def open_dispute(charge):\n    # chargeback flow\n    return 1\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "disputes"], check=True)
    register_local_repo(runtime, source, "acme/billing")
    register_local_repo(runtime, make_repo(tmp_path / "web", WEB), "acme/web")
    register_local_repo(runtime, make_repo(tmp_path / "vault", VAULT), "acme/vault", private=True)
    service = runtime.get(RepoService)
    for name in ("acme/billing", "acme/web", "acme/vault"):
        runtime.get(SearchService).index(service.get(INTERNAL, name))
    return service


@pytest.fixture
def alice(runtime: Runtime) -> Actor:
    return actor_of_user(runtime, make_user(runtime, "alice"))


def _allocate(runtime: Runtime, amount: int) -> None:
    today = utcnow().date()
    runtime.get(CreditService).allocate(INTERNAL, amount, today - timedelta(days=1), today + timedelta(days=30))


def _consumed(runtime: Runtime) -> tuple[int, dict[str, int]]:
    buckets = runtime.get(CreditService).list_buckets(INTERNAL)
    by_feature: dict[str, int] = {}
    for b in buckets:
        for feature, n in b.consumption_by_feature.items():
            by_feature[feature] = by_feature.get(feature, 0) + n
    return sum(b.consumed for b in buckets), by_feature


def test_finds_the_code_in_the_named_repository(runtime: Runtime, repos: RepoService, alice: Actor) -> None:
    answer = find_code(runtime, alice, TASK, None)
    head = repos.resolve(alice, "acme/billing").commit
    first = answer.sources[0]
    assert (first.repo, first.commit, first.path) == ("acme/billing", head, "billing/retry.py")
    assert (first.start_line, first.end_line) == (4, 10)
    assert answer.author == "retrieval"
    assert "No model wrote this answer" in answer.notice
    assert answer.stats.credits == 1
    # The short name works when only one readable repository ends that way.
    short = find_code(runtime, alice, "where is a refund issued in billing", None)
    assert short.sources[0].path == "billing/refunds.py"


def test_revision_pins_the_answer(runtime: Runtime, repos: RepoService, alice: Actor) -> None:
    tagged = repos.resolve(alice, "acme/billing", "v1").commit
    # v1 is not an indexed branch: keyword search reads it through an ad-hoc shard; the citations are pinned.
    answer = find_code(runtime, alice, TASK, "v1")
    assert answer.sources[0].path == "billing/retry.py"
    assert {c.commit for c in answer.sources} == {tagged}
    before = find_code(runtime, alice, "where is a chargeback dispute opened in acme/billing", "v1")
    assert "billing/disputes.py" not in {c.path for c in before.sources}  # added after v1
    head = find_code(runtime, alice, "where is a chargeback dispute opened in acme/billing", None)
    assert head.sources[0].path == "billing/disputes.py"
    with pytest.raises(NotFound):
        find_code(runtime, alice, TASK, "no-such-branch")


def test_declines_without_one_repository(runtime: Runtime, repos: RepoService, alice: Actor) -> None:
    with pytest.raises(InvalidInput) as broad:
        find_code(runtime, alice, "where are failed charges retried?", None)
    assert "must name it" in broad.value.message
    assert "keyword_search" in (broad.value.hint or "")
    assert "deepsearch" in (broad.value.hint or "")
    with pytest.raises(InvalidInput, match=r"a revision \(v1\) was given but the task names no repository"):
        find_code(runtime, alice, "where are failed charges retried?", "v1")
    both = "compare how acme/billing and acme/web render carts"
    with pytest.raises(InvalidInput, match="exactly one repository; it names 2: acme/billing, acme/web"):
        find_code(runtime, alice, both, "v1")
    with pytest.raises(InvalidInput, match="looks in one repository; the task names 2") as two:
        find_code(runtime, alice, both, None)
    assert "deepsearch" in (two.value.hint or "")
    for empty in ("", "   "):
        with pytest.raises(InvalidInput, match="task is empty"):
            find_code(runtime, alice, empty, None)
    # Declined calls cost nothing.
    _allocate(runtime, 5)
    with pytest.raises(InvalidInput):
        find_code(runtime, alice, "where are failed charges retried?", None)
    assert _consumed(runtime)[0] == 0


def test_unreadable_repository_reads_like_a_missing_one(runtime: Runtime, repos: RepoService, alice: Actor) -> None:
    errors: dict[str, CodewellError] = {}
    for name in ("acme/vault", "acme/nothing"):
        with pytest.raises(NotFound) as caught:
            find_code(runtime, alice, f"where are keys rotated in {name}", None)
        errors[name] = caught.value
    hidden, missing = errors["acme/vault"], errors["acme/nothing"]
    assert hidden.message.replace("vault", "X") == missing.message.replace("nothing", "X")
    assert hidden.hint == missing.hint
    assert "rotate_keys" not in hidden.message
    # The short name of a private repository is not matched either.
    with pytest.raises(InvalidInput, match="must name it"):
        find_code(runtime, alice, "where are keys rotated in vault", None)
    # Its owner's view: found.
    admin = actor_of_user(runtime, make_user(runtime, "root", site_admin=True))
    assert find_code(runtime, admin, "where are keys rotated in acme/vault", None).sources[0].path == "vault/keys.py"


def test_named_repositories_rules(repos: RepoService) -> None:
    readable = repos.readable(INTERNAL)
    names = lambda task: [r.name for r in named_repositories(task, readable)]  # noqa: E731
    assert names("retry in ACME/Billing please") == ["acme/billing"]  # case-insensitive
    assert names("see acme/billing/retry.py") == []  # a path inside, not the repository's name
    assert names("the billing and web code, mostly in web") == ["acme/web"]  # "in web" names it
    assert names("rotate keys in vault") == ["acme/vault"]  # INTERNAL reads it


def test_metering_and_exhaustion(runtime: Runtime, repos: RepoService, alice: Actor) -> None:
    # Unmetered while no credits were ever allocated.
    find_code(runtime, alice, TASK, None)
    _allocate(runtime, 2)
    find_code(runtime, alice, TASK, None)
    find_code(runtime, alice, TASK, None)
    assert _consumed(runtime) == (2, {"code_finder": 2})
    with pytest.raises(QuotaExceeded) as used_up:
        find_code(runtime, alice, TASK, None)
    assert "credits are used up" in used_up.value.message
    assert "nothing was charged" in used_up.value.message
    assert "allocate more credits" in (used_up.value.hint or "")
    assert _consumed(runtime) == (2, {"code_finder": 2})
    _allocate(runtime, 1)
    find_code(runtime, alice, TASK, None)
    assert _consumed(runtime)[0] == 3


def test_concurrent_calls_take_exactly_the_credits_left(runtime: Runtime, repos: RepoService, alice: Actor) -> None:
    _allocate(runtime, 10)
    outcomes: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(32)

    def call() -> None:
        start.wait()
        try:
            find_code(runtime, alice, TASK, None)
            result = "ok"
        except QuotaExceeded:
            result = "quota"
        except CodewellError as exc:  # pragma: no cover - reported by the assertion below
            result = f"error: {exc}"
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=call) for _ in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert sorted(outcomes) == ["ok"] * 10 + ["quota"] * 22
    assert _consumed(runtime) == (10, {"code_finder": 10})


def test_render_finder_links(runtime: Runtime, repos: RepoService, alice: Actor) -> None:
    answer = find_code(runtime, alice, TASK, None)
    text = render_finder(answer, "https://code.example.com")
    head = repos.resolve(alice, "acme/billing").commit
    summary, notice, links = text.rstrip("\n").split("\n\n", 2)[0], text.split("\n\n")[-2], text.split("\n\n")[-1]
    assert summary.startswith(f"Best matches in acme/billing@{head[:12]} for:")
    assert notice.startswith("(No model wrote this answer")
    first = links.splitlines()[1]
    url = blob_url("https://code.example.com", "acme/billing", head, "billing/retry.py", (4, 10))
    assert first == f"- {url} (function retry_failed_charge)"
    assert first.startswith(f"- https://code.example.com/acme/billing@{head}/-/blob/billing/retry.py%3FL4-10")
    assert links.splitlines()[0] == "Links:"
