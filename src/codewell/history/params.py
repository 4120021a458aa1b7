"""Checks of history query arguments the schemas cannot express (or that REST and the CLI skip), and cursors.

The MCP schemas enforce the same bounds first (`maxLength`, `maxItems`, ranges); these checks make the
service safe for every caller and give the specific message.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Any

import re2

from codewell.core.errors import InvalidInput

# Longest filter value per parameter. Values become SQL LIKE patterns, and SQLite refuses patterns over
# 50,000 bytes ("LIKE or GLOB pattern too complex"); no message phrase, author or path needs more.
MAX_TERM_CHARS = 1_000
MAX_PATH_CHARS = 4_096
TERM_LIMITS = {"messageTerms": MAX_TERM_CHARS, "authors": MAX_TERM_CHARS, "files": MAX_PATH_CHARS}
# Values of one of those kinds are ORed into one SQL expression; SQLite caps expression depth at 1,000.
MAX_TERMS = 100


def int_param(value: int | None, name: str, default: int, low: int, high: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(
            f"`{name}` must be an integer from {low} to {high}, got {value!r}",
            hint=f"omit `{name}` for the default ({default})",
        )
    return value


def terms(values: Sequence[str] | None, name: str) -> list[str]:
    """The non-blank values of a list parameter, stripped; InvalidInput when they are not strings or too long."""
    if values is None:
        return []
    if isinstance(values, str) or not all(isinstance(v, str) for v in values):
        raise InvalidInput(f"`{name}` must be an array of strings", hint=f'e.g. "{name}": ["fix"]')
    limit = TERM_LIMITS.get(name)
    if limit is not None and len(values) > MAX_TERMS:
        raise InvalidInput(
            f"`{name}` has {len(values)} values; at most {MAX_TERMS} are allowed",
            hint="split the query over several calls, or use fewer, more specific values",
        )
    if limit is not None and (long := next((v for v in values if len(v) > limit), None)) is not None:
        raise InvalidInput(
            f"a value of `{name}` is {len(long)} characters long; at most {limit} are allowed",
            hint=f"`{name}` matches substrings: a shorter distinctive part finds the same commits",
        )
    return [v.strip() for v in values if v.strip()]


def compile_regex(pattern: str, param: str) -> Any:
    try:
        return re2.compile(pattern)
    except Exception as exc:  # re2.error has no stable public name across versions
        raise InvalidInput(
            f"invalid regular expression in `{param}`: {pattern!r} ({exc})",
            hint="RE2 syntax; escape special characters like ( [ . with a backslash",
        ) from None


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        offset = data["o"]
        if not isinstance(offset, int) or offset < 0:
            raise ValueError
        return offset
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise InvalidInput("invalid `after` cursor", hint="pass the endCursor of the previous page unchanged") from None
