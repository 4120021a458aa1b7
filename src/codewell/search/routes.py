"""REST: `GET /.api/search?q=...&count=N` and index status (thin: parse, call SearchService, render)."""

from __future__ import annotations

import asyncio

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from codewell.analytics.events import FEATURE_SEARCH, track_usage
from codewell.core.errors import InvalidInput
from codewell.http.requests import actor_of, runtime_of
from codewell.runtime import Runtime
from codewell.search.render import render_results, status_json
from codewell.search.searcher import gc_paused
from codewell.search.service import SearchService

__all__ = ["routes"]


def _count(request: Request) -> int | None:
    raw = request.query_params.get("count")
    if raw is None or raw == "":
        return None
    if not raw.isdigit() or int(raw) <= 0:
        raise InvalidInput(f"count must be a positive number (got {raw!r})", hint="e.g. ?count=100")
    return int(raw)


async def search(request: Request) -> Response:
    query = request.query_params.get("q")
    if query is None:
        raise InvalidInput("missing query parameter q", hint="GET /.api/search?q=mutex_lock")
    runtime, actor = runtime_of(request), actor_of(request)
    # One usage event per search, like a keyword_search tool call (a failed search records its error code).
    with track_usage(runtime, actor, FEATURE_SEARCH, client="rest", endpoint="/.api/search") as usage:
        service = runtime.get(SearchService)
        count, as_text = _count(request), request.query_params.get("format") == "text"

        def build() -> tuple[Response, str]:
            results = service.search(actor, query, count=count)
            # A cluster's files go out as the replicas encoded them (search/wire.py: frames).
            body = results.to_json(fragments=True)
            if as_text:
                body["text"] = render_results(results, query).text
            # orjson: the standard library's encoder took ~10 % of a clustered search's time on the web tier.
            encoded = Response(orjson.dumps(body), media_type="application/json")
            return encoded, results.files[0].language if results.files else ""

        def answer() -> tuple[Response, str]:
            # The answer is built and encoded in the worker thread too: a count:all of hundreds of thousands of
            # lines takes seconds to turn into JSON, which must not hold the event loop (every other request).
            # No cyclic collection until the results are encoded and freed (searcher.py `gc_paused`): one that
            # starts while they live walks every file of them (~0.3 ms of a clustered count:all of 382 files).
            with gc_paused():
                return build()

        response, usage.language = await asyncio.to_thread(answer)
        usage.result_bytes = len(response.body)
    return response


async def index_status(request: Request) -> JSONResponse:
    service = runtime_of(request).get(SearchService)
    name = request.query_params.get("repo") or None
    statuses = await asyncio.to_thread(service.status, actor_of(request), name)
    return JSONResponse({"repositories": [status_json(s) for s in statuses]})


def routes(runtime: Runtime) -> list[BaseRoute]:
    """The /.api/search routes."""
    return [
        Route("/.api/search", search, methods=["GET"]),
        Route("/.api/search/status", index_status, methods=["GET"]),
    ]
