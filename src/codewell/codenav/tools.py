"""MCP tools of the codenav capability: go_to_definition and find_references (on /.api/mcp/all only).

Thin: parse arguments, call CodeNavService with the acting user, render in the search block format.
"""

from __future__ import annotations

from typing import Any

from codewell.codenav import render
from codewell.codenav.languages import grammar_of
from codewell.codenav.service import DEFAULT_LIMIT, MAX_LIMIT, CodeNavService
from codewell.core.errors import InvalidInput
from codewell.core.tools import Endpoint, ToolContext, ToolResult, ToolSpec

ALL_ONLY = frozenset({Endpoint.ALL})

_REPO = {"type": "string", "description": "Repository name as list_repos shows it, e.g. `github.com/org/project`."}
_SYMBOL = {
    "type": "string",
    "description": "The identifier as written in the file, e.g. `parse`; qualify it to disambiguate: "
    "`Config.load`, `os.path.join`, `util.Square`.",
}
_REVISION = {
    "type": "string",
    "description": "Branch, tag or commit SHA. Default: the repository's default branch.",
}


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _str(args: dict[str, Any], name: str, *, required: bool = False) -> str | None:
    value = args.get(name)
    if value is None:
        if required:
            raise InvalidInput(f"`{name}` is required", hint=f'pass "{name}": "..."')
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"`{name}` must be a string", hint=f'e.g. "{name}": "..."')
    return value


def _language(path: str) -> str:
    grammar = grammar_of(path)
    return grammar.label if grammar else ""


def go_to_definition(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    path = _str(args, "path", required=True) or ""
    result = ctx.runtime.get(CodeNavService).go_to_definition(
        ctx.actor,
        _str(args, "repo", required=True) or "",
        path,
        _str(args, "symbol", required=True) or "",
        _str(args, "revision"),
    )
    return ToolResult(render.definitions_text(result), render.definitions_json(result), language=_language(path))


def find_references(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    path = _str(args, "path", required=True) or ""
    limit = args.get("limit", DEFAULT_LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, int | float) or int(limit) != limit:
        raise InvalidInput("`limit` must be a whole number", hint='e.g. "limit": 10')
    result = ctx.runtime.get(CodeNavService).find_references(
        ctx.actor,
        _str(args, "repo", required=True) or "",
        path,
        _str(args, "symbol", required=True) or "",
        _str(args, "revision"),
        int(limit),
    )
    return ToolResult(render.references_text(result), render.references_json(result), language=_language(path))


TOOLS: list[ToolSpec] = [
    ToolSpec(
        name="go_to_definition",
        description=(
            "Find where `symbol`, as used in file `path`, is defined: the same file first, then what the file "
            "imports, then the same repository, then other repositories that provide the imported package. "
            "Returns the definition snippet(s) as `# repo – path` blocks with the kind, container, resolved commit "
            "and how it was found (`syntactic`: resolved through the file's scope and imports; `search-based`: "
            "matched by name only). Several candidates are ranked, best first. "
            'Example: {"repo": "github.com/org/project", "path": "src/app.py", "symbol": "load_config"}.'
        ),
        input_schema=_schema(
            {
                "repo": _REPO,
                "path": {"type": "string", "description": "The file that uses the symbol, relative to the root."},
                "symbol": _SYMBOL,
                "revision": _REVISION,
            },
            ["repo", "path", "symbol"],
        ),
        handler=go_to_definition,
        endpoints=ALL_ONLY,
    ),
    ToolSpec(
        name="find_references",
        description=(
            "Find references to `symbol` defined in file `path`: identifier occurrences (not comments or "
            "strings) in the files that can see the definition (same file, same package, files importing it, "
            "other repositories depending on it), the definition itself excluded, grouped by file and ranked "
            "same file → same package → same repository → other repositories. At most `limit` references are "
            "shown; the output says how many more exist. "
            'Example: {"repo": "github.com/org/project", "path": "src/config.py", "symbol": "load_config"}.'
        ),
        input_schema=_schema(
            {
                "repo": _REPO,
                "path": {"type": "string", "description": "The file that defines the symbol, relative to the root."},
                "symbol": _SYMBOL,
                "revision": _REVISION,
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_LIMIT,
                    "default": DEFAULT_LIMIT,
                    "description": f"Maximum references to show (1-{MAX_LIMIT}, default {DEFAULT_LIMIT}).",
                },
            },
            ["repo", "path", "symbol"],
        ),
        handler=find_references,
        endpoints=ALL_ONLY,
    ),
]
