"""Deep search pages for people (docs/agents.md "Pages"): ask and list at `/deepsearch`, a conversation at
`/deepsearch/<read_token>`, its shared form at `/deepsearch/shared/<share_token>`.

Adapters only: every page is one `AgentService` call made as the signed-in user, so the visibility rules are
the service's: a conversation the reader may not read is its NotFound (404), exactly like a missing one, and
answers citing repositories the reader cannot read arrive already withheld (`ConversationView.withheld`).

Answers are Markdown written by a model (or the retrieval pipeline), rendered with markdown-it-py: raw HTML is
escaped (never passed through), images are off, and links keep only http(s), relative and fragment targets.
Sources link to the file view at their lines (`/<repo>@<sha>/-/blob/<path>?L<a>-<b>`, on the host the browser
used). While the latest question is open, the page polls itself with htmx (and, without JavaScript, refreshes
with a `<meta http-equiv="refresh">` inside `<noscript>`) until the answer is there.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode, urlsplit

from markupsafe import Markup
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from codewell.agents.conversations import MAX_QUESTION, Question
from codewell.agents.models import CANCELLED, COMPLETED, FAILED
from codewell.agents.render import WITHHELD_NOTICE, ConversationView
from codewell.agents.service import AgentService, not_found
from codewell.authz import Action, UserRef, allowed, ensure
from codewell.core.actors import Actor
from codewell.core.errors import CodewellError
from codewell.http import urls
from codewell.http.csrf import verify_form
from codewell.http.requests import actor_of, form_text, runtime_of
from codewell.http.templates import render
from codewell.runtime import Runtime

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.renderer import RendererHTML
    from markdown_it.token import Token
    from markdown_it.utils import EnvType, OptionsDict

__all__ = ["markdown_html", "routes"]

# Conversations listed on /deepsearch (the service's limit is 500).
LIST_LIMIT = 100
# Seconds between the status polls of a page whose latest question is still open.
POLL_SECONDS = 2


# -- Markdown -------------------------------------------------------------------------------------------------
def _safe_link(url: str) -> bool:
    """Only http(s) links, and links without a scheme (relative paths, `#fragments`, `?queries`)."""
    target = url.strip()
    if target.startswith("//"):  # protocol-relative: another host with whatever scheme the page has
        return False
    try:
        scheme = urlsplit(target).scheme.lower()
    except ValueError:
        return False
    return scheme in ("", "http", "https")


def _link_open(self: RendererHTML, tokens: list[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    tokens[idx].attrSet("rel", "nofollow noopener noreferrer")
    return self.renderToken(tokens, idx, options, env)


def _image(self: RendererHTML, tokens: list[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    """An image as a link to it: an answer makes the browser fetch nothing (the CSP would refuse other hosts)."""
    from markdown_it.common.utils import escapeHtml  # noqa: PLC0415 - markdown-it loads with the first answer

    token = tokens[idx]
    src = escapeHtml(str(token.attrGet("src") or ""))
    alt = escapeHtml(self.renderInlineAsText(token.children or [], options, env) or str(token.attrGet("src") or ""))
    return f'<a href="{src}" rel="nofollow noopener noreferrer">{alt}</a>'


def _heading(self: RendererHTML, tokens: list[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    """An answer's headings sit below the page's (h1 title, h2 question): `#` becomes h3, down to h6."""
    token = tokens[idx]
    token.tag = f"h{min(6, int(token.tag[1]) + 2)}"
    return self.renderToken(tokens, idx, options, env)


@functools.cache
def _markdown() -> MarkdownIt:
    """The renderer, made at the first answer shown: every process imports this module (its routes), few render."""
    from markdown_it import MarkdownIt  # noqa: PLC0415 - see the docstring

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable("table").enable("strikethrough")
    md.validateLink = _safe_link  # type: ignore[method-assign]
    md.add_render_rule("link_open", _link_open)
    md.add_render_rule("image", _image)
    md.add_render_rule("heading_open", _heading)
    md.add_render_rule("heading_close", _heading)
    return md


def markdown_html(text: str) -> Markup:
    """An answer's Markdown as HTML: raw HTML escaped, only http(s)/relative links (unsafe ones stay text)."""
    return Markup(_markdown().render(text))  # markdown-it escapes all text; html=False escapes raw HTML


# -- what the templates get ---------------------------------------------------------------------------------
def _source_url(repo: str, commit: str, path: str, start: int, end: int) -> str:
    return urls.blob_url("", repo, commit, quote(path)) + f"?L{start}-{end}"


def _question(q: Question, view: ConversationView) -> dict[str, Any]:
    withheld = q.position in view.withheld
    answered = q.status == COMPLETED and not withheld
    item: dict[str, Any] = {
        "position": q.position,
        "text": q.text,
        "status": q.status,
        "open": q.is_open,
        "withheld": withheld and q.status == COMPLETED,
        "notice": WITHHELD_NOTICE if withheld else q.notice,
        "answer": markdown_html(q.answer.strip() or "_(The agent found nothing to report.)_") if answered else "",
        "sources": [
            {
                "label": f"{c.repo} – {c.path}:{c.start_line}-{c.end_line}",
                "url": _source_url(c.repo, c.commit, c.path, c.start_line, c.end_line),
                "note": c.note,
            }
            for c in q.sources
        ]
        if answered
        else [],
        # Error details and stats are the owner's (and site admins'); shared readers see the status only.
        "error": {"code": q.error_code, "message": q.error_message}
        if q.status == FAILED and view.is_owner and q.error_code
        else None,
        "stats": None,
        "updated_at": q.updated_at,
    }
    if view.is_owner and answered:
        author = f"model {q.model}" if q.author == "model" and q.model else "the retrieval pipeline (no model)"
        item["stats"] = {
            "author": author,
            "seconds": f"{q.elapsed_ms / 1000:.1f}",
            "tool_calls": q.tool_calls,
            "tokens": q.input_tokens + q.output_tokens,
            "credits": q.credits,
        }
    return item


def _conversation(runtime: Runtime, actor: Actor, view: ConversationView, *, shared: bool) -> dict[str, Any]:
    c = view.conversation
    own = not shared and view.is_owner
    base = f"/deepsearch/{c.read_token}"
    return {
        "title": c.title,
        "status": c.status,
        "open": c.is_open,
        "created_at": c.created_at,
        "updated_at": c.updated_at,
        "questions": [_question(q, view) for q in c.questions],
        "shared": shared,
        # The page's own address (what htmx polls); a shared page never shows the read token.
        "self_url": f"/deepsearch/shared/{c.share_token}" if shared else base,
        "base": base if own else "",
        "can_follow_up": own and actor.user_id == c.owner_id and not c.is_open,
        "can_manage": own and allowed(actor, Action.DEEPSEARCH_MANAGE, UserRef(c.owner_id)),
        "sharing": own and view.show_share,
        "share_url": view.share_url if own else None,
        "poll_seconds": POLL_SECONDS,
        "max_question": MAX_QUESTION,
        "CANCELLED": CANCELLED,
    }


def _token(request: Request) -> str:
    """The path's token, or NotFound for anything that is not a UUID (like a conversation that does not exist)."""
    raw = str(request.path_params["token"])
    try:
        uuid.UUID(raw)
    except ValueError:
        raise not_found() from None
    return raw.lower()


def _own(request: Request) -> str:
    return f"/deepsearch/{_token(request)}"


def _sign_in(request: Request) -> Response:
    back = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse("/sign-in?" + urlencode({"returnTo": back}), status_code=303)


def _service(request: Request) -> AgentService:
    return runtime_of(request).get(AgentService)


# -- pages ----------------------------------------------------------------------------------------------------
def _index_context(runtime: Runtime, actor: Actor) -> dict[str, Any]:
    views = runtime.get(AgentService).list(actor, LIST_LIMIT)
    rows = [
        {
            "title": v.conversation.title,
            "status": v.conversation.status,
            "updated_at": v.conversation.updated_at,
            "url": f"/deepsearch/{v.conversation.read_token}",
            "questions": len(v.conversation.questions),
        }
        for v in views
    ]
    return {"conversations": rows, "limit": LIST_LIMIT, "max_question": MAX_QUESTION}


async def index(request: Request) -> Response:
    actor = actor_of(request)
    if actor.is_anonymous:
        return _sign_in(request)
    context = await run_in_threadpool(_index_context, runtime_of(request), actor)
    return render(request, "agents/deepsearch_index.html", question="", error="", **context)


async def ask(request: Request) -> Response:
    actor = actor_of(request)
    form = await request.form()
    verify_form(request, form)
    runtime = runtime_of(request)
    question = form_text(form, "question")
    try:
        view = await run_in_threadpool(runtime.get(AgentService).deepsearch, actor, question)
    except CodewellError as exc:
        if actor.is_anonymous:
            raise
        context = await run_in_threadpool(_index_context, runtime, actor)
        return render(
            request,
            "agents/deepsearch_index.html",
            status_code=exc.http_status,
            question=question,
            error=exc.message + (f" ({exc.hint})" if exc.hint else ""),
            **context,
        )
    return RedirectResponse(f"/deepsearch/{view.conversation.read_token}", status_code=303)


async def _show(request: Request, identifier: str, *, shared: bool, status: int = 200, **extra: Any) -> Response:
    actor, runtime = actor_of(request), runtime_of(request)
    if actor.is_anonymous:
        return _sign_in(request)

    def build() -> dict[str, Any]:
        view = runtime.get(AgentService).read(actor, identifier)
        return _conversation(runtime, actor, view, shared=shared)

    context = await run_in_threadpool(build)
    extra.setdefault("error", "")
    extra.setdefault("question", "")
    return render(request, "agents/deepsearch_conversation.html", status_code=status, **context, **extra)


async def conversation(request: Request) -> Response:
    return await _show(request, _own(request), shared=False)


async def shared_conversation(request: Request) -> Response:
    return await _show(request, f"/deepsearch/shared/{_token(request)}", shared=True)


async def follow_up(request: Request) -> Response:
    actor = actor_of(request)
    form = await request.form()
    verify_form(request, form)
    identifier = _own(request)
    question = form_text(form, "question")
    try:
        await run_in_threadpool(_service(request).follow_up, actor, identifier, question)
    except CodewellError as exc:
        if exc.http_status in (401, 404):
            raise
        message = exc.message + (f" ({exc.hint})" if exc.hint else "")
        return await _show(request, identifier, shared=False, status=exc.http_status, error=message, question=question)
    return RedirectResponse(identifier, status_code=303)


def _change(
    call: Callable[[AgentService, Actor, str], object], *, back: str = "conversation"
) -> Callable[[Request], Awaitable[Response]]:
    """A POST on a conversation: CSRF check, one service call, then back to the page (or the list)."""

    async def handler(request: Request) -> Response:
        actor = actor_of(request)
        form = await request.form()
        verify_form(request, form)
        identifier = _own(request)
        service = _service(request)
        await run_in_threadpool(call, service, actor, identifier)
        return RedirectResponse(identifier if back == "conversation" else "/deepsearch", status_code=303)

    return handler


async def confirm_delete(request: Request) -> Response:
    """GET /deepsearch/<token>/delete: the confirmation (the owner's conversation page links here)."""
    actor, runtime = actor_of(request), runtime_of(request)
    if actor.is_anonymous:
        return _sign_in(request)
    identifier = _own(request)

    def build() -> dict[str, Any]:
        view = runtime.get(AgentService).read(actor, identifier)
        # Readers who may not change it (an OAuth token of the owner) get the same refusal as the POST.
        ensure(actor, Action.DEEPSEARCH_MANAGE, UserRef(view.conversation.owner_id))
        return _conversation(runtime, actor, view, shared=False)

    context = await run_in_threadpool(build)
    return render(request, "agents/deepsearch_delete.html", **context)


def routes(runtime: Runtime) -> list[BaseRoute]:
    return [
        Route("/deepsearch", index, methods=["GET"]),
        Route("/deepsearch", ask, methods=["POST"]),
        Route("/deepsearch/shared/{token}", shared_conversation, methods=["GET"]),
        Route("/deepsearch/{token}", conversation, methods=["GET"]),
        Route("/deepsearch/{token}/questions", follow_up, methods=["POST"]),
        Route("/deepsearch/{token}/cancel", _change(lambda s, a, i: s.cancel(a, i)), methods=["POST"]),
        Route("/deepsearch/{token}/share", _change(lambda s, a, i: s.share(a, i)), methods=["POST"]),
        Route("/deepsearch/{token}/reset-share", _change(lambda s, a, i: s.reset_share(a, i)), methods=["POST"]),
        Route("/deepsearch/{token}/delete", confirm_delete, methods=["GET"]),
        Route("/deepsearch/{token}/delete", _change(lambda s, a, i: s.delete(a, i), back="list"), methods=["POST"]),
    ]
