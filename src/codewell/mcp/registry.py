"""One tool registry for the three MCP endpoints.

Tools come from the declared capabilities (`Capability.tools`, handed to the runtime by the composition
root). The registry answers "which tools does this endpoint offer under this site configuration right now" (the spec's
availability table, `mcp.tools.disabled`, and the `nls_search` fallback rule on /.api/mcp).

A capability may also declare `tool_available: Mapping[str, Callable[[Runtime], bool]]` for tools that can be
registered but temporarily unavailable (e.g. `code_finder` without a configured model).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from codewell.config import SiteConfig
from codewell.core.errors import ConfigError
from codewell.core.tools import Endpoint, ToolSpec
from codewell.mcp.validation import ArgumentValidator

if TYPE_CHECKING:
    from codewell.runtime import Runtime

log = logging.getLogger(__name__)

# The spec: on /.api/mcp, nls_search is the fallback when code_finder is unavailable or disabled.
FALLBACK_TOOL = "nls_search"
PRIMARY_TOOL = "code_finder"

Availability = Callable[["Runtime"], bool]


@dataclass(frozen=True, slots=True)
class RegisteredTool:
    spec: ToolSpec
    validator: ArgumentValidator


def check_schema(spec: ToolSpec) -> None:
    """Raise ConfigError unless the tool's input schema is a valid draft 2020-12 object schema without extras."""
    schema = spec.input_schema
    try:
        Draft202012Validator.check_schema(dict(schema))
    except SchemaError as exc:
        raise ConfigError(f"tool {spec.name}: invalid input schema: {exc.message}") from None
    if schema.get("type") != "object" or schema.get("additionalProperties") is not False:
        raise ConfigError(f"tool {spec.name}: input schema must be an object schema with additionalProperties: false")


class ToolRegistry:
    """Every registered tool, validated once; per-request views are computed from the live site config."""

    def __init__(self, specs: Iterable[ToolSpec], available: Mapping[str, Availability] | None = None) -> None:
        self._tools: dict[str, RegisteredTool] = {}
        for spec in specs:
            if spec.name in self._tools:
                raise ConfigError(f"tool {spec.name} is registered twice")
            check_schema(spec)
            self._tools[spec.name] = RegisteredTool(spec, ArgumentValidator(spec.name, spec.input_schema))
        self._available = dict(available or {})

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        specs: list[ToolSpec] = []
        available: dict[str, Availability] = {}
        for capability in runtime.capabilities:
            specs.extend(capability.tools)
            available.update(capability.tool_available)
        return cls(specs, available)

    @property
    def names(self) -> list[str]:
        return sorted(self._tools)

    def get(self, name: str) -> RegisteredTool | None:
        return self._tools.get(name)

    def is_available(self, runtime: Runtime, name: str) -> bool:
        """Registered and (when the capability says so) currently usable; a failing check counts as unavailable."""
        if name not in self._tools:
            return False
        check = self._available.get(name)
        if check is None:
            return True
        try:
            return bool(check(runtime))
        except Exception:
            log.warning("availability check of tool %s failed", name, exc_info=True)
            return False

    def offered(self, name: str, endpoint: Endpoint, config: SiteConfig, runtime: Runtime) -> bool:
        """Whether `endpoint` offers tool `name` under `config` (disabled tools are offered nowhere)."""
        tool = self._tools.get(name)
        if tool is None or name in config.mcp_tools_disabled:
            return False
        if endpoint in tool.spec.endpoints:
            return self.is_available(runtime, name)
        if endpoint is Endpoint.CORE and name == FALLBACK_TOOL:
            primary_usable = PRIMARY_TOOL not in config.mcp_tools_disabled and self.is_available(runtime, PRIMARY_TOOL)
            return not primary_usable and self.is_available(runtime, name)
        return False

    def tools_for(self, endpoint: Endpoint, config: SiteConfig, runtime: Runtime) -> list[RegisteredTool]:
        """The tools `endpoint` offers now, in name order."""
        return [self._tools[n] for n in sorted(self._tools) if self.offered(n, endpoint, config, runtime)]

    def describe(self) -> list[dict[str, Any]]:
        """Name and static endpoint membership of every registered tool (for docs and admin views)."""
        return [
            {"name": t.spec.name, "endpoints": sorted(e.value for e in t.spec.endpoints)}
            for t in (self._tools[n] for n in sorted(self._tools))
        ]
