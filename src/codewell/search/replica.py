"""`codewell searcher`: a searcher replica of a cluster (CODEWELL_SEARCHERS=database).

It holds the search shards, natural-language indexes and symbol tables of its share of the repositories
(rendezvous hashing over the live replicas, jobs/placement.py), builds them itself (the jobs placed on it:
index, merge, symbols, nls chunks, rebalance), and answers the web tier's searches over an internal HTTP API
on its own port. That API accepts only the internal credential (derived from the instance secret every process
shares) and the public app never accepts it: the two are different applications on different ports.

Its membership is its `job_workers` row (name, address, heartbeat every 2 s); `codewell searcher drain NAME`
marks it draining, and its repositories move to the others while it keeps answering for them.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import orjson
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from codewell.core.errors import CodewellError
from codewell.search.cluster import INTERNAL_PREFIX, internal_token
from codewell.search.service import SearchService
from codewell.search.wire import (
    FRAME_VERSION,
    FRAMED_MEDIA_TYPE,
    decode_actor,
    decode_ids,
    encode_ids,
    encode_results,
    encode_status,
    frame_results,
)

if TYPE_CHECKING:
    from codewell.runtime import Runtime

log = logging.getLogger(__name__)

__all__ = ["ReplicaCall", "replica_app"]

# Bodies the web tier sends are small (a query, an actor, a bitmap of ids): anything bigger is not from it.
MAX_BODY_BYTES = 4 << 20

# An internal call another capability serves on the replica (nls registers `/nls`): body → JSON-able answer.
ReplicaCall = Callable[[dict[str, Any]], dict[str, Any]]
# An answer already encoded (a framed search answer, search/wire.py).
Encoded = tuple[bytes, str]


def replica_app(runtime: Runtime, name: str, calls: dict[str, ReplicaCall] | None = None) -> Starlette:
    """The internal API of the replica `name`: health, search, holdings, and `calls` from other capabilities."""
    service = runtime.get(SearchService)
    expected = f"Bearer {internal_token(runtime.secret_key())}".encode()

    def authorized(
        handler: Callable[[dict[str, Any]], dict[str, Any] | Encoded],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            given = request.headers.get("authorization", "").encode()
            if not hmac.compare_digest(given, expected):
                return JSONResponse({"error": "the internal credential is required"}, status_code=401)
            raw = await request.body()
            if len(raw) > MAX_BODY_BYTES:
                return JSONResponse({"error": "body too large"}, status_code=413)
            try:
                body = orjson.loads(raw)
                if not isinstance(body, dict):
                    raise TypeError("not an object")
                answer = await run_in_threadpool(handler, body)
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                return JSONResponse({"error": f"bad request: {exc}"}, status_code=400)
            except CodewellError as exc:
                return JSONResponse({"error": exc.message}, status_code=400)
            if isinstance(answer, tuple):
                return Response(answer[0], media_type=answer[1])
            return Response(orjson.dumps(answer), media_type="application/json")

        return endpoint

    def search(body: dict[str, Any]) -> dict[str, Any] | Encoded:
        actor = decode_actor(body["actor"])
        count = body.get("count")
        timeout = body.get("timeout")
        readable = body.get("readable")
        results = service.search(
            actor,
            str(body["query"]),
            count=int(count) if count is not None else None,
            timeout=float(timeout) if timeout is not None else None,
            # Decided by the web tier for this actor: N replicas need not ask the database N more times.
            readable=frozenset(decode_ids(str(readable)).tolist()) if readable is not None else None,
            ranked=bool(body.get("rank", True)),
        )
        ids, names = service.held(searched=True)
        if body.get("frame") == FRAME_VERSION:
            return frame_results(results, names, ids), FRAMED_MEDIA_TYPE
        return encode_results(results, names, ids)

    def status(body: dict[str, Any]) -> dict[str, Any]:
        name = body.get("name")
        found = service.status(decode_actor(body["actor"]), str(name) if name else None)
        return {"statuses": [encode_status(s) for s in found]}

    def holdings(body: dict[str, Any]) -> dict[str, Any]:
        asked = decode_ids(str(body.get("ids", "")))
        ids, _names = service.held()
        return {"held": encode_ids(rid for rid in asked.tolist() if rid in ids)}

    async def healthz(_request: Request) -> Response:
        # Unauthenticated (a readiness probe): only the replica's name and how many repositories it holds.
        ids, _names = await run_in_threadpool(service.held)
        return JSONResponse({"name": name, "held": len(ids)})

    routes = [
        Route(INTERNAL_PREFIX + "/healthz", healthz, methods=["GET"]),
        Route(INTERNAL_PREFIX + "/search", authorized(search), methods=["POST"]),
        Route(INTERNAL_PREFIX + "/holdings", authorized(holdings), methods=["POST"]),
        Route(INTERNAL_PREFIX + "/status", authorized(status), methods=["POST"]),
    ]
    routes.extend(
        Route(INTERNAL_PREFIX + path, authorized(call), methods=["POST"]) for path, call in (calls or {}).items()
    )
    return Starlette(routes=routes)
