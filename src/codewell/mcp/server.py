"""The MCP servers: one low-level SDK `Server` per endpoint over the one registry, and the tool-call pipeline.

Per call: look the tool up in the endpoint's live view (site config read per request), validate arguments
against its schema, run the sync handler in a worker thread, map codewell errors to `isError` results, hold
the output under the budget, and record a usage event. A storage fault is no tool error: it leaves the call as
`StorageUnavailable` and the gate answers the HTTP request 503 with `Retry-After` (codewell.mcp.http).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

import anyio.to_thread
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from starlette.requests import Request

import codewell
from codewell.analytics.events import UsageEvent, record_usage
from codewell.core.actors import Actor
from codewell.core.errors import CodewellError, InvalidInput, StorageUnavailable
from codewell.core.logging import request_id_var
from codewell.core.storage import storage_error
from codewell.core.tools import Endpoint, ToolContext
from codewell.http.requests import actor_of
from codewell.mcp.registry import ToolRegistry
from codewell.mcp.results import WireResult, error_message, error_result, success_result
from codewell.runtime import Runtime

log = logging.getLogger(__name__)

SERVER_NAME = "codewell"
# The request-state attribute where a tool call that met a storage fault leaves it for the gate (mcp/http.py).
STORAGE_FAULT = "mcp_storage_fault"
INSTRUCTIONS = {
    Endpoint.CORE: (
        "codewell code intelligence: search code, browse repositories and files, search history, and read "
        "deep search conversations. Results only include repositories the user may read."
    ),
    Endpoint.ALL: "codewell code intelligence: the full tool set (search, browsing, navigation, history, agents).",
    Endpoint.DEEPSEARCH: "codewell deep search: ask a research question and read the answer when it is ready.",
}


def client_name(ctx: ServerRequestContext[Any, Any], request: Request | None) -> str:
    """`name/version` from the MCP client info when the client sent it, else the User-Agent."""
    params = ctx.session.client_params
    info = params.client_info if params is not None else None
    if info is not None and info.name:
        return f"{info.name}/{info.version}" if info.version else info.name
    if request is not None:
        return request.headers.get("user-agent", "")[:200]
    return ""


class ToolCaller:
    """The transport-independent part of a tool call (also what the benchmark measures against)."""

    def __init__(self, runtime: Runtime, registry: ToolRegistry) -> None:
        self.runtime = runtime
        self.registry = registry

    def list_tools(self, endpoint: Endpoint) -> list[types.Tool]:
        config = self.runtime.config
        return [
            types.Tool(
                name=t.spec.name,
                description=t.spec.description,
                input_schema=dict(t.spec.input_schema),
                output_schema=dict(t.spec.output_schema) if t.spec.output_schema else None,
            )
            for t in self.registry.tools_for(endpoint, config, self.runtime)
        ]

    def reject_unknown(self, endpoint: Endpoint, name: str) -> bool:
        """True when `name` is not a tool of this endpoint at all (a protocol error, not a tool error)."""
        tool = self.registry.get(name)
        if tool is None:
            return True
        if name in self.runtime.config.mcp_tools_disabled:
            return False  # answered with an isError result naming the switch
        return not self.registry.offered(name, endpoint, self.runtime.config, self.runtime)

    def call(
        self, endpoint: Endpoint, actor: Actor, name: str, arguments: dict[str, Any] | None
    ) -> tuple[WireResult, str, str]:
        """Run one call synchronously; return (wire result, error code or "", language). Raises only
        `StorageUnavailable` (a storage fault: answered 503 by the gate, not as the tool's result)."""
        if name in self.runtime.config.mcp_tools_disabled:
            message = (
                f"tool {name} is disabled on this instance by the site configuration option mcp.tools.disabled; "
                "ask a site administrator to remove it from that list"
            )
            return error_result(message), "disabled", ""
        tool = self.registry.get(name)
        assert tool is not None
        try:
            args = tool.validator.validate(arguments)
            result = tool.spec.handler(ToolContext(self.runtime, actor, endpoint), args)
        except InvalidInput as exc:
            return error_result(error_message(exc)), "invalid_input", ""
        except StorageUnavailable:
            raise
        except CodewellError as exc:
            if exc.http_status >= 500:
                log.error("tool %s failed: %s", name, exc.message)
            return error_result(error_message(exc)), exc.code, ""
        except Exception as exc:
            fault = storage_error(exc, self.runtime.settings.data_dir) if isinstance(exc, OSError) else None
            if fault is not None:  # a read-only, full or unwritable data directory under the tool
                raise fault from None
            log.exception("tool %s crashed", name)
            request_id = request_id_var.get()
            return error_result(f"internal error in tool {name} (request ID {request_id})"), "internal", ""
        wire = success_result(name, result, tool.spec.input_schema)
        return wire, ("tool_error" if result.is_error else ""), result.language


class UnknownTool(Exception):
    """The tool is not offered on this endpoint: a JSON-RPC error (-32602), not a tool result."""

    def __init__(self, endpoint: Endpoint, name: str) -> None:
        super().__init__(f"Unknown tool: {name}; tools/list on {endpoint.value} lists the available tools")
        self.message = str(self)


def run_call(
    runtime: Runtime,
    caller: ToolCaller,
    endpoint: Endpoint,
    actor: Actor,
    client: str,
    name: str,
    arguments: dict[str, Any] | None,
) -> WireResult:
    """One tools/call from either transport path, in the calling (worker) thread, and its usage event.
    UnknownTool when the endpoint offers no such tool; StorageUnavailable as `ToolCaller.call`."""
    if caller.reject_unknown(endpoint, name):
        raise UnknownTool(endpoint, name)
    actor = dataclasses.replace(actor, client=client)
    started = time.perf_counter()
    wire, error, language = caller.call(endpoint, actor, name, arguments)
    record_usage(
        runtime,
        UsageEvent(
            user_id=actor.user_id,
            client=client,
            feature="mcp",
            tool=name,
            endpoint=endpoint.value,
            duration_ms=round((time.perf_counter() - started) * 1000),
            result_bytes=wire.size,
            error=error,
            language=language,
        ),
    )
    return wire


async def execute(
    runtime: Runtime,
    caller: ToolCaller,
    endpoint: Endpoint,
    actor: Actor,
    client: str,
    name: str,
    arguments: dict[str, Any] | None,
) -> WireResult:
    """`run_call` in a worker thread (the SDK path; the fast path runs it in the gate's own hop)."""
    return await anyio.to_thread.run_sync(run_call, runtime, caller, endpoint, actor, client, name, arguments)


def build_server(runtime: Runtime, caller: ToolCaller, endpoint: Endpoint) -> Server[Any]:
    """A low-level SDK server for one endpoint; handlers read the caller from the HTTP request."""

    async def on_list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=caller.list_tools(endpoint))

    async def on_call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        request = ctx.request if isinstance(ctx.request, Request) else None
        actor = actor_of(request) if request is not None else None
        if actor is None or actor.is_anonymous:  # the HTTP gate guarantees this never happens
            raise MCPError(code=types.INVALID_REQUEST, message="not authenticated")
        try:
            wire = await execute(
                runtime, caller, endpoint, actor, client_name(ctx, request), params.name, params.arguments
            )
        except UnknownTool as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=exc.message) from None
        except StorageUnavailable as exc:
            # The SDK would write this as a JSON-RPC error inside 200; the gate, which holds the response's start
            # until its first bytes, finds the fault here and answers 503 with Retry-After instead.
            if request is not None:
                setattr(request.state, STORAGE_FAULT, exc)
            raise MCPError(code=types.INTERNAL_ERROR, message=exc.message) from None
        return wire.result

    server: Server[Any] = Server(
        SERVER_NAME,
        version=codewell.__version__,
        instructions=INSTRUCTIONS[endpoint],
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )
    # No OpenTelemetry exporter is configured; skip the per-message span bookkeeping.
    server.middleware = []
    return server
