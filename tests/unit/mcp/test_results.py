"""The result envelope and the output budget."""

from __future__ import annotations

import json

from codewell.core.errors import NotFound
from codewell.core.tools import ToolResult
from codewell.mcp.results import OUTPUT_BUDGET_CHARS, error_message, error_result, success_result, truncate_text

READ_FILE_SCHEMA = {"type": "object", "properties": {"startLine": {"type": "integer"}}}


def test_envelope_is_one_json_text_item_plus_structured_content() -> None:
    wire = success_result("list_repos", ToolResult("a\nb", {"hasMoreResults": False}), {})
    result = wire.result
    assert len(result.content) == 1
    assert json.loads(result.content[0].text) == {"text": "a\nb"}  # type: ignore[union-attr]
    assert result.structured_content == {"text": "a\nb", "hasMoreResults": False}
    assert result.is_error is False
    assert wire.truncated is False
    assert wire.size == len(result.content[0].text.encode())  # type: ignore[union-attr]


def test_small_text_is_untouched() -> None:
    assert truncate_text("t", "x" * 100, {}) == ("x" * 100, False)


def test_long_numbered_text_is_cut_at_a_line_with_a_continuation_hint() -> None:
    text = "\n".join(f"{n}: {'y' * 100}" for n in range(1, 3001))
    cut, truncated = truncate_text("read_file", text, READ_FILE_SCHEMA)
    assert truncated
    assert len(cut) <= OUTPUT_BUDGET_CHARS
    kept, note = cut.split("\n\n[output truncated: ")
    last = int(kept.splitlines()[-1].split(":")[0])
    assert kept.splitlines()[-1] == f"{last}: {'y' * 100}"  # whole lines only
    assert f"call read_file again with startLine={last + 1} to read the rest" in note
    assert f"showing {last} of 3000 lines" in note


def test_hint_uses_the_tools_own_arguments() -> None:
    long = "z\n" * 60_000
    assert "lower limit" in truncate_text("list_repos", long, {"properties": {"limit": {}}})[0]
    assert "narrower path" in truncate_text("list_files", long, {"properties": {"path": {}}})[0]
    assert "narrow the request" in truncate_text("x", long, {})[0]


def test_oversized_structured_content_keeps_only_scalars() -> None:
    big = ToolResult("short", {"hasMoreResults": True, "repos": ["r" * 100] * 2000})
    structured = success_result("list_repos", big, {}).result.structured_content
    assert structured == {"text": "short", "hasMoreResults": True, "structuredTruncated": True}


def test_errors_carry_message_and_hint_as_plain_text() -> None:
    error = NotFound("repository x not found.", hint="check the name with list_repos")
    assert error_message(error) == "repository x not found. check the name with list_repos"
    result = error_result(error_message(error)).result
    assert result.is_error is True
    assert result.content[0].text == "repository x not found. check the name with list_repos"  # type: ignore[union-attr]


def test_the_text_payload_is_what_json_would_write() -> None:
    """content[0].text is built through orjson for speed: byte for byte what json.dumps wrote before."""
    import json  # noqa: PLC0415 - the reference, only here

    text = 'tab\there "quoted" back\\slash \x00\x1f\x7f é 漢 😀 \u2028\n' + "".join(map(chr, range(32)))
    for sample in (text, ""):
        wire = success_result("read_file", ToolResult(sample, None), {})
        assert wire.text == json.dumps({"text": sample}, ensure_ascii=False)
