"""MCP tools of the history capability: commit_search, diff_search, compare_revisions, get_contributor_repos.

Thin: the registry has validated the arguments against the schemas below (types, ranges, lengths), so a
handler passes them to HistoryService with the acting user and renders the result (history.render, the
renderer the REST routes share).
"""

from __future__ import annotations

from typing import Any

from codewell.core.tools import Endpoint, ToolContext, ToolResult, ToolSpec
from codewell.history import compare_page, params, render, wire
from codewell.history import service as svc
from codewell.history.service import HistoryService

CORE_AND_ALL = frozenset({Endpoint.CORE, Endpoint.ALL})
ALL_ONLY = frozenset({Endpoint.ALL})

_STRINGS = {"type": "array", "items": {"type": "string"}}
_DATE_HELP = "YYYY-MM-DD, an ISO timestamp, or relative like `2 weeks ago`"


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _terms(max_length: int, description: str) -> dict[str, Any]:
    """An array of strings matched as SQL substrings: bounded so the database never refuses the pattern."""
    items = {"type": "string", "maxLength": max_length}
    return {"type": "array", "items": items, "maxItems": params.MAX_TERMS, "description": description}


def commit_search(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    result = wire.commit_search(ctx.runtime.get(HistoryService), ctx.actor, args)
    external_url = ctx.runtime.external_url
    structured = render.commits_json(result, external_url, render.query_text(args, render.COMMIT_QUERY))
    return ToolResult(render.commits_text(result, external_url), structured)


def diff_search(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    result = wire.diff_search(ctx.runtime.get(HistoryService), ctx.actor, args)
    query = render.query_text(args, render.DIFF_QUERY)
    text, structured = render.diffs_answer(result, ctx.runtime.external_url, query)
    return ToolResult(text, structured)


def compare_revisions(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    comparison = wire.compare(ctx.runtime.get(HistoryService), ctx.actor, args)
    text, structured = compare_page.comparison_answer(comparison, ctx.runtime.external_url)
    return ToolResult(text, structured)


def get_contributor_repos(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    authors = args.get("authors", [])
    repos = wire.contributor_repos(ctx.runtime.get(HistoryService), ctx.actor, args)
    return ToolResult(render.contributors_text(repos, authors), render.contributors_json(repos))


# Filter parameters commit_search and diff_search share: one wording for both tools.
_FILTERS: dict[str, dict[str, Any]] = {
    "repos": {**_STRINGS, "description": "Repository names; /regex/ entries match names"},
    "authors": _terms(params.MAX_TERM_CHARS, "Author name or e-mail substrings (case-insensitive)"),
    "after": {"type": "string", "description": f"Only commits after this date: {_DATE_HELP}"},
    "before": {"type": "string", "description": f"Only commits before this date: {_DATE_HELP}"},
    "revisions": {**_STRINGS, "description": "Branches, tags or ref globs (refs/heads/release-*)"},
}

TOOLS: list[ToolSpec] = [
    ToolSpec(
        name="commit_search",
        description=(
            "Search commits in the given repositories by message, author, changed code, changed files, date range "
            "and revisions. Filter kinds are ANDed; several values of one kind are ORed. Newest first."
        ),
        input_schema=_schema(
            {
                "repos": _FILTERS["repos"],
                "messageTerms": _terms(params.MAX_TERM_CHARS, "Substrings of the commit message (case-insensitive)"),
                "authors": _FILTERS["authors"],
                "contentTerms": {**_STRINGS, "description": "Commits whose diff adds or removes one of these strings"},
                "files": _terms(params.MAX_PATH_CHARS, "Substrings of changed file paths"),
                "after": _FILTERS["after"],
                "before": _FILTERS["before"],
                "revisions": _FILTERS["revisions"],
                "count": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": svc.COMMIT_COUNT_MAX,
                    "default": svc.COMMIT_COUNT_DEFAULT,
                },
            },
            ["repos"],
        ),
        handler=commit_search,
        endpoints=CORE_AND_ALL,
    ),
    ToolSpec(
        name="diff_search",
        description=(
            "Search the code changes (diffs) of commits for a pattern (RE2 regular expression, case-sensitive; a plain "
            "string matches literally). Returns matching hunks with the matching lines marked `>`, newest first."
        ),
        input_schema=_schema(
            {
                "pattern": {"type": "string", "description": "RE2 regular expression matched against changed lines"},
                "repos": _FILTERS["repos"],
                "added": {"type": "boolean", "description": "Only match added lines"},
                "removed": {"type": "boolean", "description": "Only match removed lines"},
                "authors": _FILTERS["authors"],
                "after": _FILTERS["after"],
                "before": _FILTERS["before"],
                "revisions": _FILTERS["revisions"],
                "count": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": svc.DIFF_COUNT_MAX,
                    "default": svc.DIFF_COUNT_DEFAULT,
                },
            },
            ["pattern", "repos"],
        ),
        handler=diff_search,
        endpoints=CORE_AND_ALL,
    ),
    ToolSpec(
        name="compare_revisions",
        description=(
            "Compare two revisions of a repository: per-file status (added/modified/deleted/renamed), line counts "
            "and hunks, with totals. Paginate over files with `after` = the previous endCursor."
        ),
        input_schema=_schema(
            {
                "repo": {"type": "string", "description": "Repository name"},
                "base": {"type": "string", "description": "Older revision (branch, tag or commit)"},
                "head": {"type": "string", "description": "Newer revision (branch, tag or commit)"},
                "first": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": svc.COMPARE_FIRST_MAX,
                    "default": svc.COMPARE_FIRST_DEFAULT,
                },
                "after": {"type": "string", "description": "Pagination cursor (endCursor of the previous page)"},
            },
            ["repo", "base", "head"],
        ),
        handler=compare_revisions,
        endpoints=ALL_ONLY,
    ),
    ToolSpec(
        name="get_contributor_repos",
        description=(
            "Repositories the given authors have committed to, with commit counts and most recent commit date, "
            "ordered by count then recency."
        ),
        input_schema=_schema(
            {
                "authors": {
                    **_terms(params.MAX_TERM_CHARS, "Author names or e-mail addresses (at most 5)"),
                    "maxItems": svc.CONTRIB_AUTHORS_MAX,
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": svc.CONTRIB_LIMIT_MAX,
                    "default": svc.CONTRIB_LIMIT_DEFAULT,
                },
                "minCommits": {"type": "integer", "minimum": 1, "default": 1},
            },
            ["authors"],
        ),
        handler=get_contributor_repos,
        endpoints=ALL_ONLY,
    ),
]
