"""REST API of the evaluator: POST /.api/evaluate with {"script": "..."} (JSON in, JSON out).

The response is the tool's structuredContent: {"ok", "result", "output", "error", "stats"}, status 200 even
when the script failed (the request itself succeeded). Scripts cost CPU, so anonymous callers are refused.
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from codewell.authz import Action, ensure
from codewell.core.errors import InvalidInput
from codewell.evaluator.service import EvaluatorService
from codewell.http.bodies import BodyTooLarge, json_value, size_text
from codewell.http.requests import actor_of, runtime_of
from codewell.runtime import Runtime


async def evaluate(request: Request) -> Response:
    actor = actor_of(request)
    ensure(actor, Action.SCRIPTS_RUN)
    service = runtime_of(request).get(EvaluatorService)
    # Bounded read: the script limit applies to the JSON-escaped script too (at most 6 bytes per byte).
    limit = 6 * service.limits.max_script_bytes + 1024
    refuse = BodyTooLarge(
        f"the request body is larger than the {size_text(limit)} limit of evaluator requests",
        hint=f"scripts are limited to {service.limits.max_script_bytes} bytes",
    )
    body = await json_value(request, limit, refuse=refuse)
    script = body.get("script") if isinstance(body, dict) else None
    if not isinstance(script, str):
        raise InvalidInput("`script` must be a string", hint='send {"script": "return 1"}')
    # The run blocks on a worker process (and on search calls): keep it off the event loop.
    result = await asyncio.to_thread(service.run, actor, script)
    return JSONResponse(result.as_dict())


def routes(runtime: Runtime) -> list[BaseRoute]:
    return [Route("/.api/evaluate", evaluate, methods=["POST"])]
