"""The deterministic retrieval pipeline on small realistic repositories: the right file and lines for identifier
and natural-language questions, pinned citations that exist, the actor's permissions, no model claimed."""

from __future__ import annotations

from pathlib import Path

import pytest

from codewell.agents.retrieval import NOTICE, extract_terms, retrieve
from codewell.capabilities import wire
from codewell.core.actors import INTERNAL, Actor
from codewell.core.errors import InvalidInput
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from codewell.search.service import SearchService
from tests.factories import actor_of_user, make_user
from tests.gitfixtures import make_repo, register_local_repo

FILLER = "".join(f"\n\ndef helper_{i}(value):\n    return value * {i}\n" for i in range(30))
BILLING = {
    "billing/__init__.py": '"""Billing: invoices, charges and webhooks."""\n',
    "billing/retry.py": (
        "import time\n"
        "\n"
        "\n"
        "def retry_with_backoff(func, attempts=5, base_delay=0.5):\n"
        "    # Call func until it succeeds, sleeping exponentially longer between attempts.\n"
        "    for attempt in range(attempts):\n"
        "        try:\n"
        "            return func()\n"
        "        except ConnectionError:\n"
        "            time.sleep(base_delay * 2**attempt)\n"
        "    raise RuntimeError('gave up')\n" + FILLER
    ),
    "billing/webhooks.py": (
        "import hashlib\n"
        "import hmac\n"
        "\n"
        "\n"
        "def verify_signature(payload: bytes, header: str, secret: bytes) -> bool:\n"
        "    # Webhook signatures: HMAC-SHA256 of the payload, compared in constant time.\n"
        "    expected = hmac.new(secret, payload, hashlib.sha256).hexdigest()\n"
        "    return hmac.compare_digest(expected, header)\n"
        "\n"
        "\n"
        "def parse_event(payload: bytes) -> dict:\n"
        "    return {'raw': payload}\n"
    ),
    "billing/invoices.py": (
        "class InvoiceRenderer:\n"
        "    def __init__(self, template):\n"
        "        self.template = template\n"
        "\n"
        "    def render_pdf(self, invoice):\n"
        "        # Lay out the invoice lines and totals as a PDF document.\n"
        "        return self.template.format(invoice)\n"
        "\n"
        "\n"
        "def compute_tax(amount, rate):\n"
        "    return round(amount * rate, 2)\n"
    ),
    "tests/test_retry.py": (
        "from billing.retry import retry_with_backoff\n"
        "\n"
        "\n"
        "def test_retry_with_backoff_retries():\n"
        "    assert retry_with_backoff(lambda: 1) == 1\n"
    ),
    "README.md": "# billing\n\nCharges customers and renders invoices.\n",
}
SECRET = {
    "vault/webhooks.py": "def verify_signature(payload, header, secret):\n    return True  # the vault's own check\n",
}


@pytest.fixture
def repos(runtime: Runtime, tmp_path: Path) -> RepoService:
    wire(runtime)
    register_local_repo(runtime, make_repo(tmp_path / "billing", BILLING), "acme/billing")
    register_local_repo(runtime, make_repo(tmp_path / "vault", SECRET), "acme/vault", private=True)
    service = runtime.get(RepoService)
    for name in ("acme/billing", "acme/vault"):
        runtime.get(SearchService).index(service.get(INTERNAL, name))  # shard, then codenav and nls
    return service


@pytest.fixture
def alice(runtime: Runtime) -> Actor:
    return actor_of_user(runtime, make_user(runtime, "alice"))


def test_terms_keep_identifiers_quoted_strings_and_content_words() -> None:
    terms = extract_terms(
        'Where is `retry_with_backoff` used, how does HttpClient.send handle "connection reset" in acme/billing?',
        ignore=frozenset({"acme", "billing"}),
    )
    assert terms.identifiers == ("retry_with_backoff", "HttpClient.send")
    assert terms.quoted == ("connection reset",)
    assert "handle" not in terms.keywords  # a word of every "where is X handled" request
    assert "acme" not in terms.keywords
    assert "billing" not in terms.keywords
    assert {"retri", "backoff", "http", "client", "send", "connect", "reset"} <= terms.stems
    assert extract_terms("where is the kB and MB formatting").identifiers == ()  # units are not identifiers
    assert "filesize" in extract_terms("format file sizes").compounds


def test_identifier_question_cites_the_definition(runtime: Runtime, repos: RepoService, alice: Actor) -> None:
    scope = repos.resolve(alice, "acme/billing")
    answer = retrieve(runtime, alice, "where is retry_with_backoff defined?", scope=scope)
    assert answer.author == "retrieval"
    assert answer.notice == NOTICE
    assert "No model wrote this answer" in answer.notice
    first = answer.sources[0]
    assert (first.repo, first.commit, first.path) == ("acme/billing", scope.commit, "billing/retry.py")
    # The definition's span: from its `def` line to its last line, not the filler after it.
    assert (first.start_line, first.end_line) == (4, 11)
    assert "retry_with_backoff" in first.note
    # The test that calls it is not ahead of the code.
    paths = [c.path for c in answer.sources]
    assert "tests/test_retry.py" not in paths[:1]
    assert (
        "1. `billing/retry.py` (L4-11) – `function retry_with_backoff`\n   Why: defines `retry_with_backoff`"
        in answer.text
    )
    # The answer quotes the lines, pinned, not only the names.
    assert f"   `acme/billing@{scope.commit}:billing/retry.py#L4-11`\n   ```\n" in answer.text
    assert "   4: def retry_with_backoff(func, attempts=5, base_delay=0.5):\n" in answer.text
    assert answer.stats.tool_calls > 0
    assert answer.stats.model is None


def test_natural_language_question_finds_the_code(runtime: Runtime, repos: RepoService, alice: Actor) -> None:
    scope = repos.resolve(alice, "acme/billing")
    answer = retrieve(runtime, alice, "How are webhook signatures checked?", scope=scope)
    first = answer.sources[0]
    assert first.path == "billing/webhooks.py"
    assert first.start_line <= 5 <= first.end_line  # the verify_signature definition
    # A quoted error message, literally (query syntax inside the quotes is text, not a filter).
    answer = retrieve(runtime, alice, 'where is the error "gave up" raised', scope=scope)
    assert answer.sources[0].path == "billing/retry.py"
    retrieve(runtime, alice, 'where is "repo:x count:0 (gave" OR AND', scope=scope)
    answer = retrieve(runtime, alice, "where is the invoice PDF rendered", scope=scope)
    assert answer.sources[0].path == "billing/invoices.py"
    assert answer.sources[0].start_line <= 5 <= answer.sources[0].end_line  # render_pdf


def test_every_citation_exists_and_is_readable(runtime: Runtime, repos: RepoService, alice: Actor) -> None:
    # No scope (deep search without a model): across what alice may read, never the private repository.
    answer = retrieve(runtime, alice, "where is verify_signature implemented", scope=None)
    assert answer.sources
    assert {c.repo for c in answer.sources} == {"acme/billing"}
    assert "vault" not in answer.text
    for c in answer.sources:
        content = repos.read_file(alice, c.repo, c.path, c.start_line, c.end_line, c.commit)
        assert (content.commit, content.start_line, content.end_line) == (c.commit, c.start_line, c.end_line)
        assert len(c.commit) == 40
    # The site admin's view includes the private repository's definition too.
    admin = actor_of_user(runtime, make_user(runtime, "root", site_admin=True))
    seen = retrieve(runtime, admin, "where is verify_signature implemented", scope=None)
    assert {"acme/billing", "acme/vault"} <= {c.repo for c in seen.sources}
    assert "acme/vault – `vault/webhooks.py`" in seen.text


def test_nothing_to_search_for_and_nothing_found(runtime: Runtime, repos: RepoService, alice: Actor) -> None:
    scope = repos.resolve(alice, "acme/billing")
    with pytest.raises(InvalidInput, match="no identifier, quoted string or content word"):
        retrieve(runtime, alice, "where is it?", scope=scope)
    answer = retrieve(runtime, alice, "where is zyxwvut_quux frobnicated", scope=scope)
    assert answer.sources == []
    assert answer.text.startswith("Nothing in acme/billing@")
    assert answer.notice == NOTICE
