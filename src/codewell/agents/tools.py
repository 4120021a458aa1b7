"""MCP tools of the agents capability (the spec's table): code_finder on /.api/mcp and /all; deepsearch on /all
and /deepsearch; deepsearch_read on all three.

Thin: parse arguments, one AgentService call with the acting user, render (agents/render.py, finder's
render_finder). `deepsearch` waits up to `deepSearch.mcpWaitSeconds` for the answer while one of the
`deepSearch.maxWaitingCalls` waiting slots is free, and otherwise returns the conversation's `Link:` with
the instruction to poll `deepsearch_read`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from codewell.agents.finder import render_finder
from codewell.agents.jobs import FEATURE
from codewell.agents.render import conversation_json, render_answer, render_conversation, render_link
from codewell.agents.service import AgentService
from codewell.core.errors import InvalidInput
from codewell.core.tools import Endpoint, ToolContext, ToolResult, ToolSpec
from codewell.licensing.service import LicensingService
from codewell.runtime import Runtime


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _text(args: dict[str, Any], name: str, example: str) -> str:
    value = args.get(name)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"`{name}` is required and must be a non-empty string", hint=f'pass "{name}": "{example}"')
    return value


_CODE_FINDER = (
    "Find where something is done in one repository: give an engineering task that names the repository "
    "(e.g. `where does acme/api validate webhook signatures?`) and optionally a revision (branch, tag or commit; "
    "then the task must identify exactly one repository). Runs its own search loop synchronously and returns a "
    "short summary followed by links to files and line ranges pinned to a commit. It declines broad "
    "cross-repository discovery: use keyword_search or deepsearch for that. Each call is metered against the "
    "instance's entitlement."
)
_DEEPSEARCH = (
    "Start a deep search: an agent researches a detailed, specific question across the repositories you can "
    "read and writes a Markdown report with a Sources list. Creates a new conversation. Waits a while for the "
    "answer; if it is not ready, returns `Link: <url>`: call deepsearch_read with that URL and retry until the "
    "status is completed."
)
_DEEPSEARCH_READ = (
    "Read a deep search conversation: pass its full URL (`<externalURL>/deepsearch/<token>` or the shared form "
    "`.../deepsearch/shared/<token>`) or its read token. Returns YAML front matter (title, share_url, created, "
    "updated, status), then `# <question>`, the Markdown answer and `## Sources` for each question; while an "
    "answer is being written it shows the status: call again until it is completed."
)


def code_finder(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    task = _text(args, "task", "where does acme/api validate webhook signatures?")
    revision = args.get("revision")
    if revision is not None and (not isinstance(revision, str) or not revision.strip()):
        raise InvalidInput("`revision` must be a branch, tag or commit", hint='e.g. "revision": "main"')
    answer = ctx.runtime.get(AgentService).code_finder(ctx.actor, task, revision)
    text = render_finder(answer, ctx.runtime.external_url)
    return ToolResult(text=text, structured={"text": text})


def deepsearch(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    question = _text(args, "question", "how do the billing jobs retry failed charges, and where is that set up?")
    service = ctx.runtime.get(AgentService)
    view = service.deepsearch(ctx.actor, question)
    wait = ctx.runtime.config.deep_search.mcp_wait_seconds
    if wait > 0 and service.wait_slot():
        try:
            view = service.wait(ctx.actor, view, wait)
        finally:
            service.release_slot()
    if view.conversation.is_open:
        text = render_link(view)
        return ToolResult(text=text, structured={"text": text, "url": view.url, "status": view.conversation.status})
    text = render_answer(view)  # the link in the text too: an agent may keep only the text
    return ToolResult(text=text, structured={"text": text, "url": view.url, "status": view.conversation.status})


def deepsearch_read(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    identifier = _text(args, "identifier", "https://code.example.com/deepsearch/<token>")
    view = ctx.runtime.get(AgentService).read(ctx.actor, identifier)
    text = render_conversation(view)
    body = conversation_json(view, with_text=False)
    return ToolResult(text=text, structured={"text": text, "status": body["status"]})


def licensed(feature: str) -> Callable[[Runtime], bool]:
    """A tool_available check: the plan in force includes `feature`."""

    def check(runtime: Runtime) -> bool:
        return runtime.get(LicensingService).feature_refusal(feature) is None

    return check


TOOLS: list[ToolSpec] = [
    ToolSpec(
        name="code_finder",
        description=_CODE_FINDER,
        input_schema=_schema(
            {
                "task": {"type": "string", "description": "An engineering request that names a repository."},
                "revision": {
                    "type": "string",
                    "description": "Branch, tag or commit (default: the repository's default branch).",
                },
            },
            ["task"],
        ),
        handler=code_finder,
        endpoints=frozenset({Endpoint.CORE, Endpoint.ALL}),
    ),
    ToolSpec(
        name="deepsearch",
        description=_DEEPSEARCH,
        input_schema=_schema(
            {"question": {"type": "string", "description": "A detailed, specific question about the code."}},
            ["question"],
        ),
        handler=deepsearch,
        endpoints=frozenset({Endpoint.ALL, Endpoint.DEEPSEARCH}),
    ),
    ToolSpec(
        name="deepsearch_read",
        description=_DEEPSEARCH_READ,
        input_schema=_schema(
            {"identifier": {"type": "string", "description": "The conversation's URL (normal or shared) or token."}},
            ["identifier"],
        ),
        handler=deepsearch_read,
        endpoints=frozenset({Endpoint.CORE, Endpoint.ALL, Endpoint.DEEPSEARCH}),
    ),
]
# code_finder and deepsearch are offered while the plan in force includes them; on /.api/mcp, nls_search
# takes code_finder's place when it is unavailable or disabled (mcp/registry.py).
TOOL_AVAILABLE = {"code_finder": licensed("code_finder"), FEATURE: licensed(FEATURE)}
