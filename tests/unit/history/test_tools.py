"""The history tools as the MCP registry sees them: endpoints per the spec's table, schemas, rendering."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from codewell.core.actors import INTERNAL
from codewell.core.errors import InvalidInput
from codewell.core.tools import Endpoint, ToolContext
from codewell.mcp.registry import ToolRegistry
from codewell.runtime import Runtime
from tests.unit.history.builders import RepoBuilder, register

HISTORY_TOOLS = {"commit_search", "diff_search", "compare_revisions", "get_contributor_repos"}


def test_endpoint_membership_follows_the_availability_table(runtime: Runtime) -> None:
    registry = ToolRegistry.create(runtime)
    offered = {
        endpoint: {t.spec.name for t in registry.tools_for(endpoint, runtime.config, runtime)} & HISTORY_TOOLS
        for endpoint in Endpoint
    }
    assert offered[Endpoint.CORE] == {"commit_search", "diff_search"}
    assert offered[Endpoint.ALL] == HISTORY_TOOLS
    assert offered[Endpoint.DEEPSEARCH] == set()


def test_schemas_reject_out_of_range_arguments(runtime: Runtime) -> None:
    registry = ToolRegistry.create(runtime)
    cases: list[tuple[str, dict[str, Any]]] = [
        ("commit_search", {"repos": ["a"], "count": 101}),
        ("commit_search", {"repos": ["a"], "unknown": 1}),
        ("diff_search", {"pattern": "x", "repos": ["a"], "count": 51}),
        ("compare_revisions", {"repo": "a", "base": "b", "head": "c", "first": 0}),
        ("get_contributor_repos", {"authors": ["a", "b", "c", "d", "e", "f"]}),
        ("get_contributor_repos", {"authors": ["a"], "limit": 101}),
    ]
    for name, args in cases:
        tool = registry.get(name)
        assert tool is not None
        with pytest.raises(InvalidInput):
            tool.validator.validate(args)


def test_commit_search_text_and_structured_output(runtime: Runtime, tmp_path: Path) -> None:
    work = RepoBuilder(tmp_path / "w")
    sha = work.commit("Fix the flux capacitor\n\nIt needed 1.21 GW.", {"f.txt": "x\n"}, date="2024-03-04T05:06:07Z")
    register(runtime, work.path, "tools.example/w")
    registry = ToolRegistry.create(runtime)
    tool = registry.get("commit_search")
    assert tool is not None
    ctx = ToolContext(runtime, INTERNAL, Endpoint.CORE)
    result = tool.spec.handler(ctx, {"repos": ["tools.example/w", "tools.example/gone"], "messageTerms": ["flux"]})
    assert result.text.splitlines()[:3] == [
        "Found 1 commit.",
        "Repositories not found (not searched): tools.example/gone",
        "",
    ]
    assert f"tools.example/w@{sha[:12]} · 2024-03-04 05:06 UTC · Alice Example <alice@example.com>" in result.text
    assert "    It needed 1.21 GW." in result.text
    assert f"URL: {runtime.external_url}/tools.example/w/-/commit/{sha}" in result.text
    assert result.structured is not None
    commit = result.structured["commits"][0]
    assert {k: commit[k] for k in ("repository", "commit", "title", "date")} == {
        "repository": "tools.example/w",
        "commit": sha,
        "title": "Fix the flux capacitor",
        "date": "2024-03-04T05:06:07+00:00",
    }
    assert result.structured["unknownRepos"] == ["tools.example/gone"]
    assert result.structured["totalCount"] == 1
