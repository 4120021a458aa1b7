"""Tool argument validation against each tool's JSON Schema, with messages that name the argument.

jsonschema costs 0.15-0.3 ms per call even on valid arguments, a tenth of a whole MCP call. So each schema is
also compiled into a plain predicate (`compile_check`) for the keywords our tools use; it only ever accepts
(arguments it passes are valid for jsonschema too), and anything it does not accept, or a schema using any other
keyword, goes through jsonschema, which decides and words the errors.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
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


Check = Callable[[Any], bool]

# Keywords that never reject anything (annotations).
_ANNOTATIONS = frozenset({"$schema", "$comment", "description", "default", "title", "examples", "deprecated"})
# Exact Python types per JSON type, so that True is no integer and 1.0 (an integer to JSON Schema) is left to
# jsonschema: the predicate may refuse what is valid, never accept what is not.
_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}
_BOUNDS: dict[str, Callable[[Any, Any], bool]] = {
    "minimum": lambda v, b: v >= b,
    "maximum": lambda v, b: v <= b,
    "exclusiveMinimum": lambda v, b: v > b,
    "exclusiveMaximum": lambda v, b: v < b,
}
_SIZES: dict[str, Callable[[int, int], bool]] = {
    "minLength": lambda n, b: n >= b,
    "maxLength": lambda n, b: n <= b,
    "minItems": lambda n, b: n >= b,
    "maxItems": lambda n, b: n <= b,
}


def compile_check(schema: Mapping[str, Any]) -> Check | None:
    """A predicate true only for instances valid under `schema`, or None when the schema uses a keyword (or a
    form of one) it does not handle: one JSON type per schema; bounds, sizes, string enums, patterns, array
    items, object properties, required and additionalProperties."""
    kind = schema.get("type")
    if not isinstance(kind, str) or kind not in _TYPES:
        return None
    types = _TYPES[kind]
    checks: list[Check] = [lambda v: type(v) in types]
    for key, value in schema.items():
        check = _keyword_check(key, value, schema)
        if check is False:
            return None
        if check is not True:
            checks.append(check)
    return lambda v: all(check(v) for check in checks)


def _keyword_check(key: str, value: Any, schema: Mapping[str, Any]) -> Check | bool:
    """The predicate for one keyword; True when it adds nothing to check, False when it is not handled."""
    if key in _ANNOTATIONS or key in {"type", "required"}:
        return True
    if key in _BOUNDS and type(value) in (int, float):
        bound, compare = value, _BOUNDS[key]
        return lambda v: compare(v, bound)
    if key in _SIZES and type(value) is int:
        size, fits = value, _SIZES[key]
        return lambda v: fits(len(v), size)
    if key == "enum" and isinstance(value, list) and all(type(e) is str for e in value):
        allowed = frozenset(value)
        return lambda v: v in allowed
    if key == "pattern" and isinstance(value, str):
        pattern = re.compile(value)  # jsonschema matches with re.search too
        return lambda v: pattern.search(v) is not None
    if key == "items" and isinstance(value, Mapping):
        item = compile_check(value)
        return False if item is None else (lambda v: all(item(x) for x in v))
    if key == "properties" and isinstance(value, Mapping):
        return _properties_check(value, schema)
    # additionalProperties is checked with the properties.
    return key == "additionalProperties" and isinstance(value, bool)


def _properties_check(properties: Mapping[str, Any], schema: Mapping[str, Any]) -> Check | bool:
    compiled: dict[str, Check] = {}
    for name, sub in properties.items():
        one = compile_check(sub) if isinstance(sub, Mapping) else None
        if one is None:
            return False
        compiled[name] = one
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return False
    closed = schema.get("additionalProperties", True) is False

    def check(v: dict[str, Any]) -> bool:
        for name, value in v.items():
            sub = compiled.get(name)
            if sub is None:
                if closed:
                    return False
            elif not sub(value):
                return False
        return all(name in v for name in required)

    return check


class ArgumentValidator:
    """A compiled validator for one tool; `validate` raises InvalidInput listing every problem."""

    def __init__(self, tool: str, schema: Mapping[str, Any]) -> None:
        self.tool = tool
        self.schema = dict(schema)
        self._properties: Mapping[str, Any] = self.schema.get("properties", {}) or {}
        self._validator = Draft202012Validator(self.schema)
        self._accepts = compile_check(self.schema)

    def validate(self, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """Return the arguments as a dict, or raise InvalidInput naming each offending argument."""
        args = dict(arguments or {})
        if self._accepts is not None and self._accepts(args):
            return args
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
