"""REST: `GET /.api/nls/search?q=QUESTION` (thin: parse, call NlsService, render like the tool)."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from codewell.analytics.events import FEATURE_SEARCH, track_usage
from codewell.core.errors import InvalidInput
from codewell.http.requests import actor_of, runtime_of
from codewell.nls.render import render
from codewell.nls.service import NlsResults, NlsService
from codewell.runtime import Runtime

__all__ = ["routes"]


def results_json(results: NlsResults) -> dict[str, Any]:
    """The answer's JSON body (also `codewell nls --json`)."""
    return {
        "terms": results.terms,
        "notes": results.notes,
        "results": [
            {
                "repository": h.repo,
                "path": h.path,
                "commit": h.commit,
                "startLine": h.start,
                "endLine": h.end,
                "score": round(h.score, 4),
                "symbols": list(h.symbols),
            }
            for h in results.hits[: results.limit * 3]
        ],
        "text": render(results),
    }


async def search(request: Request) -> JSONResponse:
    query = request.query_params.get("q")
    if query is None:
        raise InvalidInput("missing query parameter q", hint="GET /.api/nls/search?q=where+are+sessions+expired")
    runtime, actor = runtime_of(request), actor_of(request)
    # One usage event per search, like keyword search's REST route.
    with track_usage(runtime, actor, FEATURE_SEARCH, client="rest", endpoint="/.api/nls/search") as usage:
        results = await asyncio.to_thread(runtime.get(NlsService).search, actor, query)
        response = JSONResponse(results_json(results))
        usage.result_bytes = len(response.body)
    return response


def routes(runtime: Runtime) -> list[BaseRoute]:
    """The /.api/nls routes."""
    return [Route("/.api/nls/search", search, methods=["GET"])]
