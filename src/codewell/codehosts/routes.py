"""REST of codehosts (thin): connection status and "sync now" for site admins; each user's own status.

`GET /.api/codehosts` (status of every connection), `POST /.api/codehosts/{id}/sync`,
`POST /.api/codehosts/repos/{name}/sync` (one repository's permissions),
`GET /.api/codehosts/users/{user_id}` and `POST /.api/codehosts/users/{user_id}/sync` (the user or an admin).
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from codewell.codehosts.service import CodeHostService
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


def routes(runtime: Runtime) -> list[BaseRoute]:
    return [
        Route("/.api/codehosts", status, methods=["GET"]),
        Route("/.api/codehosts/users/{user_id}", user_status, methods=["GET"]),
        Route("/.api/codehosts/users/{user_id}/sync", sync_user, methods=["POST"]),
        Route("/.api/codehosts/repos/{name:path}/sync", sync_repo, methods=["POST"]),
        Route("/.api/codehosts/{connection_id}/sync", sync_connection, methods=["POST"]),
    ]
