"""The JSON half of the request-body policy (codewell.http.bodies): what parse_json accepts and refuses."""

from __future__ import annotations

import json

import pytest

from codewell.http.bodies import MAX_JSON_DEPTH, InvalidJson, family_of, parse_json, size_text


def test_nesting_up_to_the_limit_is_accepted_and_one_more_level_refused() -> None:
    mixed = b'{"a":[' * (MAX_JSON_DEPTH // 2) + b"1" + b"]}" * (MAX_JSON_DEPTH // 2)
    assert parse_json(mixed) is not None
    with pytest.raises(InvalidJson, match=f"nested more than {MAX_JSON_DEPTH} levels deep") as refused:
        parse_json(b"[" + mixed + b"]")
    assert refused.value.reason == "depth"
    assert refused.value.http_status == 400


@pytest.mark.parametrize("depth", [65, 900, 1025, 5000, 100_000])
def test_deep_documents_are_a_400_never_a_recursion_error(depth: int) -> None:
    for body in (b"[" * depth + b"]" * depth, b'{"a":' * depth + b"0" + b"}" * depth):
        with pytest.raises(InvalidJson) as refused:
            parse_json(body)
        assert refused.value.reason == "depth"


def test_brackets_inside_strings_are_not_nesting() -> None:
    value = {"text": "[" * 500 + '{"\\' * 100, "list": [[["ok"]]]}
    assert parse_json(json.dumps(value).encode()) == value


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_standard_numbers_are_refused_by_name(constant: str) -> None:
    with pytest.raises(InvalidJson, match=f"contains {constant}, which is not a JSON number") as refused:
        parse_json(f'{{"n": [1, {constant}]}}'.encode())
    assert refused.value.reason == "number"


def test_what_json_allows_keeps_its_value() -> None:
    # Integers beyond 64 bits stay exact (orjson would read this one as a float).
    assert parse_json(b'{"id": 123456789012345678901234567890}') == {"id": 123456789012345678901234567890}
    assert parse_json(b'"\\ud800"') == "\ud800"
    assert parse_json(b"1e400") == float("inf")  # an overflowing literal is JSON; Python reads it as inf


@pytest.mark.parametrize("body", [b"{nope", b"\xff\xfe\x00", b"", b"[1,]", b"{'a': 1}"])
def test_not_json_is_a_syntax_refusal(body: bytes) -> None:
    with pytest.raises(InvalidJson) as refused:
        parse_json(body, what="the webhook body")
    assert refused.value.message == "the webhook body is not valid JSON"
    assert refused.value.reason == "syntax"


def test_families_and_limits_read_as_people_read_them() -> None:
    assert size_text(1024 * 1024) == "1 MiB (1048576 bytes)"
    assert size_text(64 * 1024) == "64 KiB (65536 bytes)"
    assert size_text(1000) == "1000 bytes"
    assert family_of("/.api/mcp").name == family_of("/.api/mcp/all").name == "MCP"
    assert family_of("/.api/mcpx").name == "REST API"
    assert family_of("/.auth/idp/oauth/token").limit == 64 * 1024
    assert family_of("/sign-in").limit == 64 * 1024
    assert family_of("/.api/codeintel/upload").limit is None
    assert family_of("/acme/app/-/tree").name == "page form"
