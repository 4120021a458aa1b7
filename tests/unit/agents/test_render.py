"""Deep search rendering and identifier parsing, on hand-made records."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from codewell.agents.answers import Citation
from codewell.agents.conversations import Conversation, Question, title_of
from codewell.agents.render import (
    WITHHELD_NOTICE,
    ConversationView,
    render_answer,
    render_conversation,
    render_link,
)
from codewell.agents.service import _names, parse_identifier
from codewell.core.errors import InvalidInput

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
T1 = datetime(2026, 3, 1, 12, 0, 42, tzinfo=UTC)
TOKEN = "0f9c3f7e-1b2a-4c3d-8e4f-5a6b7c8d9e0f"
SHA = "a" * 40


def question(position: int, status: str, **fields: object) -> Question:
    base: dict[str, object] = {
        "id": position, "position": position, "text": f"Question {position}?", "status": status, "answer": "",
        "sources": (), "notice": "", "author": "", "model": None, "elapsed_ms": 0, "tool_calls": 0,
        "input_tokens": 0, "output_tokens": 0, "credits": 0, "error_code": "", "error_message": "",
        "created_at": T0, "updated_at": T1,
    }  # fmt: skip
    base.update(fields)
    return Question(**base)  # type: ignore[arg-type]


def view(*questions: Question, title: str = "Question 1?", withheld: frozenset[int] = frozenset()) -> ConversationView:
    conversation = Conversation(1, 7, title, TOKEN, None, T0, T1, questions)
    return ConversationView(conversation, withheld, "https://code.example.com", show_share=True, is_owner=True)


def test_completed_conversation_reads_like_the_reference() -> None:
    answered = question(
        1, "completed", answer="Charges are retried in `retry.py`.", author="model", model="gpt-x", elapsed_ms=3200,
        tool_calls=4, input_tokens=1000, output_tokens=200, credits=2,
        sources=(Citation("acme/app", SHA, "billing/retry.py", 3, 9, "retry_failed_charge"),),
    )  # fmt: skip
    assert render_conversation(view(answered)) == (
        "---\n"
        'title: "Question 1?"\n'
        'share_url: ""\n'
        "created: 2026-03-01T12:00:00Z\n"
        "updated: 2026-03-01T12:00:42Z\n"
        "status: completed\n"
        "---\n\n"
        "# Question 1?\n\n"
        "Charges are retried in `retry.py`.\n\n"
        "## Sources\n\n"
        f"- [acme/app – billing/retry.py:3-9](https://code.example.com/acme/app@{SHA}/-/blob/billing/retry.py%3FL3-9)"
        " retry_failed_charge\n\n"
        "_Answered by model gpt-x in 3.2 s: 4 tool calls, 1200 tokens, 2 credits._\n"
    )


def test_the_deepsearch_answer_carries_its_link_and_shows_the_question_once() -> None:
    answered = question(
        1, "completed", answer="Charges are retried in `retry.py`.", author="retrieval", elapsed_ms=200,
        sources=(Citation("acme/app", SHA, "billing/retry.py", 3, 9, "retry_failed_charge"),),
    )  # fmt: skip
    text = render_answer(view(answered))
    assert text.startswith(f"Link: https://code.example.com/deepsearch/{TOKEN}\n\n# Question 1?\n\n")
    assert text.count("Question 1?") == 1  # no front matter repeating it as the title
    assert "Charges are retried in `retry.py`.\n\n## Sources\n\n- [acme/app – billing/retry.py:3-9]" in text
    # A follow-up: every question once, in order, under the one link.
    both = render_answer(view(answered, question(2, "processing")))
    assert both.count("Link: ") == 1
    assert both.index("# Question 1?") < both.index("# Question 2?\n\n_Status: processing")


def test_open_failed_and_withheld_questions() -> None:
    text = render_conversation(
        view(
            question(1, "completed", answer="secret stuff in acme/secret", sources=()),
            question(2, "failed", error_code="quota_exceeded", error_message="not enough credits left"),
            question(3, "processing"),
            title='Say "hi": now\nplease',
            withheld=frozenset({1}),
        )
    )
    assert 'title: "Say \\"hi\\": now\\nplease"\n' in text  # a JSON string is a YAML double-quoted scalar
    assert "secret stuff" not in text
    assert f"# Question 1?\n\n> {WITHHELD_NOTICE}\n\n# Question 2?" in text
    assert "_Status: failed (quota_exceeded): not enough credits left_" in text
    assert "# Question 3?\n\n_Status: processing: the answer is not ready yet; call deepsearch_read" in text
    assert text.count("\nstatus: processing\n") == 1


def test_link_names_the_conversation_and_how_to_poll() -> None:
    link = render_link(view(question(1, "pending")))
    assert link.startswith(f"Link: https://code.example.com/deepsearch/{TOKEN}\n\n")
    assert f'Call deepsearch_read with identifier "https://code.example.com/deepsearch/{TOKEN}"' in link


@pytest.mark.parametrize(
    ("identifier", "expected"),
    [
        (TOKEN, ("any", TOKEN)),
        (TOKEN.upper(), ("any", TOKEN)),
        (f"https://code.example.com/deepsearch/{TOKEN}", ("own", TOKEN)),
        (f"https://code.example.com/deepsearch/{TOKEN}/", ("own", TOKEN)),
        (f"https://code.example.com/prefix/deepsearch/shared/{TOKEN}?x=1", ("shared", TOKEN)),
        (f"/deepsearch/{TOKEN}", ("own", TOKEN)),
        (f"  {TOKEN}\n", ("any", TOKEN)),
    ],
)
def test_identifiers(identifier: str, expected: tuple[str, str]) -> None:
    assert parse_identifier(identifier) == expected


@pytest.mark.parametrize(
    "identifier", ["", "nonsense", "https://x/deepsearch/", f"https://x/other/{TOKEN}", TOKEN[:-1]]
)
def test_bad_identifiers(identifier: str) -> None:
    with pytest.raises(InvalidInput):
        parse_identifier(identifier)


def test_repository_names_in_text() -> None:
    assert _names("acme/secret", "see acme/secret@abc for it")
    assert _names("acme/secret", "[acme/secret – a.py:1-2](https://x/acme/secret@a/-/blob/a.py)")
    assert not _names("acme/secret", "see acme/secret2 and acme/secret-old")
    assert _names("acme/secret", "in acme/secret/vault/rotate.py")  # a path in it names it too
    assert not _names("acme/app", "the repo acme/app-x, not my-acme/app")
    assert title_of("  first line\nsecond") == "first line"
    assert len(title_of("x" * 500)) == 120
