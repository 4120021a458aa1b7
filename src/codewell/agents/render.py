"""Deep search conversations as text and JSON, shared by the MCP tools, the REST routes and the CLI.

`deepsearch_read` text (behaviour-notes §1): YAML front matter (`title`, `share_url`, `created`, `updated`,
plus `status`), then per question `# <question>`, the Markdown answer, `## Sources` with pinned links; a
question still being answered shows its status and how to poll. Renderers take a `ConversationView`: what
the reader may see, already redacted by `AgentService.read`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from codewell.agents.conversations import Conversation, Question
from codewell.agents.models import CANCELLED, COMPLETED, FAILED
from codewell.http.urls import blob_url, deepsearch_shared_url, deepsearch_url

WITHHELD_NOTICE = (
    "This answer is withheld: it cites code in repositories you cannot read. Ask the question yourself to get "
    "an answer from the code you can read."
)
POLL_HINT = "call deepsearch_read with this conversation's identifier again in a few seconds, until it is completed"


@dataclass(frozen=True, slots=True)
class ConversationView:
    """A conversation as one reader may see it: `withheld` holds the positions whose answers are hidden."""

    conversation: Conversation
    withheld: frozenset[int]
    external_url: str
    # Whether the reader may see the share link (the owner or a site admin, while sharing is enabled).
    show_share: bool
    # The owner (or a site admin) sees error details and stats; shared readers see the status only.
    is_owner: bool

    @property
    def url(self) -> str:
        return deepsearch_url(self.external_url, self.conversation.read_token)

    @property
    def share_url(self) -> str | None:
        token = self.conversation.share_token
        return deepsearch_shared_url(self.external_url, token) if token and self.show_share else None


def _yaml_string(value: str) -> str:
    # A JSON string is a valid YAML double-quoted scalar.
    return json.dumps(value, ensure_ascii=False)


def _time(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def _status_line(question: Question, view: ConversationView) -> str:
    if question.status == FAILED:
        detail = f" ({question.error_code}): {question.error_message}" if question.error_code else ""
        return f"_Status: failed{detail}_"
    if question.status == CANCELLED:
        return "_Status: cancelled_"
    return f"_Status: {question.status}: the answer is not ready yet; {POLL_HINT}._"


def _stats_line(q: Question) -> str:
    who = f"model {q.model}" if q.author == "model" and q.model else "the retrieval pipeline (no model)"
    tokens = q.input_tokens + q.output_tokens
    return (
        f"_Answered by {who} in {q.elapsed_ms / 1000:.1f} s: {q.tool_calls} tool calls, {tokens} tokens, "
        f"{q.credits} credits._"
    )


def render_question(question: Question, view: ConversationView) -> str:
    parts = [f"# {' '.join(question.text.split())}"]
    if question.status != COMPLETED:
        parts.append(_status_line(question, view))
        return "\n\n".join(parts)
    if question.position in view.withheld:
        parts.append(f"> {WITHHELD_NOTICE}")
        return "\n\n".join(parts)
    if question.notice:
        parts.append(f"> {question.notice}")
    parts.append(question.answer.strip() or "_(The agent found nothing to report.)_")
    if question.sources:
        links = []
        for c in question.sources:
            url = blob_url(view.external_url, c.repo, c.commit, c.path, (c.start_line, c.end_line))
            links.append(
                f"- [{c.repo} – {c.path}:{c.start_line}-{c.end_line}]({url})" + (f" {c.note}" if c.note else "")
            )
        parts.append("## Sources\n\n" + "\n".join(links))
    else:
        parts.append("## Sources\n\n_(none)_")
    parts.append(_stats_line(question))
    return "\n\n".join(parts)


def render_conversation(view: ConversationView) -> str:
    """The deepsearch_read text."""
    c = view.conversation
    share = _yaml_string(view.share_url) if view.share_url else '""'
    front = [
        "---",
        f"title: {_yaml_string(c.title)}",
        f"share_url: {share}",
        f"created: {_time(c.created_at)}",
        f"updated: {_time(c.updated_at)}",
        f"status: {c.status}",
        "---",
    ]
    body = [render_question(q, view) for q in c.questions]
    return "\n".join(front) + "\n\n" + "\n\n".join(body) + "\n"


def render_answer(view: ConversationView) -> str:
    """What the deepsearch tool returns once the answer is written: the conversation's `Link:` first (as
    while it is being written, so that an agent can read it again or share it), then each question once
    (no front matter repeating it as the title), its answer and its sources."""
    body = [render_question(q, view) for q in view.conversation.questions]
    return f"Link: {view.url}\n\n" + "\n\n".join(body) + "\n"


def render_link(view: ConversationView) -> str:
    """What the deepsearch tool returns while the answer is still being written."""
    return (
        f"Link: {view.url}\n\n"
        f'The deep search is {view.conversation.status}. Call deepsearch_read with identifier "{view.url}" and '
        "call it again every few seconds until its status is completed (or failed).\n"
    )


def _question_json(q: Question, view: ConversationView) -> dict[str, Any]:
    withheld = q.position in view.withheld
    body: dict[str, Any] = {
        "position": q.position,
        "question": q.text,
        "status": q.status,
        "answer": "" if withheld else q.answer,
        "notice": WITHHELD_NOTICE if withheld else q.notice,
        "withheld": withheld,
        "sources": []
        if withheld
        else [
            {
                "repository": c.repo,
                "commit": c.commit,
                "path": c.path,
                "startLine": c.start_line,
                "endLine": c.end_line,
                "note": c.note,
                "url": blob_url(view.external_url, c.repo, c.commit, c.path, (c.start_line, c.end_line)),
            }
            for c in q.sources
        ],
        "createdAt": q.created_at.isoformat(),
        "updatedAt": q.updated_at.isoformat(),
        "error": {"code": q.error_code, "message": q.error_message} if q.error_code else None,
    }
    if view.is_owner:
        body["stats"] = {
            "seconds": round(q.elapsed_ms / 1000, 3),
            "toolCalls": q.tool_calls,
            "inputTokens": q.input_tokens,
            "outputTokens": q.output_tokens,
            "credits": q.credits,
            "author": q.author or None,
            "model": q.model,
        }
    return body


def conversation_json(view: ConversationView, *, with_text: bool = True) -> dict[str, Any]:
    c = view.conversation
    body: dict[str, Any] = {
        "title": c.title,
        "status": c.status,
        "url": view.url if view.is_owner else None,
        "readToken": c.read_token if view.is_owner else None,
        "shareURL": view.share_url,
        "createdAt": c.created_at.isoformat(),
        "updatedAt": c.updated_at.isoformat(),
        "questions": [_question_json(q, view) for q in c.questions],
    }
    if with_text:
        body["text"] = render_conversation(view)
    return body


def render_list(views: list[ConversationView]) -> str:
    """One conversation per line for the CLI: status, updated, read token, title."""
    if not views:
        return "No deep search conversations.\n"
    lines = [
        f"{v.conversation.status:<10} {_time(v.conversation.updated_at)}  {v.conversation.read_token}  "
        f"{v.conversation.title}"
        for v in views
    ]
    return "\n".join(lines) + "\n"
