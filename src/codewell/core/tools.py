"""The contract between capabilities and the MCP server: a tool is a spec plus a thin handler.

Each capability exposes `TOOLS: list[ToolSpec]` in its `tools.py`; the MCP registry collects them.
Handlers parse arguments, call the capability's service with the acting user, and render text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from codewell.core.actors import Actor
    from codewell.runtime import Runtime


class Endpoint(StrEnum):
    """The three MCP endpoints of the spec's availability table."""

    CORE = "/.api/mcp"
    ALL = "/.api/mcp/all"
    DEEPSEARCH = "/.api/mcp/deepsearch"


@dataclass(frozen=True, slots=True)
class ToolContext:
    runtime: Runtime
    actor: Actor
    endpoint: Endpoint


@dataclass(frozen=True, slots=True)
class ToolResult:
    """Rendered plain text (what agents read) plus the same data as structured JSON."""

    text: str
    structured: Mapping[str, Any] | None = None
    is_error: bool = False
    # Programming language of the files concerned, when there is one (for usage analytics).
    language: str = ""


ToolHandler = Callable[[ToolContext, dict[str, Any]], ToolResult]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    # JSON Schema draft 2020-12 with "additionalProperties": false.
    input_schema: Mapping[str, Any]
    handler: ToolHandler
    endpoints: frozenset[Endpoint] = field(default_factory=frozenset)
    # Optional JSON Schema of structuredContent.
    output_schema: Mapping[str, Any] | None = None
