"""REST API of the history capability (JSON; the same data as the MCP tools' structuredContent).

GET /.api/history/commits       commit_search   (repos, messageTerms, authors, contentTerms, files, after,
                                                 before, revisions: repeatable; count)
GET /.api/history/diffs         diff_search     (pattern, repos, authors, revisions: repeatable; added, removed,
                                                 after, before, count)
GET /.api/history/compare       compare_revisions (repo, base, head, first, after)
GET /.api/history/contributors  get_contributor_repos (authors: repeatable; limit, minCommits)

Thin: parse the query string, call HistoryService as the request's actor, render with history.render.
The service checks every value (ranges, lengths); compare pages are not cut to the MCP output budget.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from codewell.core.actors import Actor
from codewell.core.errors import InvalidInput
from codewell.history import compare_page, render, wire
from codewell.history.service import HistoryService
from codewell.http.requests import actor_of, runtime_of
from codewell.runtime import Runtime

_LISTS = {"repos", "messageTerms", "authors", "contentTerms", "files", "revisions"}
_INTS = {"count", "first", "limit", "minCommits"}
_BOOLS = {"added", "removed"}

# (runtime, actor, parsed arguments) -> JSON body; runs in a worker thread.
Answer = Callable[[Runtime, Actor, dict[str, Any]], dict[str, Any]]


def _args(request: Request, allowed: set[str]) -> dict[str, Any]:
    """Arguments from the query string: repeatable list parameters, integers and booleans checked."""
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


def _commits(runtime: Runtime, actor: Actor, args: dict[str, Any]) -> dict[str, Any]:
    result = wire.commit_search(runtime.get(HistoryService), actor, args)
    return render.commits_json(result, runtime.external_url, render.query_text(args, render.COMMIT_QUERY))


def _diffs(runtime: Runtime, actor: Actor, args: dict[str, Any]) -> dict[str, Any]:
    result = wire.diff_search(runtime.get(HistoryService), actor, args)
    return render.diffs_json(result, runtime.external_url, render.query_text(args, render.DIFF_QUERY))


def _compare(runtime: Runtime, actor: Actor, args: dict[str, Any]) -> dict[str, Any]:
    comparison = wire.compare(runtime.get(HistoryService), actor, args)
    return compare_page.comparison_json(comparison, runtime.external_url)


def _contributors(runtime: Runtime, actor: Actor, args: dict[str, Any]) -> dict[str, Any]:
    return render.contributors_json(wire.contributor_repos(runtime.get(HistoryService), actor, args))


def _endpoint(answer: Answer, allowed: set[str]) -> Any:
    async def endpoint(request: Request) -> Response:
        args = _args(request, allowed)
        # Git and database work is blocking: run it in a worker thread.
        body = await asyncio.to_thread(answer, runtime_of(request), actor_of(request), args)
        return JSONResponse(body)

    return endpoint


def routes(runtime: Runtime) -> list[BaseRoute]:
    diff_params = {*render.DIFF_QUERY, "count"}
    return [
        Route("/.api/history/commits", _endpoint(_commits, {*render.COMMIT_QUERY, "count"}), methods=["GET"]),
        Route("/.api/history/diffs", _endpoint(_diffs, diff_params), methods=["GET"]),
        Route(
            "/.api/history/compare", _endpoint(_compare, {"repo", "base", "head", "first", "after"}), methods=["GET"]
        ),
        Route(
            "/.api/history/contributors",
            _endpoint(_contributors, {"authors", "limit", "minCommits"}),
            methods=["GET"],
        ),
    ]
