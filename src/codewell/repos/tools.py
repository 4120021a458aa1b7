"""MCP tools of the repos capability: list_repos, list_files, read_file, list_refs.

Thin: the registry has validated the arguments against the schemas below, so a handler passes them to
RepoService with the acting user and renders the reference text formats (behaviour-notes §1) plus
structured fields (repos.render, shared with the REST routes).
"""

from __future__ import annotations

from typing import Any

from codewell.core.tools import Endpoint, ToolContext, ToolResult, ToolSpec
from codewell.repos import render
from codewell.repos.service import (
    LIST_REFS_DEFAULT,
    LIST_REFS_MAX,
    LIST_REPOS_DEFAULT,
    LIST_REPOS_MAX,
    MAX_NAME_CHARS,
    RepoService,
)

CORE_AND_ALL = frozenset({Endpoint.CORE, Endpoint.ALL})
ALL_ONLY = frozenset({Endpoint.ALL})

_REPO = {
    "type": "string",
    "description": "Repository name as list_repos shows it, e.g. `github.com/org/project` or `local/project`.",
}
_REVISION = {
    "type": "string",
    "description": "Branch, tag or commit SHA (full or at least 4 hex digits), or `HEAD`. "
    "Default: the repository's default branch.",
}


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _int(args: dict[str, Any], name: str) -> int | None:
    # The schema accepts JSON numbers like 10.0 as integers (draft 2020-12); the service wants an int.
    value = args.get(name)
    return None if value is None else int(value)


def _service(ctx: ToolContext) -> RepoService:
    return ctx.runtime.get(RepoService)


def list_repos(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    limit = _int(args, "limit")
    page = _service(ctx).list_repos(ctx.actor, args["query"], LIST_REPOS_DEFAULT if limit is None else limit)
    return ToolResult(render.repos_text(page), render.repos_json(page))


def list_files(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    listing = _service(ctx).list_files(ctx.actor, args["repo"], args.get("path", ""), args.get("revision"))
    return ToolResult(render.files_text(listing), render.files_json(listing))


def read_file(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    content = _service(ctx).read_file(
        ctx.actor,
        args["repo"],
        args["path"],
        _int(args, "startLine"),
        _int(args, "endLine"),
        args.get("revision"),
    )
    return ToolResult(render.file_text(content), render.file_json(content))


def list_refs(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    limit = _int(args, "limit")
    refs = _service(ctx).list_refs(
        ctx.actor,
        args["repo"],
        tags_only=args.get("tagsOnly", False),
        heads_only=args.get("headsOnly", False),
        contains_commit=args.get("containsCommit"),
        limit=LIST_REFS_DEFAULT if limit is None else limit,
    )
    return ToolResult(render.refs_text(refs), render.refs_json(refs))


TOOLS: list[ToolSpec] = [
    ToolSpec(
        name="list_repos",
        description=(
            "List repositories whose name contains `query` (case-insensitive substring; empty string lists all). "
            "One repository per line: `<name> [★<stars>] - <description>`. If more exist than `limit`, the "
            "output ends with a note and structured `hasMoreResults` is true. "
            'Example: {"query": "kernel", "limit": 20}.'
        ),
        input_schema=_schema(
            {
                "query": {
                    "type": "string",
                    "maxLength": MAX_NAME_CHARS,
                    "description": "Substring of repository names, e.g. `org/api`.",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": LIST_REPOS_MAX,
                    "default": LIST_REPOS_DEFAULT,
                    "description": f"Maximum repositories to return (1-{LIST_REPOS_MAX}, default 50).",
                },
            },
            ["query"],
        ),
        handler=list_repos,
        endpoints=CORE_AND_ALL,
    ),
    ToolSpec(
        name="list_files",
        description=(
            "List the direct children of a directory in a repository: directories first (ending in `/`), then "
            "files, one repo-relative path per line, at most 1000 entries. Omit `path` for the root. "
            'Example: {"repo": "github.com/org/project", "path": "src"}.'
        ),
        input_schema=_schema(
            {
                "repo": _REPO,
                "path": {
                    "type": "string",
                    "description": "Directory relative to the repository root, e.g. `src/lib`; default the root.",
                },
                "revision": _REVISION,
            },
            ["repo"],
        ),
        handler=list_files,
        endpoints=CORE_AND_ALL,
    ),
    ToolSpec(
        name="read_file",
        description=(
            "Read a file from a repository with line numbers. The first line is `URL: ...` (including the "
            'resolved commit), then one `<lineno>: <text>` line per source line: a file "abc\\ndef" is returned '
            'as "1: abc\\n2: def". Use `startLine`/`endLine` (1-based, inclusive) for a range. Files over '
            "128 KB return their first 200 lines and a notice saying how to read further; binary files return "
            "their size and type instead of content. "
            'Example: {"repo": "github.com/org/project", "path": "src/main.py", "startLine": 10, "endLine": 40}.'
        ),
        input_schema=_schema(
            {
                "repo": _REPO,
                "path": {"type": "string", "description": "File path relative to the repository root."},
                "startLine": {"type": "integer", "minimum": 1, "description": "First line to return (1-based)."},
                "endLine": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Last line to return (inclusive); past the end means the last line.",
                },
                "revision": _REVISION,
            },
            ["repo", "path"],
        ),
        handler=read_file,
        endpoints=CORE_AND_ALL,
    ),
    ToolSpec(
        name="list_refs",
        description=(
            "List a repository's branches and tags with the commit each points to (annotated tags are peeled "
            "to their commit). Set `headsOnly` for branches only or `tagsOnly` for tags only (both unset: both "
            "kinds); `containsCommit` keeps only refs whose history contains that commit. The default branch "
            'comes first. Example: {"repo": "github.com/org/project", "tagsOnly": true, "limit": 20}.'
        ),
        input_schema=_schema(
            {
                "repo": _REPO,
                "tagsOnly": {"type": "boolean", "default": False, "description": "Only tags."},
                "headsOnly": {"type": "boolean", "default": False, "description": "Only branches."},
                "containsCommit": {
                    "type": "string",
                    "description": "A commit SHA (or branch/tag); only refs whose history contains it.",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": LIST_REFS_MAX,
                    "default": LIST_REFS_DEFAULT,
                    "description": f"Maximum refs to return (1-{LIST_REFS_MAX}, default 100).",
                },
            },
            ["repo"],
        ),
        handler=list_refs,
        endpoints=ALL_ONLY,
    ),
]
