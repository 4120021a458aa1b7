"""Tool results on the wire: the reference envelope, the output budget and error results.

Envelope (what agents of the reference system are used to): one text content item whose text is the JSON
string `{"text": "<rendered text>"}`, and `structuredContent` = `{"text": ..., **structured fields}`.
Errors: `isError: true` with the plain message in `content[0].text`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as types
import orjson

from codewell.core.errors import CodewellError
from codewell.core.tools import ToolResult

# ≈ 20k tokens at ~4 characters per token (code and paths tokenize at 3-4 characters per token).
OUTPUT_BUDGET_TOKENS = 20_000
CHARS_PER_TOKEN = 4
OUTPUT_BUDGET_CHARS = OUTPUT_BUDGET_TOKENS * CHARS_PER_TOKEN

_NUMBERED_LINE = re.compile(r"^(\d+): ", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class WireResult:
    """A tools/call result: `wire()` is the JSON object sent, `result` the same as an SDK model."""

    text: str  # content[0].text
    structured: dict[str, Any] | None
    is_error: bool
    size: int
    truncated: bool

    def wire(self) -> dict[str, Any]:
        """The result object exactly as the SDK serializes it for the handshake era (built without pydantic)."""
        body: dict[str, Any] = {"content": [{"type": "text", "text": self.text}], "isError": self.is_error}
        if self.structured is not None:
            body["structuredContent"] = self.structured
        return body

    @property
    def result(self) -> types.CallToolResult:
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=self.text)],
            structured_content=self.structured,
            is_error=self.is_error,
        )


def _continuation_hint(tool: str, kept_text: str, schema: Mapping[str, Any]) -> str:
    """How to get the rest, phrased with the arguments this tool actually has."""
    properties = schema.get("properties", {}) or {}
    if "startLine" in properties:
        numbers = _NUMBERED_LINE.findall(kept_text)
        if numbers:
            return f"call {tool} again with startLine={int(numbers[-1]) + 1} to read the rest"
        return f"call {tool} with startLine/endLine to read a smaller range"
    for name in ("limit", "count", "first"):
        if name in properties:
            return f"call {tool} with a lower {name} or narrower filters"
    if "after" in properties:
        return f"call {tool} again with the `after` cursor or narrower filters"
    if "path" in properties:
        return f"call {tool} with a narrower path"
    return "narrow the request (more specific query or filters) to see the rest"


def truncate_text(
    tool: str, text: str, schema: Mapping[str, Any], budget: int = OUTPUT_BUDGET_CHARS
) -> tuple[str, bool]:
    """Cut `text` at a line boundary within `budget` characters and append an explicit truncation note."""
    if len(text) <= budget:
        return text, False
    cut = text.rfind("\n", 0, budget - 400)
    kept = text[: cut if cut > 0 else budget - 400]
    shown_lines = kept.count("\n") + 1
    total_lines = text.count("\n") + 1
    note = (
        f"\n\n[output truncated: showing {shown_lines} of {total_lines} lines "
        f"({len(kept)} of {len(text)} characters) to stay within the ~{OUTPUT_BUDGET_TOKENS // 1000}k-token "
        f"output budget; {_continuation_hint(tool, kept, schema)}]"
    )
    return kept + note, True


def _json_size(value: Any) -> int:
    """Bytes of `value` as compact JSON (what `fastpath.encode` sends; ≥ its characters). orjson: ~10× faster
    than json on a tool's structured fields, which every call measures (bench/mcp_bench.py)."""
    try:
        return len(orjson.dumps(value, default=str))
    except TypeError:  # what orjson refuses (integers beyond 64 bits, non-string keys, lone surrogates)
        return len(json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":")))


def _text_payload(text: str) -> str:
    """`json.dumps({"text": text}, ensure_ascii=False)`, through orjson: the same characters (orjson escapes
    the same ones), ~9× faster on a file's text."""
    try:
        return '{"text": ' + orjson.dumps(text).decode() + "}"
    except TypeError:  # a lone surrogate
        return json.dumps({"text": text}, ensure_ascii=False)


def _fit_structured(structured: Mapping[str, Any], budget: int) -> tuple[dict[str, Any], bool]:
    """Structured fields as they are, or only the scalar ones when the whole would exceed `budget`."""
    data = dict(structured)
    if _json_size(data) <= budget:
        return data, False
    scalars = {k: v for k, v in data.items() if isinstance(v, str | int | float | bool) or v is None}
    return scalars, True


def success_result(tool: str, result: ToolResult, schema: Mapping[str, Any]) -> WireResult:
    """The reference envelope for a successful call, held under the output budget."""
    text, truncated = truncate_text(tool, result.text, schema)
    structured: dict[str, Any] = {}
    if result.structured:
        remaining = max(OUTPUT_BUDGET_CHARS - len(text), 0)
        structured, dropped = _fit_structured(result.structured, remaining)
        truncated = truncated or dropped
        if dropped:
            structured["structuredTruncated"] = True
    structured["text"] = text
    payload = _text_payload(text)
    return WireResult(payload, structured, result.is_error, len(payload.encode()), truncated)


def error_result(message: str) -> WireResult:
    """An isError result carrying the plain message (clients show it to the model, which can self-correct)."""
    text, _ = truncate_text("", message, {}, budget=8_000)
    return WireResult(text, None, True, len(text.encode()), False)


def error_message(error: CodewellError) -> str:
    """`message` plus the hint when there is one: what went wrong and how to fix it."""
    return f"{error.message.rstrip('.')}. {error.hint}" if error.hint else error.message
