"""The MCP tools of the repos capability: schemas, endpoints, argument checks and rendered text."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator

from codewell.core.actors import ANONYMOUS, INTERNAL
from codewell.core.errors import InvalidInput, NotFound
from codewell.core.tools import Endpoint, ToolContext, ToolResult
from codewell.mcp.registry import ToolRegistry
from codewell.repos.service import Repo, RepoService
from codewell.repos.tools import TOOLS
from codewell.runtime import Runtime

SPECS = {spec.name: spec for spec in TOOLS}


def call(runtime: Runtime, tool: str, **args: Any) -> ToolResult:
    return SPECS[tool].handler(ToolContext(runtime, ANONYMOUS, Endpoint.ALL), args)


def test_schemas_are_strict_2020_12_objects_and_endpoints_follow_the_spec() -> None:
    assert set(SPECS) == {"list_repos", "list_files", "read_file", "list_refs"}
    for spec in TOOLS:
        Draft202012Validator.check_schema(dict(spec.input_schema))
        assert spec.input_schema["additionalProperties"] is False
        assert spec.input_schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert "Example:" in spec.description
    core_and_all = {Endpoint.CORE, Endpoint.ALL}
    assert {n: set(s.endpoints) for n, s in SPECS.items()} == {
        "list_repos": core_and_all,
        "list_files": core_and_all,
        "read_file": core_and_all,
        "list_refs": {Endpoint.ALL},
    }
    validator = Draft202012Validator(dict(SPECS["read_file"].input_schema))
    assert not validator.is_valid({"repo": "r", "path": "p", "extra": 1})
    assert not validator.is_valid({"repo": "r"})
    assert not Draft202012Validator(dict(SPECS["list_refs"].input_schema)).is_valid({"repo": "r", "limit": 501})


def test_read_file_renders_the_reference_format(runtime: Runtime, sample: Repo) -> None:
    result = call(runtime, "read_file", repo="local/sample", path="src/util.py", startLine=2)
    lines = result.text.splitlines()
    assert lines[0].startswith(f"URL: {runtime.external_url}/local/sample@")
    assert lines[0].endswith("%3FL2-2")
    assert lines[1:] == ["2:     return 42"]
    assert result.structured is not None
    assert result.structured["startLine"] == 2
    assert result.structured["content"] == "    return 42\n"


def test_list_repos_renders_one_line_per_repo_and_has_more(runtime: Runtime, sample: Repo) -> None:
    runtime.get(RepoService).add_repo(
        INTERNAL, "https://github.com/org/other.git", description="Other tools", private=False
    )
    result = call(runtime, "list_repos", query="", limit=1)
    assert result.text == "github.com/org/other - Other tools\n\n" + (
        "(more results available - set a higher limit if you want to see more)"
    )
    assert result.structured is not None
    assert result.structured["hasMoreResults"] is True
    assert call(runtime, "list_repos", query="sample").text == "local/sample"
    assert call(runtime, "list_repos", query="zzz").text == "No repositories found."


def test_list_files_and_list_refs_render_text(runtime: Runtime, sample: Repo) -> None:
    assert call(runtime, "list_files", repo="local/sample", path="src").text == "src/app.py\nsrc/util.py"
    refs = call(runtime, "list_refs", repo="local/sample", tagsOnly=True, limit=1)
    assert refs.text.startswith("refs/tags/v1.0 ")
    assert "showing 1 of 3 refs" in refs.text
    assert refs.structured is not None
    assert refs.structured["hasMoreResults"] is True


@pytest.mark.parametrize(
    ("tool", "args", "message"),
    [
        ("read_file", {"repo": "local/sample"}, "missing required argument 'path'"),
        ("read_file", {"repo": "local/sample", "path": "README.md", "startLine": "3"}, "type integer"),
        ("read_file", {"repo": "local/sample", "path": "README.md", "startLine": 1.5}, "type integer"),
        ("list_refs", {"repo": "local/sample", "tagsOnly": "yes"}, "type boolean"),
        ("list_repos", {"query": "x", "limit": 0}, "must be >= 1"),
        ("list_files", {"repo": 7}, "type string"),
        ("list_repos", {"query": "x" * 60_000}, "at most 512 characters"),
    ],
)
def test_bad_arguments_are_refused_by_the_schema(
    runtime: Runtime, tool: str, args: dict[str, Any], message: str
) -> None:
    # Handlers trust their validated arguments: the registry checks them against the schema first.
    registered = ToolRegistry.create(runtime).get(tool)
    assert registered is not None
    with pytest.raises(InvalidInput, match=message):
        registered.validator.validate(args)


def test_whole_numbers_written_as_floats_are_accepted(runtime: Runtime, sample: Repo) -> None:
    assert call(runtime, "read_file", repo="local/sample", path="src/util.py", startLine=2.0).text.endswith(
        "2:     return 42"
    )


def test_a_list_repos_query_longer_than_any_name_is_a_clear_error(runtime: Runtime, sample: Repo) -> None:
    # Before: SQLite answered "LIKE or GLOB pattern too complex" (an internal error) past 50,000 characters.
    with pytest.raises(InvalidInput, match="repository names have at most 512"):
        runtime.get(RepoService).list_repos(ANONYMOUS, "x" * 60_000)


def test_unknown_repo_is_not_found_from_every_tool(runtime: Runtime, sample: Repo) -> None:
    for tool, args in [
        ("read_file", {"repo": "x/y", "path": "a"}),
        ("list_files", {"repo": "x/y"}),
        ("list_refs", {"repo": "x/y"}),
    ]:
        with pytest.raises(NotFound, match="repository 'x/y' not found"):
            call(runtime, tool, **args)


def test_a_guessed_name_gets_did_you_mean_from_every_tool(runtime: Runtime, sample: Repo) -> None:
    # Agents guess short names (issue #22): exactly one readable repository ends with `/sample`.
    for tool, args in [
        ("read_file", {"repo": "sample", "path": "a"}),
        ("list_files", {"repo": "sample"}),
        ("list_refs", {"repo": "SAMPLE"}),
        ("read_file", {"repo": "LOCAL/Sample", "path": "a"}),
    ]:
        with pytest.raises(NotFound, match=r"not found; did you mean local/sample\?"):
            call(runtime, tool, **args)
