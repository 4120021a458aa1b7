"""The compiled argument check of the MCP tools (mcp/validation.compile_check, a cost found by bench/mcp_bench.py)
never accepts what jsonschema refuses, and does accept the ordinary calls, for every real tool's schema."""

from __future__ import annotations

import random
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from codewell.capabilities import CAPABILITIES
from codewell.core.errors import InvalidInput
from codewell.core.tools import ToolSpec
from codewell.mcp.validation import ArgumentValidator, compile_check

TOOLS: dict[str, ToolSpec] = {tool.name: tool for capability in CAPABILITIES for tool in capability.tools}
VALUES: list[Any] = [
    "",
    "r",
    "x" * 1001,
    "x" * 5000,
    0,
    1,
    -1,
    5,
    100,
    501,
    10**6,
    True,
    False,
    1.0,
    2.5,
    float("nan"),
    None,
    [],
    ["a", "b"],
    ["a", 1],
    ["x"] * 101,
    ["y" * 1001],
    {},
    {"a": 1},
]


TYPICAL = {"string": "r", "integer": 5, "number": 2.5, "boolean": True, "array": ["a", "b"]}


def random_arguments(rng: random.Random, schema: dict[str, Any]) -> dict[str, Any]:
    """The required arguments with ordinary values, then a few arguments (known or not) set to any value."""
    properties = schema["properties"]
    arguments = {name: TYPICAL[properties[name]["type"]] for name in schema["required"]}
    names = [*properties, "unknownArgument"]
    for name in rng.sample(names, rng.randint(0, min(3, len(names)))):
        arguments[name] = rng.choice(VALUES)
    return arguments


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_the_compiled_check_accepts_only_valid_arguments(name: str) -> None:
    schema = dict(TOOLS[name].input_schema)
    check = compile_check(schema)
    assert check is not None, f"{name}: its schema fell back to jsonschema on every call"
    reference = Draft202012Validator(schema)
    rng = random.Random(name)
    accepted = 0
    for _ in range(3000):
        arguments = random_arguments(rng, schema)
        if check(arguments):
            accepted += 1
            assert reference.is_valid(arguments), (name, arguments)
    assert accepted > 0, f"{name}: no random call was accepted by the compiled check"


def test_valid_calls_skip_jsonschema_and_invalid_ones_still_get_its_message() -> None:
    validator = ArgumentValidator("read_file", TOOLS["read_file"].input_schema)
    arguments = {"repo": "bench/repo01", "path": "pkg1/file1.go", "startLine": 3}
    assert validator._accepts is not None
    assert validator._accepts(arguments)
    assert validator.validate(arguments) == arguments
    # 1.0 is an integer to JSON Schema: refused by the compiled check, accepted by jsonschema behind it.
    integral = {"repo": "r", "path": "p", "startLine": 1.0}
    assert validator.validate(integral) == integral
    with pytest.raises(InvalidInput) as raised:
        validator.validate({"repo": "r", "path": "p", "startLine": True})
    assert "argument 'startLine' must be of type integer" in raised.value.message
