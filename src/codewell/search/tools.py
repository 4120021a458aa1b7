"""MCP tool of the search capability: keyword_search (thin: parse args, call SearchService, render)."""

from __future__ import annotations

from typing import Any

from codewell.core.errors import InvalidInput
from codewell.core.tools import Endpoint, ToolContext, ToolResult, ToolSpec
from codewell.search.render import render_results
from codewell.search.service import SearchService

__all__ = ["TOOLS"]

_DESCRIPTION = (
    "Search code across the repositories you can read. Returns the top 3 most relevant code chunks "
    "(truncated to 1024 characters) from each matching file (up to 15 files), as `# <repo> – <path>` blocks of "
    "`<line>: <text>` lines. Search is case-insensitive by default (case:yes to change) and terms are ANDed "
    'within a file. Syntax: "exact phrase", /RE2 regex/, AND / OR / NOT with parentheses; filters '
    "repo:<regex> (repo:name@revision), -repo:, file:<regex> (use regex, not globs: file:.*\\.py$), -file:, "
    "lang:<language>, rev:<revision> (only with repo:), count:N|all, type:path, timeout:10s. Use OR between "
    "alternatives rather than |."
)

_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "description": "The search query, e.g. `mutex_lock file:\\.c$` or `repo:myrepo /func\\s+\\w+Handler/`.",
        }
    },
    "required": ["query"],
    "additionalProperties": False,
}


def keyword_search(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    query = args.get("query")
    if not isinstance(query, str):
        raise InvalidInput("`query` is required and must be a string", hint='pass "query": "mutex_lock"')
    results = ctx.runtime.get(SearchService).search(ctx.actor, query)
    rendered = render_results(results, query)
    language = results.files[0].language if results.files else ""
    return ToolResult(text=rendered.text, structured={"text": rendered.text}, language=language)


TOOLS: list[ToolSpec] = [
    ToolSpec(
        name="keyword_search",
        description=_DESCRIPTION,
        input_schema=_SCHEMA,
        handler=keyword_search,
        endpoints=frozenset({Endpoint.CORE, Endpoint.ALL}),
    )
]
