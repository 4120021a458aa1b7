"""REST API of the history capability (JSON; the same data as the MCP tools' structuredContent).

GET /.api/history/commits       commit_search   (repos, messageTerms, authors, contentTerms, files, after,
                                                 before, revisions: repeatable; count)
GET /.api/history/diffs         diff_search     (pattern, repos, authors, revisions: repeatable; added, removed,
                                                 after, before, count)
GET /.api/history/compare       compare_revisions (repo, base, head, first, after)
GET /.api/history/contributors  get_contributor_repos (authors: repeatable; limit, minCommits)
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from codewell.core.errors import InvalidInput
from codewell.core.tools import Endpoint, ToolContext, ToolHandler
from codewell.history import tools
from codewell.http.requests import actor_of, runtime_of
from codewell.runtime import Runtime

_LISTS = {"repos", "messageTerms", "authors", "contentTerms", "files", "revisions"}
_INTS = {"count", "first", "limit", "minCommits"}
_BOOLS = {"added", "removed"}


def _args(request: Request, allowed: set[str]) -> dict[str, Any]:
    """Tool arguments from the query string: repeatable list parameters, integers and booleans checked."""
    args: dict[str, Any] = {}
    for key in request.query_params:
        if key not in allowed:
            raise InvalidInput(f"unknown parameter `{key}`", hint=f"allowed: {', '.join(sorted(allowed))}")
        values = request.query_params.getlist(key)
        if key in _LISTS:
            args[key] = values
        elif key in _INTS:
            try:
                args[key] = int(values[-1])
            except ValueError:
                raise InvalidInput(f"`{key}` must be an integer", hint=f"e.g. {key}=10") from None
        elif key in _BOOLS:
            if values[-1] not in {"true", "false"}:
                raise InvalidInput(f"`{key}` must be true or false", hint=f"e.g. {key}=true")
            args[key] = values[-1] == "true"
        else:
            args[key] = values[-1]
    return args


def _endpoint(handler: ToolHandler, allowed: set[str]) -> Any:
    async def endpoint(request: Request) -> Response:
        args = _args(request, allowed)
        ctx = ToolContext(runtime_of(request), actor_of(request), Endpoint.ALL)
        # Git and database work is blocking: run it in a worker thread.
        result = await asyncio.to_thread(handler, ctx, args)
        return JSONResponse(result.structured)

    return endpoint


def routes(runtime: Runtime) -> list[BaseRoute]:
    commit_params = {"repos", "messageTerms", "authors", "contentTerms", "files", "after", "before", "revisions"}
    diff_params = {"pattern", "repos", "added", "removed", "authors", "after", "before", "revisions", "count"}
    return [
        Route("/.api/history/commits", _endpoint(tools.commit_search, {*commit_params, "count"}), methods=["GET"]),
        Route("/.api/history/diffs", _endpoint(tools.diff_search, diff_params), methods=["GET"]),
        Route(
            "/.api/history/compare",
            _endpoint(tools.compare_revisions, {"repo", "base", "head", "first", "after"}),
            methods=["GET"],
        ),
        Route(
            "/.api/history/contributors",
            _endpoint(tools.get_contributor_repos, {"authors", "limit", "minCommits"}),
            methods=["GET"],
        ),
    ]
