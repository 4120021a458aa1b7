"""MCP tool nls_search (on /.api/mcp/all; on /.api/mcp the registry offers it while code_finder is unavailable)."""

from __future__ import annotations

from typing import Any

from codewell.core.errors import InvalidInput
from codewell.core.tools import Endpoint, ToolContext, ToolResult, ToolSpec
from codewell.nls.render import render
from codewell.nls.service import NlsService

_DESCRIPTION = (
    "Search code across the repositories you can read with a question in natural language (e.g. `where are "
    "expired sessions cleaned up?`). Question and stop words are dropped, identifiers are kept whole and split "
    "into words, words are stemmed, so it is broader than keyword_search. A repository named in the question "
    "(`cobra`, `spf13/cobra`) ranks its files first without excluding the others. Filters inside the query: "
    "repo:<name or regex>, file:<regex>, rev:<revision> (with repo:), count:N (files, default 15). The first line "
    "states the terms used; then `# <repo> – <path>` blocks of `<line>: <text>` chunks (3 for the first file, 2 "
    "after), about 8,000 characters in all: files that do not fit are listed by path and lines, and a last line "
    "says how many more matched. A line cut for length ends with `…(+N chars)`; a `…` line stands for lines left out."
)
_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {"query": {"type": "string", "description": "The question, with optional filters."}},
    "required": ["query"],
    "additionalProperties": False,
}


def nls_search(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    query = args.get("query")
    if not isinstance(query, str):
        raise InvalidInput("`query` is required and must be a string", hint='pass "query": "how are tokens refreshed"')
    text = render(ctx.runtime.get(NlsService).search(ctx.actor, query))
    return ToolResult(text=text, structured={"text": text})


TOOLS: list[ToolSpec] = [
    ToolSpec(
        name="nls_search",
        description=_DESCRIPTION,
        input_schema=_SCHEMA,
        handler=nls_search,
        endpoints=frozenset({Endpoint.ALL}),
    )
]
