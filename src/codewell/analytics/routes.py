"""The analytics API under /analytics/api/ (thin: parse, call the analytics services, render CSV or JSON).

Callers authenticate with `Authorization: Bearer <analytics token>` (instance access tokens and sessions
work too); errors use the JSON envelope of every API.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from codewell.analytics.credits import CreditService
from codewell.analytics.service import AnalyticsService, ReportRequest, parse_date, parse_granularity, parse_range
from codewell.analytics.tokens import AnalyticsTokenService
from codewell.authz import Action, ensure
from codewell.core.actors import Actor
from codewell.core.errors import InvalidInput
from codewell.http.requests import actor_of, json_body, runtime_of
from codewell.runtime import Runtime

API = "/analytics/api"
CSV_TYPE = "text/csv; charset=utf-8"


async def require_caller(request: Request) -> Actor:
    """The authenticated caller; Unauthenticated (401) when the request carries no valid credential, then
    what an API gate refuses (licensing: 403 when the plan lacks the analytics API)."""
    actor = actor_of(request)
    ensure(actor, Action.ANALYTICS_API)
    await run_in_threadpool(runtime_of(request).get(AnalyticsService).check_api)
    return actor


async def require_writer(request: Request) -> Actor:
    """A caller allowed to change analytics state: not through an analytics token (those only read)."""
    actor = await require_caller(request)
    ensure(actor, Action.CREDITS_MANAGE)
    return actor


def csv_response(chunks: Iterator[bytes], filename: str) -> StreamingResponse:
    return StreamingResponse(
        chunks,
        media_type=CSV_TYPE,
        headers={"content-disposition": f'attachment; filename="{filename}"', "cache-control": "no-store"},
    )


async def usage_report(request: Request) -> Response:
    actor = await require_caller(request)
    params = request.query_params
    granularity = parse_granularity(params.get("granularity"))
    start, end = parse_range(params.get("startDate"), params.get("endDate"))
    service = runtime_of(request).get(AnalyticsService)
    chunks = await run_in_threadpool(
        service.usage_report, actor, params.get("instanceURL"), ReportRequest(granularity, start, end)
    )
    return csv_response(chunks, f"usage-{granularity.value}.csv")


async def user_registry(request: Request) -> Response:
    actor = await require_caller(request)
    service = runtime_of(request).get(AnalyticsService)
    chunks = await run_in_threadpool(service.user_registry, actor, request.query_params.get("instanceURL"))
    return csv_response(chunks, "user-registry.csv")


async def list_credits(request: Request) -> Response:
    actor = await require_caller(request)
    params = request.query_params
    start, end = parse_range(params.get("startDate"), params.get("endDate"))
    service = runtime_of(request).get(AnalyticsService)
    document = await run_in_threadpool(service.credits, actor, params.get("instanceURL"), start, end)
    return JSONResponse(document)


async def allocate_credits(request: Request) -> Response:
    actor = await require_writer(request)
    body = await json_body(request)
    amount = body.get("amount")
    if isinstance(amount, bool) or not isinstance(amount, int):
        raise InvalidInput("amount must be a whole number", hint='e.g. {"amount": 1000, ...}')
    starts_on = _required_date(body, "startDate")
    ends_on = _required_date(body, "endDate")
    note = body.get("note", "")
    if not isinstance(note, str):
        raise InvalidInput("note must be a string")
    runtime = runtime_of(request)
    bucket = await run_in_threadpool(runtime.get(CreditService).allocate, actor, amount, starts_on, ends_on, note)
    return JSONResponse(bucket.as_json(), status_code=201)


def _required_date(body: dict[str, Any], key: str) -> date:
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise InvalidInput(f"{key} is required (YYYY-MM-DD)")
    parsed = parse_date(key, value)
    assert parsed is not None
    return parsed


def parse_expires_at(value: object) -> datetime | None:
    """`expiresAt` as an aware UTC datetime: ISO 8601 date or date-time (naive means UTC), or null."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidInput("expiresAt must be an ISO 8601 date-time string or null")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"expiresAt is not an ISO 8601 date-time: {value[:40]!r}") from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


async def create_token(request: Request) -> Response:
    actor = await require_caller(request)
    body = await json_body(request)
    name = body.get("displayName", "")
    if not isinstance(name, str):
        raise InvalidInput("displayName must be a string")
    expires_at = parse_expires_at(body.get("expiresAt"))
    tokens = runtime_of(request).get(AnalyticsTokenService)
    raw, info = await run_in_threadpool(tokens.create_token, actor, name, expires_at)
    return JSONResponse(
        {
            "id": str(info.id),
            "displayName": info.display_name,
            "secret": raw,
            "createdAt": info.created_at.isoformat(),
            "expiresAt": info.expires_at.isoformat() if info.expires_at else None,
        },
        status_code=201,
    )


async def list_tokens(request: Request) -> Response:
    actor = await require_caller(request)
    tokens = runtime_of(request).get(AnalyticsTokenService)
    found = await run_in_threadpool(tokens.list_tokens, actor)
    return JSONResponse({"tokens": [t.as_json() for t in found]})


async def revoke_token(request: Request) -> Response:
    actor = await require_caller(request)
    tokens = runtime_of(request).get(AnalyticsTokenService)
    await run_in_threadpool(tokens.revoke, actor, request.path_params["token_id"])
    return Response(status_code=204)


def routes(runtime: Runtime) -> list[BaseRoute]:
    return [
        Route(f"{API}/reports/by-user-client-date", usage_report, methods=["GET"]),
        Route(f"{API}/reports/user-registry", user_registry, methods=["GET"]),
        Route(f"{API}/credits", list_credits, methods=["GET"]),
        Route(f"{API}/credits", allocate_credits, methods=["POST"]),
        Route(f"{API}/service-access-tokens", create_token, methods=["POST"]),
        Route(f"{API}/service-access-tokens", list_tokens, methods=["GET"]),
        Route(f"{API}/service-access-tokens/{{token_id:int}}", revoke_token, methods=["DELETE"]),
    ]
