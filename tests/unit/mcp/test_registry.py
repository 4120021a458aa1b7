"""The registry: discovery, schema checks, endpoint views, disabled tools and the nls_search fallback."""

from __future__ import annotations

from typing import Any

import pytest

from codewell.capabilities import CAPABILITIES
from codewell.config import SiteConfig
from codewell.core.errors import ConfigError
from codewell.core.tools import Endpoint, ToolContext, ToolResult, ToolSpec
from codewell.mcp.registry import ToolRegistry
from codewell.runtime import Runtime


def _ok(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    return ToolResult(text="ok")


def spec(name: str, *endpoints: Endpoint, schema: dict[str, Any] | None = None) -> ToolSpec:
    return ToolSpec(
        name,
        name,
        schema or {"type": "object", "properties": {}, "additionalProperties": False},
        _ok,
        frozenset(endpoints),
    )


def config(**options: Any) -> SiteConfig:
    return SiteConfig.model_validate(options)


def names(registry: ToolRegistry, endpoint: Endpoint, runtime: Runtime, **options: Any) -> list[str]:
    return [t.spec.name for t in registry.tools_for(endpoint, config(**options), runtime)]


CORE, ALL, DEEP = Endpoint.CORE, Endpoint.ALL, Endpoint.DEEPSEARCH


def test_views_follow_membership_and_disabled_switch(runtime: Runtime) -> None:
    registry = ToolRegistry(
        [spec("read_file", CORE, ALL), spec("list_refs", ALL), spec("deepsearch_read", CORE, ALL, DEEP)]
    )
    assert names(registry, CORE, runtime) == ["deepsearch_read", "read_file"]
    assert names(registry, ALL, runtime) == ["deepsearch_read", "list_refs", "read_file"]
    assert names(registry, DEEP, runtime) == ["deepsearch_read"]
    disabled = {"mcp.tools.disabled": ["deepsearch_read"]}
    for endpoint in Endpoint:
        assert "deepsearch_read" not in names(registry, endpoint, runtime, **disabled)


def test_nls_search_falls_back_on_core_only_without_code_finder(runtime: Runtime) -> None:
    with_finder = ToolRegistry([spec("code_finder", CORE, ALL), spec("nls_search", ALL)])
    assert names(with_finder, CORE, runtime) == ["code_finder"]
    assert names(with_finder, CORE, runtime, **{"mcp.tools.disabled": ["code_finder"]}) == ["nls_search"]
    assert names(with_finder, CORE, runtime, **{"mcp.tools.disabled": ["code_finder", "nls_search"]}) == []
    assert names(with_finder, DEEP, runtime, **{"mcp.tools.disabled": ["code_finder"]}) == []
    without_finder = ToolRegistry([spec("nls_search", ALL)])
    assert names(without_finder, CORE, runtime) == ["nls_search"]
    unavailable = ToolRegistry(
        [spec("code_finder", CORE, ALL), spec("nls_search", ALL)], available={"code_finder": lambda rt: False}
    )
    assert names(unavailable, CORE, runtime) == ["nls_search"]
    assert names(unavailable, ALL, runtime) == ["nls_search"]


def test_availability_check_that_raises_counts_as_unavailable(runtime: Runtime) -> None:
    def broken(rt: Runtime) -> bool:
        raise RuntimeError("no model configured")

    registry = ToolRegistry([spec("code_finder", CORE)], available={"code_finder": broken})
    assert names(registry, CORE, runtime) == []


def test_bad_specs_are_rejected() -> None:
    with pytest.raises(ConfigError, match="registered twice"):
        ToolRegistry([spec("a", CORE), spec("a", ALL)])
    with pytest.raises(ConfigError, match="additionalProperties: false"):
        ToolRegistry([spec("a", CORE, schema={"type": "object", "properties": {}})])
    with pytest.raises(ConfigError, match="invalid input schema"):
        ToolRegistry([spec("a", CORE, schema={"type": "object", "additionalProperties": False, "required": 3})])


def test_registry_collects_the_tools_of_every_declared_capability(runtime: Runtime) -> None:
    declared = {tool.name for capability in CAPABILITIES for tool in capability.tools}
    assert {"keyword_search", "read_file", "commit_search", "evaluator"} <= declared
    assert set(ToolRegistry.create(runtime).names) == declared


def test_real_tools_validate_together(runtime: Runtime) -> None:
    registry = ToolRegistry.create(runtime)
    for endpoint in Endpoint:
        for tool in registry.tools_for(endpoint, runtime.config, runtime):
            assert tool.spec.input_schema["additionalProperties"] is False
