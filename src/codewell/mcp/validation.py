"""Tool argument validation against each tool's JSON Schema, with messages that name the argument."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from codewell.core.errors import InvalidInput


def _argument_name(error: ValidationError) -> str:
    path = [str(p) for p in error.absolute_path]
    return ".".join(path) if path else ""


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def describe_error(error: ValidationError, properties: Mapping[str, Any]) -> str:
    """One sentence for one schema violation, naming the argument."""
    name = _argument_name(error)
    validator = str(error.validator)
    expected_values: list[Any] = list(error.validator_value) if isinstance(error.validator_value, list) else []
    if validator == "required":
        missing = [p for p in expected_values if isinstance(error.instance, dict) and p not in error.instance]
        return f"missing required argument {missing[0]!r}" if missing else error.message
    if validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(properties)) if isinstance(error.instance, dict) else []
        allowed = ", ".join(sorted(properties)) or "none"
        label = "unknown argument" if len(extra) == 1 else "unknown arguments"
        return f"{label} {', '.join(repr(e) for e in extra)} (allowed: {allowed})"
    subject = f"argument {name!r}" if name else "arguments"
    value = error.instance
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    if validator == "type":
        expected = error.validator_value
        expected_text = " or ".join(expected) if isinstance(expected, list) else str(expected)
        return f"{subject} must be of type {expected_text}, got {_show(value)}"
    if validator == "enum":
        options = ", ".join(_show(v) for v in expected_values)
        return f"{subject} must be one of {options}, got {_show(value)}"
    if validator in {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}:
        relation = {
            "minimum": ">=",
            "exclusiveMinimum": ">",
            "maximum": "<=",
            "exclusiveMaximum": "<",
        }[validator]
        return f"{subject} must be {relation} {error.validator_value}, got {_show(value)}"
    if validator in {"minLength", "maxLength", "minItems", "maxItems"}:
        bound = "at least" if validator.startswith("min") else "at most"
        unit = "characters" if validator.endswith("Length") else "items"
        return f"{subject} must have {bound} {error.validator_value} {unit}"
    if validator == "pattern":
        return f"{subject} must match the pattern {schema.get('pattern')!r}, got {_show(value)}"
    return f"{subject}: {error.message}"


class ArgumentValidator:
    """A compiled validator for one tool; `validate` raises InvalidInput listing every problem."""

    def __init__(self, tool: str, schema: Mapping[str, Any]) -> None:
        self.tool = tool
        self.schema = dict(schema)
        self._properties: Mapping[str, Any] = self.schema.get("properties", {}) or {}
        self._validator = Draft202012Validator(self.schema)

    def validate(self, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """Return the arguments as a dict, or raise InvalidInput naming each offending argument."""
        args = dict(arguments or {})
        errors = sorted(self._validator.iter_errors(args), key=lambda e: (list(e.absolute_path), str(e.validator)))
        if not errors:
            return args
        problems = "; ".join(dict.fromkeys(describe_error(e, self._properties) for e in errors))
        required = self.schema.get("required", [])
        usage = ", ".join(
            f"{name}{'' if name in required else '?'}: {self._type_of(name)}" for name in self._properties
        )
        raise InvalidInput(
            f"invalid arguments for tool {self.tool}: {problems}",
            hint=f"expected arguments {{{usage}}} (? = optional)",
        )

    def _type_of(self, name: str) -> str:
        prop = self._properties.get(name, {})
        kind = prop.get("type", "any") if isinstance(prop, Mapping) else "any"
        return "|".join(kind) if isinstance(kind, list) else str(kind)
