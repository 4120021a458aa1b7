"""Pages of the analytics interface: analytics access tokens (every user) and credit buckets (site admins)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from codewell.analytics.credits import CreditService
from codewell.analytics.service import AnalyticsService, parse_date
from codewell.analytics.tokens import AnalyticsTokenService
from codewell.authz import Action
from codewell.core.actors import Actor
from codewell.core.errors import CodewellError, InvalidInput
from codewell.http.csrf import verify_form
from codewell.http.guards import require, require_actor
from codewell.http.requests import form_expiry_days, form_text, runtime_of
from codewell.http.templates import render
from codewell.runtime import Runtime

EXPIRY_DAYS = (30, 90, 365)


def _tokens_context(runtime: Runtime, actor: Actor) -> dict[str, Any]:
    return {
        "tokens": runtime.get(AnalyticsTokenService).list_tokens(actor),
        "expiry_days": EXPIRY_DAYS,
        "instance_host": runtime.get(AnalyticsService).instance_host(),
        "new_token": "",
        "error": "",
    }


async def tokens_page(request: Request) -> Response:
    actor = require_actor(request)
    context = await run_in_threadpool(_tokens_context, runtime_of(request), actor)
    return render(request, "analytics/tokens.html", **context)


async def create_token_page(request: Request) -> Response:
    actor = require_actor(request)
    runtime = runtime_of(request)
    form = await request.form()
    verify_form(request, form)

    def create() -> str:
        days = form_expiry_days(form)
        expires_at = None if days is None else datetime.now(UTC) + timedelta(days=days)
        raw, _ = runtime.get(AnalyticsTokenService).create_token(actor, form_text(form, "displayName"), expires_at)
        return raw

    new_token, error, status = "", "", 201
    try:
        new_token = await run_in_threadpool(create)
    except CodewellError as exc:
        error, status = exc.message, exc.http_status
    context = await run_in_threadpool(_tokens_context, runtime, actor)
    context.update(new_token=new_token, error=error)
    return render(request, "analytics/tokens.html", status_code=status, **context)


async def revoke_token_page(request: Request) -> Response:
    actor = require_actor(request)
    form = await request.form()
    verify_form(request, form)
    tokens = runtime_of(request).get(AnalyticsTokenService)
    await run_in_threadpool(tokens.revoke, actor, request.path_params["token_id"])
    return RedirectResponse("/analytics/tokens", status_code=303)


async def credits_page(request: Request) -> Response:
    actor = require(request, Action.CREDITS_MANAGE)
    runtime = runtime_of(request)
    buckets = await run_in_threadpool(runtime.get(CreditService).list_buckets, actor)
    return render(request, "analytics/credits.html", buckets=buckets, notice="", error="")


async def allocate_page(request: Request) -> Response:
    actor = require(request, Action.CREDITS_MANAGE)
    runtime = runtime_of(request)
    form = await request.form()
    verify_form(request, form)
    credits = runtime.get(CreditService)

    def allocate() -> str:
        amount = form_text(form, "amount")
        if not amount.isdigit():
            raise InvalidInput("amount must be a whole number")
        start = parse_date("startDate", form_text(form, "startDate"))
        end = parse_date("endDate", form_text(form, "endDate"))
        if start is None or end is None:
            raise InvalidInput("the active period needs a start and an end date")
        bucket = credits.allocate(actor, int(amount), start, end, form_text(form, "note"))
        return f"Allocated {bucket.amount} credits from {bucket.starts_on} to {bucket.ends_on}."

    notice, error, status = "", "", 201
    try:
        notice = await run_in_threadpool(allocate)
    except CodewellError as exc:
        error, status = exc.message, exc.http_status
    buckets = await run_in_threadpool(credits.list_buckets, actor)
    return render(request, "analytics/credits.html", status_code=status, buckets=buckets, notice=notice, error=error)


def routes(runtime: Runtime) -> list[BaseRoute]:
    return [
        Route("/analytics/tokens", tokens_page, methods=["GET"]),
        Route("/analytics/tokens", create_token_page, methods=["POST"]),
        Route("/analytics/tokens/{token_id:int}/revoke", revoke_token_page, methods=["POST"]),
        Route("/analytics/credits", credits_page, methods=["GET"]),
        Route("/analytics/credits", allocate_page, methods=["POST"]),
    ]
