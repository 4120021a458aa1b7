"""Tool specs used by the MCP tests: small, deterministic, covering each endpoint membership and error path."""

from __future__ import annotations

from typing import Any

from codewell.core.errors import NotFound
from codewell.core.tools import Endpoint, ToolContext, ToolResult, ToolSpec

ALL_ENDPOINTS = frozenset(Endpoint)


def schema(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": properties,
        "required": required or [],
        "additionalProperties": False,
    }


def _echo(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    return ToolResult(text=f"echo: {args['message']}", structured={"message": args["message"]})


def _whoami(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    return ToolResult(
        text=f"{ctx.actor.username} via {ctx.actor.via} client={ctx.actor.client} endpoint={ctx.endpoint.value}",
        language="Go",
    )


def _big(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    start = args.get("startLine", 1)
    lines = [f"{n}: {'x' * 90}" for n in range(start, 5001)]
    return ToolResult(text="\n".join(lines), structured={"lines": lines})


def _missing(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    raise NotFound(f"repository {args['repo']} not found", hint="list_repos shows the repositories you can read")


def _crash(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    raise RuntimeError("secret internal detail")


def _named(name: str) -> Any:
    def handler(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        return ToolResult(text=f"{name} ran")

    return handler


ECHO = ToolSpec(
    "echo",
    'Echo a message. Example: {"message": "hi"}',
    schema({"message": {"type": "string", "minLength": 1}, "times": {"type": "integer", "minimum": 1}}, ["message"]),
    _echo,
    ALL_ENDPOINTS,
)
WHOAMI = ToolSpec("whoami", "Who is calling.", schema({}), _whoami, ALL_ENDPOINTS)
BIG = ToolSpec(
    "big_file",
    "A long numbered file.",
    schema({"startLine": {"type": "integer", "minimum": 1}}),
    _big,
    frozenset({Endpoint.CORE, Endpoint.ALL}),
)
MISSING = ToolSpec(
    "missing_repo", "Always not found.", schema({"repo": {"type": "string"}}, ["repo"]), _missing, ALL_ENDPOINTS
)
CRASH = ToolSpec("crash", "Always crashes.", schema({}), _crash, ALL_ENDPOINTS)
ALL_ONLY = ToolSpec("list_refs_like", "Only on /all.", schema({}), _named("list_refs_like"), frozenset({Endpoint.ALL}))
NLS = ToolSpec("nls_search", "Natural-language search.", schema({}), _named("nls_search"), frozenset({Endpoint.ALL}))
CODE_FINDER = ToolSpec(
    "code_finder", "Find code.", schema({}), _named("code_finder"), frozenset({Endpoint.CORE, Endpoint.ALL})
)
DEEP = ToolSpec(
    "deepsearch", "Deep search.", schema({}), _named("deepsearch"), frozenset({Endpoint.ALL, Endpoint.DEEPSEARCH})
)

TEST_TOOLS = [ECHO, WHOAMI, BIG, MISSING, CRASH, ALL_ONLY, NLS, CODE_FINDER, DEEP]
