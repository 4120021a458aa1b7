"""Argument validation messages name the argument and say what was expected."""

from __future__ import annotations

import pytest

from codewell.core.errors import InvalidInput
from codewell.mcp.validation import ArgumentValidator

SCHEMA = {
    "type": "object",
    "properties": {
        "repo": {"type": "string", "minLength": 1},
        "limit": {"type": "integer", "minimum": 1, "maximum": 500},
        "kind": {"enum": ["tags", "heads"]},
        "repos": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
    },
    "required": ["repo"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({}, "missing required argument 'repo'"),
        ({"repo": "r", "lmit": 3}, "unknown argument 'lmit' (allowed: kind, limit, repo, repos)"),
        ({"repo": 3}, "argument 'repo' must be of type string, got 3"),
        ({"repo": ""}, "argument 'repo' must have at least 1 characters"),
        ({"repo": "r", "limit": 501}, "argument 'limit' must be <= 500, got 501"),
        ({"repo": "r", "limit": "5"}, "argument 'limit' must be of type integer, got \"5\""),
        ({"repo": "r", "kind": "all"}, 'argument \'kind\' must be one of "tags", "heads", got "all"'),
        ({"repo": "r", "repos": ["a", 1]}, "argument 'repos.1' must be of type string, got 1"),
        ({"repo": "r", "repos": ["a", "b", "c"]}, "argument 'repos' must have at most 2 items"),
    ],
)
def test_messages_name_the_argument(arguments: dict[str, object], expected: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        ArgumentValidator("list_refs", SCHEMA).validate(arguments)
    assert expected in raised.value.message
    assert raised.value.message.startswith("invalid arguments for tool list_refs: ")
    assert raised.value.hint is not None
    assert "repo: string" in raised.value.hint
    assert "limit?: integer" in raised.value.hint


def test_valid_arguments_pass_through() -> None:
    assert ArgumentValidator("t", SCHEMA).validate({"repo": "r", "limit": 5}) == {"repo": "r", "limit": 5}
    with pytest.raises(InvalidInput, match="missing required argument 'repo'"):
        ArgumentValidator("t", SCHEMA).validate(None)
