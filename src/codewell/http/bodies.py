"""The one request-body policy of every route (issue #33): a size cap per route family, and JSON parsed with a
nesting-depth limit and standard numbers only.

- **Size.** `FAMILIES` gives each path prefix its cap. The request-context middleware refuses a declared
  `Content-Length` over it before the app runs, and counts the bytes of a chunked body as they arrive, so no
  request holds more than its family's cap in memory. The answer is 413 naming the limit, in the family's shape
  (the JSON error envelope, a JSON-RPC error for MCP, an OAuth error, or plain text for pages). Families whose
  limit is None read their bodies themselves with `read_body(request, limit)` against a larger, configured
  limit (SCIP uploads: `codeIntel.maxUploadBytes`; push webhooks: 5 MB, counted in their own metrics).
- **JSON.** `parse_json` accepts standard JSON (RFC 8259) nested at most `MAX_JSON_DEPTH` containers deep.
  Deeper documents are refused with 400 naming the limit (Python's parser would raise RecursionError past
  about a thousand levels, a 500, and shallower ones could still exhaust the stack of whatever walks them
  later); `NaN`, `Infinity` and `-Infinity`, which Python's parser accepts but JSON does not, are refused too.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import Scope

from codewell.core.errors import CodewellError, InvalidInput

KIB = 1024
MIB = 1024 * KIB
MAX_JSON_DEPTH = 64
# JSON-RPC 2.0's "Invalid Request" code: what an MCP client gets for a body over the cap.
JSONRPC_INVALID_REQUEST = -32600

Shape = Literal["json", "jsonrpc", "oauth", "page"]


@dataclass(frozen=True, slots=True)
class BodyFamily:
    """Routes whose request bodies share one size cap and one way of saying no."""

    name: str
    prefixes: tuple[str, ...]
    limit: int | None  # None: the route reads its body with a limit of its own (read_body)
    shape: Shape

    def matches(self, path: str) -> bool:
        return any(path == p or path.startswith(p if p.endswith("/") else p + "/") for p in self.prefixes)


# First match wins, so narrower prefixes come first. Every path matches the last family.
FAMILIES: tuple[BodyFamily, ...] = (
    BodyFamily("MCP", ("/.api/mcp",), 4 * MIB, "jsonrpc"),
    BodyFamily("SCIP upload", ("/.api/codeintel/upload",), None, "json"),  # codeIntel.maxUploadBytes
    BodyFamily("webhook", ("/.api/webhooks/",), None, "json"),  # codehosts.webhooks.MAX_BODY_BYTES
    BodyFamily("OAuth", ("/.auth/idp/oauth/",), 64 * KIB, "oauth"),
    BodyFamily("REST API", ("/.api/",), 1 * MIB, "json"),
    BodyFamily("analytics API", ("/analytics/api/",), 1 * MIB, "json"),
    BodyFamily("sign-in form", ("/sign-in", "/sign-up", "/sign-out", "/password-reset"), 64 * KIB, "page"),
    # SAML responses (signed XML, base64) are the largest bodies a sign-in provider posts: tens of KB.
    BodyFamily("sign-in provider", ("/.auth/",), 1 * MIB, "page"),
    # The site configuration form posts the whole configuration, repository lists included.
    BodyFamily("page form", ("/",), 4 * MIB, "page"),
)


def family_of(path: str) -> BodyFamily:
    for family in FAMILIES:
        if family.matches(path):
            return family
    return FAMILIES[-1]


def size_text(size: int) -> str:
    """1048576 → "1 MiB (1048576 bytes)": the unit people read and the exact number a client can compare."""
    for unit, scale in (("MiB", MIB), ("KiB", KIB)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit} ({size} bytes)"
    return f"{size} bytes"


class BodyTooLarge(CodewellError):
    """A request body over its route's cap: 413."""

    code = "payload_too_large"
    http_status = 413


def too_large(family: BodyFamily, limit: int) -> BodyTooLarge:
    return BodyTooLarge(
        f"the request body is larger than the {size_text(limit)} limit of {family.name} requests",
        hint="send a smaller body",
    )


class InvalidJson(InvalidInput):
    """A body that is not JSON, or JSON beyond the policy. `reason` says which, for JSON-RPC's error codes."""

    def __init__(self, reason: Literal["syntax", "depth", "number"], message: str, *, hint: str) -> None:
        super().__init__(message, hint=hint)
        self.reason = reason


def _not_json(what: str) -> InvalidJson:
    return InvalidJson("syntax", f"{what} is not valid JSON", hint="send a JSON object")


def _too_deep(what: str, limit: int) -> InvalidJson:
    return InvalidJson(
        "depth",
        f"{what} is JSON nested more than {limit} levels deep",
        hint=f"objects and arrays may nest at most {limit} levels",
    )


class _NonStandardNumber(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _constant(name: str) -> Any:
    raise _NonStandardNumber(name)


# JSON strings (valid ones: the scan runs only on a body that parsed), and every byte that is not a bracket.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = tuple(1 if b in b"[{" else -1 for b in range(256))


def _depth(raw: bytes) -> int:
    """How deep objects and arrays nest in the valid JSON `raw`: the brackets outside strings, counted at C speed
    (walking the parsed value took five times as long on a megabyte of empty arrays)."""
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def parse_json(raw: bytes, *, max_depth: int = MAX_JSON_DEPTH, what: str = "the request body") -> Any:
    """The JSON value of `raw`, or InvalidJson (400) saying what is wrong with `what`: not JSON, nested deeper than
    `max_depth`, or NaN/Infinity."""
    # Python's parser, not orjson: orjson reads integers beyond 64 bits as floats (an id or amount would change
    # value). Its C scanner raises RecursionError near a thousand levels, which is caught here.
    try:
        value = json.loads(raw, parse_constant=_constant)
    except RecursionError:
        raise _too_deep(what, max_depth) from None
    except _NonStandardNumber as exc:
        raise InvalidJson(
            "number", f"{what} contains {exc.name}, which is not a JSON number", hint="send finite numbers"
        ) from None
    except ValueError:  # UnicodeDecodeError included
        raise _not_json(what) from None
    # A document cannot nest deeper than it has brackets: most bodies skip the walk.
    if raw.count(b"[") + raw.count(b"{") > max_depth and _depth(raw) > max_depth:
        raise _too_deep(what, max_depth)
    return value


def _declared_length(request: Request) -> int | None:
    declared = request.headers.get("content-length", "")
    return int(declared) if declared.isdigit() else None


async def read_body(request: Request, limit: int | None = None, *, refuse: BodyTooLarge | None = None) -> bytes:
    """The whole body, refused (`refuse`, or BodyTooLarge naming the limit) by its declared length or as soon as
    the stream passes `limit` (the route family's cap when None): more than `limit` bytes are never held."""
    family = family_of(request.url.path)
    cap = limit if limit is not None else family.limit
    if cap is None:
        raise TypeError(f"{family.name} routes read their bodies with a limit of their own")
    error = refuse or too_large(family, cap)
    declared = _declared_length(request)
    if declared is not None and declared > cap:
        raise error
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise error
        chunks.append(chunk)
    return b"".join(chunks)


async def json_value(request: Request, limit: int | None = None, *, refuse: BodyTooLarge | None = None) -> Any:
    """The body's JSON value under the policy; an empty body reads as `{}` (an object with every field absent)."""
    raw = await read_body(request, limit, refuse=refuse)
    return parse_json(raw) if raw.strip() else {}


async def json_object(request: Request, limit: int | None = None) -> dict[str, Any]:
    """The body's JSON object under the policy; InvalidInput (400) for any other JSON value."""
    value = await json_value(request, limit)
    if not isinstance(value, dict):
        raise InvalidInput("the request body must be a JSON object", hint="send a JSON object: {...}")
    return value


def refusal(scope: Scope, error: BodyTooLarge) -> Response:
    """The 413 answer in the shape the route's family speaks (the middleware's refusal by Content-Length)."""
    family = family_of(scope.get("path", "/"))
    if family.shape == "jsonrpc":
        body: dict[str, Any] = {"code": JSONRPC_INVALID_REQUEST, "message": error.message}
        return JSONResponse({"jsonrpc": "2.0", "id": None, "error": body}, status_code=413)
    if family.shape == "oauth":
        return JSONResponse(
            {"error": "invalid_request", "error_description": error.message},
            status_code=413,
            headers={"Cache-Control": "no-store"},
        )
    accept = dict(scope.get("headers", [])).get(b"accept", b"")
    if family.shape == "json" or b"application/json" in accept:
        envelope: dict[str, Any] = {"code": error.code, "message": error.message}
        if error.hint:
            envelope["hint"] = error.hint
        return JSONResponse({"error": envelope}, status_code=413)
    return PlainTextResponse(str(error), status_code=413)
