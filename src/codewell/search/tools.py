"""MCP tool of the search capability: keyword_search (thin: parse args, call SearchService, render)."""

from __future__ import annotations

from typing import Any

from codewell.core.errors import InvalidInput
from codewell.core.tools import Endpoint, ToolContext, ToolResult, ToolSpec
from codewell.search.render import read_cursor, render_results
from codewell.search.service import SearchService

__all__ = ["TOOLS"]

_DESCRIPTION = (
    "Search code across the repositories you can read. Returns the top 3 most relevant code chunks "
    "(truncated to 1024 characters) from each matching file (up to 15 files), as `# <repo> – <path>` blocks of "
    "`<line>: <text>` lines. Search is case-insensitive by default (case:yes to change) and terms are ANDed "
    'within a file. Syntax: "exact phrase", /RE2 regex/, AND / OR / NOT with parentheses; filters '
    "repo:<regex> (repo:name@revision), -repo:, file:<regex> (use regex, not globs: file:.*\\.py$), -file:, "
    "lang:<language>, rev:<revision> (only with repo:), count:N|all, type:path, timeout:10s; type:symbol or "
    "sym:<name> finds definitions by name (listed first, as `(kind Container.name)` chunks). Use OR between "
    "alternatives rather than |. With count:N or count:all the answer lists every match found (up to N): the "
    "first 15 files' top chunks, then one `<line>: <text>` line per further match under its file's header, "
    "until about 23,000 characters; a longer answer ends with a cursor: call again with the same query and "
    "that `cursor` for the next matches."
)

_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "description": "The search query, e.g. `mutex_lock file:\\.c$` or `repo:myrepo /func\\s+\\w+Handler/`.",
        },
        "cursor": {
            "type": "string",
            "maxLength": 100,
            "description": "Continue a count: answer that hit the output budget: the cursor it printed, same query.",
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}


def keyword_search(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    query = args.get("query")
    if not isinstance(query, str):
        raise InvalidInput("`query` is required and must be a string", hint='pass "query": "mutex_lock"')
    cursor = args.get("cursor")
    skip = 0
    if cursor is not None:
        if not isinstance(cursor, str):
            raise InvalidInput("`cursor` must be a string", hint="pass the cursor the previous answer printed")
        skip = read_cursor(query, cursor)
    results = ctx.runtime.get(SearchService).search(ctx.actor, query)
    if skip and not results.count_given:
        raise InvalidInput("a cursor continues a count: query", hint="add count:N or count:all to the query")
    rendered = render_results(results, query, skip=skip)
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
