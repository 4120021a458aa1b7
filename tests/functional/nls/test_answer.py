"""nls_search's answer as an agent reads it (issue #31): its size budget, the repositories a question names ranked
first, and every cut marked. Real repositories, indexed by the listeners, asked through the service and the tool."""

from __future__ import annotations

import json
import re
from pathlib import Path

from starlette.testclient import TestClient

from codewell.core.actors import INTERNAL
from codewell.nls.render import ANSWER_CHARS, LINE_CHARS, MAX_ANSWER_CHARS, render
from codewell.nls.service import NlsService
from codewell.runtime import Runtime
from tests.factories import auth_headers, make_token, make_user
from tests.functional.nls.test_nls_search import ACCEPT
from tests.gitfixtures import make_repo, register_local_repo

# 40 files, each with 3 functions that match the question (a chunk each: the files are over 80 lines), their
# lines long enough to be cut: the old answer (15 files, 3 chunks each) ran to ~20,000 characters.
PADDING = "x" * 180
FILLER = "".join(f"def unrelated_{k}(value):\n    return value * {k}\n\n" for k in range(30))
MANY = {
    f"ledger/invoice_{i:02d}.py": "".join(
        f"def invoice_total_{i}_{j}(items):  # invoice total of {PADDING}\n    return sum(items) + {j}\n\n"
        for j in range(3)
    )
    + FILLER
    for i in range(40)
}
LONG_LINE = "RATES = {" + ", ".join(f"'currency_{i:03d}': {i}.5" for i in range(30)) + "}"
SHOP = {
    # More hits for the question's words than billing's file: without the name in the question, shop ranks first.
    "shop/cart.py": (
        "def invoice_totals(cart):\n    # invoice totals: compute the invoice totals of a cart\n"
        "    invoice = sum(cart)\n    return invoice  # totals\n"
    ),
    # Files about other things, as in any repository (BM25 weighs a word by how few of the chunks hold it).
    **{f"shop/other_{k}.py": f"def unrelated_{k}(value):\n    return value * {k}\n" for k in range(4)},
}
BILLING = {
    "billing/money.py": "def settle(invoice):\n    # the totals of an invoice\n    return invoice.total\n",
    "billing/rates.py": LONG_LINE + "\n\ndef exchange_rate(currency):\n    return RATES[currency]\n",
    # One chunk of 60 lines whose only line about the question is near its end.
    "billing/report.py": "def report(rows):\n"
    + "".join(f"    step_{i} = rows[{i}] * 2  # unrelated arithmetic\n" for i in range(55))
    + "    refund_ledger_balance = rows  # the refund ledger balance\n    return step_0\n",
}


def _blocks(text: str) -> list[str]:
    return [line[2:] for line in text.split("\n") if line.startswith("# ")]


def test_default_answer_stays_within_budget_and_says_how_to_see_more(
    client: TestClient, runtime: Runtime, tmp_path: Path
) -> None:
    register_local_repo(runtime, make_repo(tmp_path / "ledger", MANY), "acme/ledger")
    nls = runtime.get(NlsService)

    text = render(nls.search(INTERNAL, "how is the invoice total computed"))
    assert len(text) <= ANSWER_CHARS
    quoted = _blocks(text)
    assert 3 <= len(quoted) < 15  # the best files quoted, the rest listed
    listed = re.findall(r"^- acme/ledger – (ledger/invoice_\d\d\.py): lines [-, 0-9]+$", text, re.MULTILINE)
    assert len(quoted) + len(listed) == 15
    assert not {q.split(" – ")[1] for q in quoted} & set(listed)
    assert "(25 more files matched among the best candidates: count:40 lists them.)" in text
    # Lines cut for length are marked with what was left out.
    first = f"def invoice_total_0_0(items):  # invoice total of {PADDING}"
    assert f"\n1: {first[:LINE_CHARS]}…(+{len(first) - LINE_CHARS} chars)\n" in text

    # count: asks for more: a bigger budget, more files quoted, never above MAX_ANSWER_CHARS.
    wide = render(nls.search(INTERNAL, "how is the invoice total computed count:40"))
    assert ANSWER_CHARS < len(wide) <= MAX_ANSWER_CHARS
    assert len(_blocks(wide)) > len(quoted)
    assert "more files matched" not in wide  # all 40 are shown or listed


def test_a_repository_named_in_the_question_ranks_first_without_hiding_others(
    client: TestClient, runtime: Runtime, tmp_path: Path
) -> None:
    register_local_repo(runtime, make_repo(tmp_path / "shop", SHOP), "acme/shop")
    register_local_repo(runtime, make_repo(tmp_path / "billing", BILLING), "github.com/acme/billing")
    nls = runtime.get(NlsService)

    unnamed = nls.search(INTERNAL, "how are invoice totals computed")
    assert unnamed.hits[0].repo == "acme/shop"
    assert not unnamed.named

    for question in (
        "how does billing compute invoice totals",
        "how does acme/billing compute invoice totals",
        "how does github.com/acme/billing compute invoice totals",
    ):
        named = nls.search(INTERNAL, question)
        assert named.named == ["github.com/acme/billing"], question
        assert named.hits[0].repo == "github.com/acme/billing", question
        assert "acme/shop" in {h.repo for h in named.hits}, question  # a soft filter: the others follow
        assert "billing" not in named.terms  # the name is a filter, not a search term
        text = render(named)
        assert _blocks(text)[0] == "github.com/acme/billing – billing/money.py"
        assert "acme/shop – shop/cart.py" in text
        assert "(Files of github.com/acme/billing first, as the question names it" in text

    # A name that is not a whole word or path part names nothing; a question that is only a name searches for it.
    assert not nls.search(INTERNAL, "how are invoice totals of billings computed").named
    alone = nls.search(INTERNAL, "billing")
    assert alone.terms == ["bill"]
    assert alone.named == ["github.com/acme/billing"]


def test_cut_lines_and_left_out_lines_are_marked(client: TestClient, runtime: Runtime, tmp_path: Path) -> None:
    register_local_repo(runtime, make_repo(tmp_path / "billing", BILLING), "acme/billing")
    nls = runtime.get(NlsService)

    rates = render(nls.search(INTERNAL, "exchange rate of a currency RATES"))
    line = next(line for line in rates.split("\n") if line.startswith("1: RATES"))
    left_out = len(LONG_LINE) - LINE_CHARS
    assert line == f"1: {LONG_LINE[:LINE_CHARS]}…(+{left_out} chars)"

    # The 60-line chunk is quoted around its one matching line; `…` lines stand for the lines left out.
    report = render(nls.search(INTERNAL, "refund ledger balance"))
    body = report.split("# acme/billing – billing/report.py\n", 1)[1].split("\n\n", 1)[0].split("\n")
    assert body[0] == "…"
    assert "57:     refund_ledger_balance = rows  # the refund ledger balance" in body
    assert body[-1] == "…" or body[-1] == "58:     return step_0"
    assert "2:     step_0 = rows[0] * 2  # unrelated arithmetic" not in body


def test_the_tool_answers_within_budget(client: TestClient, runtime: Runtime, tmp_path: Path) -> None:
    register_local_repo(runtime, make_repo(tmp_path / "ledger", MANY), "acme/ledger")
    token = make_token(runtime, make_user(runtime, "alice"))
    client.headers["Host"] = runtime.external_url.split("://", 1)[1]
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "nls_search", "arguments": {"query": "how is the invoice total computed"}},
    }
    response = client.post("/.api/mcp/all", json=body, headers={**ACCEPT, **auth_headers(token)})
    data = next(json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:"))
    text = json.loads(data["result"]["content"][0]["text"])["text"]
    assert len(text) <= ANSWER_CHARS
    assert text.startswith("Searched for: invoic total comput")
    rest = client.get(
        "/.api/nls/search", params={"q": "how is the invoice total computed"}, headers=auth_headers(token)
    )
    assert rest.json()["text"] == text
