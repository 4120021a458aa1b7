"""REST of deep search (thin: parse, one AgentService call, render like the tools), under /.api/deepsearch:

- `POST /.api/deepsearch` `{"question": "..."}` → 201, the new conversation (answered in the background);
- `GET /.api/deepsearch` → the caller's conversations (`?limit=`, default 50);
- `GET /.api/deepsearch/{token}` → one conversation by read token or shared token (JSON with `text`, the
  deepsearch_read rendering);
- `POST /.api/deepsearch/{token}/questions` `{"question": "..."}` → a follow-up (409 while one is open);
- `POST /.api/deepsearch/{token}/cancel`, `DELETE /.api/deepsearch/{token}`;
- `POST /.api/deepsearch/{token}/share`, `POST /.api/deepsearch/{token}/reset-share` → `shareURL`.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from codewell.agents.render import conversation_json
from codewell.agents.service import AgentService
from codewell.analytics.events import FEATURE_DEEPSEARCH, track_usage
from codewell.core.errors import InvalidInput
from codewell.http.requests import actor_of, json_body, runtime_of
from codewell.runtime import Runtime

NO_STORE = {"cache-control": "no-store"}


def _service(request: Request) -> AgentService:
    return runtime_of(request).get(AgentService)


async def _question(request: Request) -> str:
    question = (await json_body(request)).get("question")
    if not isinstance(question, str):
        raise InvalidInput("`question` is required and must be a string", hint='send {"question": "..."}')
    return question


async def create(request: Request) -> Response:
    question = await _question(request)
    runtime, actor = runtime_of(request), actor_of(request)
    # One usage event per deep search started (the MCP tool's calls are recorded by the tool server).
    with track_usage(runtime, actor, FEATURE_DEEPSEARCH, client="rest", endpoint="/.api/deepsearch") as usage:
        view = await run_in_threadpool(runtime.get(AgentService).deepsearch, actor, question)
        response = JSONResponse(conversation_json(view), status_code=201, headers=NO_STORE)
        usage.result_bytes = len(response.body)
    return response


async def list_conversations(request: Request) -> Response:
    raw = request.query_params.get("limit", "50")
    if not raw.isdigit():
        raise InvalidInput("limit must be a whole number between 1 and 500")
    views = await run_in_threadpool(_service(request).list, actor_of(request), int(raw))
    return JSONResponse({"conversations": [conversation_json(v, with_text=False) for v in views]}, headers=NO_STORE)


async def read(request: Request) -> Response:
    view = await run_in_threadpool(_service(request).read, actor_of(request), request.path_params["token"])
    return JSONResponse(conversation_json(view), headers=NO_STORE)


async def follow_up(request: Request) -> Response:
    question = await _question(request)
    view = await run_in_threadpool(
        _service(request).follow_up, actor_of(request), request.path_params["token"], question
    )
    return JSONResponse(conversation_json(view), status_code=201, headers=NO_STORE)


async def cancel(request: Request) -> Response:
    view = await run_in_threadpool(_service(request).cancel, actor_of(request), request.path_params["token"])
    return JSONResponse(conversation_json(view), headers=NO_STORE)


async def delete(request: Request) -> Response:
    await run_in_threadpool(_service(request).delete, actor_of(request), request.path_params["token"])
    return Response(status_code=204)


async def share(request: Request) -> Response:
    view = await run_in_threadpool(_service(request).share, actor_of(request), request.path_params["token"])
    return JSONResponse({"shareURL": view.share_url}, headers=NO_STORE)


async def reset_share(request: Request) -> Response:
    view = await run_in_threadpool(_service(request).reset_share, actor_of(request), request.path_params["token"])
    return JSONResponse({"shareURL": view.share_url}, headers=NO_STORE)


def routes(runtime: Runtime) -> list[BaseRoute]:
    return [
        Route("/.api/deepsearch", create, methods=["POST"]),
        Route("/.api/deepsearch", list_conversations, methods=["GET"]),
        Route("/.api/deepsearch/{token}", read, methods=["GET"]),
        Route("/.api/deepsearch/{token}", delete, methods=["DELETE"]),
        Route("/.api/deepsearch/{token}/questions", follow_up, methods=["POST"]),
        Route("/.api/deepsearch/{token}/cancel", cancel, methods=["POST"]),
        Route("/.api/deepsearch/{token}/share", share, methods=["POST"]),
        Route("/.api/deepsearch/{token}/reset-share", reset_share, methods=["POST"]),
    ]
