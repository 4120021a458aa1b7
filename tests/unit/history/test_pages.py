"""What one history answer holds (issue #22): complete compare pages under the output budget, renames in
diff_search, "did you mean" for guessed repository names, and bounded filter values."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from codewell.core.actors import ANONYMOUS, INTERNAL
from codewell.core.errors import InvalidInput, NotFound
from codewell.core.tools import Endpoint, ToolContext
from codewell.history import compare_page, render
from codewell.history.params import decode_cursor
from codewell.history.service import HistoryService
from codewell.http import urls
from codewell.mcp import results as mcp_results
from codewell.mcp.registry import ToolRegistry
from codewell.runtime import Runtime
from tests.unit.history.builders import BIG, RepoBuilder, build_release, register

pytestmark = pytest.mark.database


@pytest.fixture
def release(runtime: Runtime, tmp_path: Path) -> RepoBuilder:
    return build_release(runtime, tmp_path)


def _call(runtime: Runtime, tool: str, args: dict[str, Any]) -> mcp_results.WireResult:
    """The tool's answer exactly as the MCP server puts it on the wire (schema, handler, output budget)."""
    registered = ToolRegistry.create(runtime).get(tool)
    assert registered is not None
    valid = registered.validator.validate(args)
    result = registered.spec.handler(ToolContext(runtime, INTERNAL, Endpoint.ALL), valid)
    return mcp_results.success_result(tool, result, registered.spec.input_schema)


def test_the_page_budget_is_the_mcp_output_budget() -> None:
    assert render.OUTPUT_BUDGET_CHARS == mcp_results.OUTPUT_BUDGET_CHARS
    assert render.PAGE_BUDGET_CHARS < mcp_results.OUTPUT_BUDGET_CHARS


def test_compare_lists_every_file_of_the_page_and_cuts_the_largest_hunks(
    runtime: Runtime, release: RepoBuilder
) -> None:
    wire = _call(runtime, "compare_revisions", {"repo": "rel.example/r", "base": "v1", "head": "v2"})
    # Before: the generic cut dropped whole files ("[output truncated ...]") and the structured files list.
    assert not wire.truncated
    text = json.loads(wire.text)["text"]
    assert "[output truncated" not in text
    structured = wire.structured
    assert structured is not None
    paths = [f["path"] for f in structured["files"]]
    assert len(paths) == 39
    assert paths == sorted(paths)
    for file in structured["files"]:
        assert f"# {file['path']} (modified, +{file['added']} -{file['deleted']})" in text
    small = [f for f in structured["files"] if f["path"].startswith("small/")]
    assert all(f["hunks"] and "omittedHunks" not in f for f in small)  # the small files keep their hunks
    big = [f for f in structured["files"] if f["path"] in BIG]
    assert all(f["truncated"] and f["omittedHunks"] > 0 for f in big)
    assert len(text) + len(json.dumps(structured, ensure_ascii=False)) - len(json.dumps(text)) <= (
        mcp_results.OUTPUT_BUDGET_CHARS
    )
    # Each cut file carries the cursor of its diff alone.
    cursor = big[0]["fileCursor"]
    assert f"this file's diff alone: after={cursor!r}, first=1" in text
    assert decode_cursor(cursor) == paths.index(big[0]["path"])
    alone = runtime.get(HistoryService).compare(INTERNAL, "rel.example/r", "v1", "v2", first=1, after=cursor)
    assert [f.path for f in alone.files] == [big[0]["path"]]


def test_a_single_file_larger_than_the_budget_says_how_to_read_it(runtime: Runtime, release: RepoBuilder) -> None:
    comparison = runtime.get(HistoryService).compare(INTERNAL, "rel.example/r", "v1", "v2", first=1, after=None)
    assert comparison.files[0].path == "big/a.txt"
    text, data = compare_page.comparison_answer(comparison, runtime.external_url)
    assert len(text) + len(json.dumps(data, ensure_ascii=False)) <= render.PAGE_BUDGET_CHARS
    assert "read the file at both revisions" in text
    assert data["hasNextPage"] is True
    assert f"More files: call again with after={data['endCursor']!r}" in text


def test_diff_search_sees_a_renamed_file_as_renamed(runtime: Runtime, tmp_path: Path) -> None:
    work = RepoBuilder(tmp_path / "ren")
    body = "".join(f"func helper{i}() {{}}\n" for i in range(20))
    work.commit("add completions", {"custom_completions.go": body}, date="2024-01-01T00:00:00Z")
    moved = body.replace("helper3()", "helperThree()")
    work.git("mv", "custom_completions.go", "completions.go")
    rename = work.commit("rename completions", {"completions.go": moved}, date="2024-02-01T00:00:00Z")
    register(runtime, work.path, "ren.example/r")
    history = runtime.get(HistoryService)
    # An unchanged line of the moved file: added only by the first commit (git log -G agrees).
    unchanged = history.diff_search(INTERNAL, r"helper7\(\)", ["ren.example/r"], added=True)
    assert [m.commit.subject for m in unchanged.matches] == ["add completions"]
    # The edit made while moving is found, under the new path.
    edited = history.diff_search(INTERNAL, "helperThree", ["ren.example/r"], added=True)
    assert [m.commit.sha for m in edited.matches] == [rename]
    assert [path for path, _ in edited.matches[0].hunks] == ["completions.go"]
    # contentTerms (the pickaxe) reads the same diffs.
    picked = history.commit_search(INTERNAL, ["ren.example/r"], content_terms=["helper7()"])
    assert [c.subject for c in picked.commits] == ["add completions"]


@pytest.fixture
def named(runtime: Runtime, tmp_path: Path) -> None:
    work = RepoBuilder(tmp_path / "click")
    work.commit("Add click", {"click.py": "import os\n"})
    register(runtime, work.path, "local/click")
    hidden = RepoBuilder(tmp_path / "hidden")
    hidden.commit("Add hidden", {"h.py": "x\n"})
    register(runtime, hidden.path, "local/hidden", private=True)


def test_an_unknown_repo_gets_a_suggestion_among_readable_ones(runtime: Runtime, named: None) -> None:
    history = runtime.get(HistoryService)
    with pytest.raises(NotFound, match=r"click \(did you mean local/click\?\)"):
        history.commit_search(ANONYMOUS, ["click"])
    with pytest.raises(NotFound, match=r"did you mean local/click\?"):
        history.compare(ANONYMOUS, "Click", "HEAD", "HEAD")
    found = history.commit_search(ANONYMOUS, ["local/click", "click"])
    assert found.unknown_repos == ["click"]
    assert found.suggestions == {"click": "local/click"}
    assert "Repositories not found (not searched): click (did you mean local/click?)" in render.commits_text(
        found, runtime.external_url
    )
    # A private repository the caller may not read is never suggested; an admin gets the suggestion.
    with pytest.raises(NotFound) as hidden:
        history.commit_search(ANONYMOUS, ["hidden"])
    shown = f"{hidden.value.message} {hidden.value.hint}"
    assert "did you mean" not in shown
    assert "local/hidden" not in shown
    with pytest.raises(NotFound, match=r"did you mean local/hidden\?"):
        history.commit_search(INTERNAL, ["hidden"])


@pytest.mark.parametrize(
    ("kind", "args"),
    [
        ("messageTerms", {"message_terms": ["x" * 60_000]}),
        ("authors", {"authors": ["x" * 60_000]}),
        ("files", {"files": ["x" * 60_000]}),
    ],
)
def test_overlong_filter_values_are_clear_errors(runtime: Runtime, named: None, kind: str, args: Any) -> None:
    # Before: SQLite refused the LIKE pattern ("LIKE or GLOB pattern too complex"), an internal error.
    with pytest.raises(InvalidInput, match=f"a value of `{kind}` is 60000 characters long; at most"):
        runtime.get(HistoryService).commit_search(INTERNAL, ["local/click"], **args)


def test_overlong_filter_values_are_refused_by_the_schemas(runtime: Runtime) -> None:
    registry = ToolRegistry.create(runtime)
    cases: list[tuple[str, dict[str, Any]]] = [
        ("commit_search", {"repos": ["a"], "messageTerms": ["x" * 60_000]}),
        ("commit_search", {"repos": ["a"], "authors": ["x" * 60_000]}),
        ("commit_search", {"repos": ["a"], "files": ["x" * 60_000]}),
        ("commit_search", {"repos": ["a"], "messageTerms": ["x"] * 101}),
        ("diff_search", {"pattern": "a", "repos": ["a"], "authors": ["x" * 60_000]}),
        ("get_contributor_repos", {"authors": ["x" * 60_000]}),
    ]
    for tool, args in cases:
        registered = registry.get(tool)
        assert registered is not None
        with pytest.raises(InvalidInput, match="at most"):
            registered.validator.validate(args)


def test_diff_search_lists_every_matching_commit_within_the_budget(runtime: Runtime, tmp_path: Path) -> None:
    work = RepoBuilder(tmp_path / "many")
    shas = [
        work.commit(
            f"batch {n}",
            {f"f{n:02d}.txt": "".join(f"needle {n} {i} " + "y" * 30 + "\n" for i in range(300))},
            date=f"2024-01-{n + 1:02d}T12:00:00Z",
        )
        for n in range(20)
    ]
    register(runtime, work.path, "many.example/r")
    wire = _call(runtime, "diff_search", {"pattern": "needle", "repos": ["many.example/r"], "count": 50})
    # Before: the generic cut dropped later commits from the text and the whole `results` list.
    assert not wire.truncated
    structured = wire.structured
    assert structured is not None
    results = structured["results"]
    assert [r["commit"] for r in results] == shas[::-1]
    text = json.loads(wire.text)["text"]
    assert all(f"many.example/r@{sha[:12]}" in text for sha in shas)
    assert results[0]["diffHunk"]
    assert results[0]["matchRanges"]
    assert "hunksOmitted" not in results[0]
    cut = [r for r in results if r.get("hunksOmitted")]
    assert cut
    assert all(not r["diffHunk"] for r in cut)
    # The note narrows to that commit alone.
    last = cut[-1]
    assert last["commit"] == shas[0]
    note = "after='2024-01-01T12:00:00+00:00', before='2024-01-01T12:00:01+00:00'"
    assert f"(matching hunks not shown: output budget; this commit alone: {note})" in text
    alone = runtime.get(HistoryService).diff_search(
        INTERNAL, "needle", ["many.example/r"], after="2024-01-01T12:00:00+00:00", before="2024-01-01T12:00:01+00:00"
    )
    assert [m.commit.sha for m in alone.matches] == [shas[0]]


def test_every_printed_url_comes_from_one_module() -> None:
    base = "https://cw.example"
    assert (
        urls.blob_url(base, "g/o/r", "a" * 40, "src/x.py", (3, 9)) == f"{base}/g/o/r@{'a' * 40}/-/blob/src/x.py%3FL3-9"
    )
    assert urls.tree_url(base, "g/o/r", "main") == f"{base}/g/o/r@main/-/tree"
    assert urls.tree_url(base, "g/o/r", "main", "src") == f"{base}/g/o/r@main/-/tree/src"
    assert urls.commit_url(base, "g/o/r", "abc") == f"{base}/g/o/r/-/commit/abc"
    assert urls.compare_url(base, "g/o/r", "release/1.0", "v2+rc") == f"{base}/g/o/r/-/compare/release%2F1.0...v2%2Brc"
