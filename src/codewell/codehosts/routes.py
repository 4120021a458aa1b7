"""REST of codehosts (thin): connection status and "sync now" for site admins; each user's own status.

`GET /.api/codehosts` (status of every connection), `POST /.api/codehosts/{id}/sync`,
`POST /.api/codehosts/{id}/test` (a probe that changes nothing: token, identity, scopes, repositories visible),
`POST /.api/codehosts/repos/{name}/sync` (one repository's permissions),
`GET /.api/codehosts/users/{user_id}` and `POST /.api/codehosts/users/{user_id}/sync` (the user or an admin).

Push webhooks, anonymous (the host proves itself with the connection's secret, codehosts/webhooks.py):
`POST /.api/webhooks/{github,gitlab,bitbucket-server,bitbucket-cloud,gerrit}`: 200 for a ping, 202 for
everything verified (a sync requested or not alike), 401 unverified, 400 not JSON, 413 over the size limit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from codewell.codehosts.connections import ConnectionService
from codewell.codehosts.metrics import WEBHOOKS
from codewell.codehosts.service import CodeHostService
from codewell.codehosts.webhooks import HOSTS, MAX_BODY_BYTES, WEBHOOKS_PREFIX, Delivery, Event, too_large
from codewell.core.errors import InvalidInput
from codewell.http.requests import actor_of, runtime_of
from codewell.runtime import Runtime


def _service(request: Request) -> CodeHostService:
    return runtime_of(request).get(CodeHostService)


def _user_id(request: Request) -> int:
    value = request.path_params["user_id"]
    if not value.isdigit():
        raise InvalidInput(f"user ID must be a number (got {value!r})")
    return int(value)


async def status(request: Request) -> JSONResponse:
    statuses = await asyncio.to_thread(_service(request).status, actor_of(request))
    return JSONResponse({"connections": [s.as_json() for s in statuses]}, headers={"cache-control": "no-store"})


async def sync_connection(request: Request) -> JSONResponse:
    service, actor = _service(request), actor_of(request)
    report = await asyncio.to_thread(service.sync_connection, actor, request.path_params["connection_id"])
    return JSONResponse(report.as_json())


async def test_connection(request: Request) -> JSONResponse:
    connections, actor = runtime_of(request).get(ConnectionService), actor_of(request)
    probe = await asyncio.to_thread(connections.test, actor, request.path_params["connection_id"])
    return JSONResponse(probe.as_json(), headers={"cache-control": "no-store"})


async def sync_repo(request: Request) -> JSONResponse:
    name = request.path_params["name"]
    synced = await asyncio.to_thread(_service(request).sync_repo_now, actor_of(request), name)
    return JSONResponse({"repo": name, "synced": bool(synced)})


async def user_status(request: Request) -> JSONResponse:
    items = await asyncio.to_thread(_service(request).user_status, actor_of(request), _user_id(request))
    return JSONResponse({"connections": [i.as_json() | {"summary": i.summary} for i in items]})


async def sync_user(request: Request) -> JSONResponse:
    items = await asyncio.to_thread(_service(request).sync_user_now, actor_of(request), _user_id(request))
    return JSONResponse({"connections": [i.as_json() | {"summary": i.summary} for i in items]})


async def _bounded_body(request: Request, host: str) -> bytes:
    """The body, refused (413) as soon as it passes the limit: anyone may post here, so it is never held whole."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        WEBHOOKS.labels(host, "too_large").inc()
        raise too_large(MAX_BODY_BYTES)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            WEBHOOKS.labels(host, "too_large").inc()
            raise too_large(MAX_BODY_BYTES)
        chunks.append(chunk)
    return b"".join(chunks)


def webhook(host: str) -> Callable[[Request], Awaitable[JSONResponse]]:
    async def receive(request: Request) -> JSONResponse:
        body = await _bounded_body(request, host)
        delivery = Delivery(dict(request.headers), dict(request.query_params), body)
        event = await asyncio.to_thread(_service(request).receive_webhook, host, delivery)
        if event is Event.PING:
            return JSONResponse({"event": "ping"})
        return JSONResponse({"status": "accepted"}, status_code=202)

    return receive


def routes(runtime: Runtime) -> list[BaseRoute]:
    return [
        *[Route(f"{WEBHOOKS_PREFIX}/{host}", webhook(host), methods=["POST"]) for host in HOSTS],
        Route("/.api/codehosts", status, methods=["GET"]),
        Route("/.api/codehosts/users/{user_id}", user_status, methods=["GET"]),
        Route("/.api/codehosts/users/{user_id}/sync", sync_user, methods=["POST"]),
        Route("/.api/codehosts/repos/{name:path}/sync", sync_repo, methods=["POST"]),
        Route("/.api/codehosts/{connection_id}/sync", sync_connection, methods=["POST"]),
        Route("/.api/codehosts/{connection_id}/test", test_connection, methods=["POST"]),
    ]
