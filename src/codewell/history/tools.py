"""MCP tools of the history capability: commit_search, diff_search, compare_revisions, get_contributor_repos.

Thin: parse arguments, call HistoryService with the acting user, render text agents read plus
structuredContent in the reference shapes (behaviour-notes §1), with a few additive fields.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from codewell.core.errors import InvalidInput
from codewell.core.tools import Endpoint, ToolContext, ToolResult, ToolSpec
from codewell.history import service as svc
from codewell.history.diffs import DiffHunk, FileDiff
from codewell.history.service import CommitInfo, HistoryService

CORE_AND_ALL = frozenset({Endpoint.CORE, Endpoint.ALL})
ALL_ONLY = frozenset({Endpoint.ALL})
MAX_MESSAGE_LINES = 12

_STRINGS = {"type": "array", "items": {"type": "string"}}
_DATE_HELP = "YYYY-MM-DD, an ISO timestamp, or relative like `2 weeks ago`"


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def commit_url(ctx: ToolContext, repo: str, sha: str) -> str:
    return f"{ctx.runtime.external_url}/{repo}/-/commit/{sha}"


def _strings(args: dict[str, Any], name: str) -> list[str] | None:
    value = args.get(name)
    if value is None:
        return None
    if isinstance(value, str):
        return [value]  # agents often pass one value without the array
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidInput(f"`{name}` must be an array of strings", hint=f'e.g. "{name}": ["value"]')
    return value


def _bool(args: dict[str, Any], name: str) -> bool | None:
    value = args.get(name)
    if value is not None and not isinstance(value, bool):
        raise InvalidInput(f"`{name}` must be true or false", hint=f"omit `{name}` or pass a boolean")
    return value


def _query_text(args: dict[str, Any], names: list[str]) -> str:
    parts = []
    for name in names:
        value = args.get(name)
        if value not in (None, [], ""):
            shown = ",".join(value) if isinstance(value, list) else str(value)
            parts.append(f"{name}:{shown}")
    return " ".join(parts)


def _commit_header(commit: CommitInfo) -> str:
    return (
        f"{commit.repo}@{commit.sha[:12]} · {commit.committed_at:%Y-%m-%d %H:%M} UTC · "
        f"{commit.author_name} <{commit.author_email}>"
    )


def _notes(unknown: list[str], limit_hit: bool, timed_out: bool, noun: str) -> list[str]:
    lines = []
    if unknown:
        lines.append(f"Repositories not found (not searched): {', '.join(unknown)}")
    if timed_out:
        lines.append(f"Search stopped at its time limit; more {noun} may match. Narrow the repos or date range.")
    elif limit_hit:
        lines.append(f"More {noun} match: raise `count` or narrow the filters.")
    return lines


# ---- commit_search ---------------------------------------------------------------------------------------


def commit_search(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    result = ctx.runtime.get(HistoryService).commit_search(
        ctx.actor,
        _strings(args, "repos") or [],
        message_terms=_strings(args, "messageTerms"),
        authors=_strings(args, "authors"),
        content_terms=_strings(args, "contentTerms"),
        files=_strings(args, "files"),
        after=args.get("after"),
        before=args.get("before"),
        revisions=_strings(args, "revisions"),
        count=args.get("count"),
    )
    blocks = [f"Found {len(result.commits)} commit{'s' if len(result.commits) != 1 else ''}."]
    blocks[0] += "\n" + "\n".join(_notes(result.unknown_repos, result.limit_hit, result.timed_out, "commits"))
    for commit in result.commits:
        message = commit.message.splitlines()
        body = "\n".join(f"    {line}" for line in message[:MAX_MESSAGE_LINES])
        if len(message) > MAX_MESSAGE_LINES:
            body += f"\n    ... ({len(message) - MAX_MESSAGE_LINES} more lines)"
        block = f"{_commit_header(commit)}\n{body}\nURL: {commit_url(ctx, commit.repo, commit.sha)}"
        if commit.refs:
            block += "\nBranches: " + ", ".join(r.removeprefix("refs/heads/") for r in commit.refs)
        blocks.append(block)
    structured = {
        "query": _query_text(
            args, ["repos", "messageTerms", "authors", "contentTerms", "files", "after", "before", "revisions"]
        ),
        "totalCount": len(result.commits),
        "limitHit": result.limit_hit,
        "timedOut": result.timed_out,
        "unknownRepos": result.unknown_repos,
        "commits": [
            {
                "repository": c.repo,
                "commit": c.sha,
                "author": f"{c.author_name} <{c.author_email}>",
                "authorName": c.author_name,
                "authorEmail": c.author_email,
                "date": c.committed_at.isoformat(),
                "authorDate": c.authored_at.isoformat(),
                "title": c.subject,
                "message": c.message,
                "parents": list(c.parents),
                "files": list(c.paths),
                "branches": list(c.refs),
                "url": commit_url(ctx, c.repo, c.sha),
            }
            for c in result.commits
        ],
    }
    return ToolResult("\n\n".join(b.rstrip() for b in blocks), structured)


# ---- diff_search -----------------------------------------------------------------------------------------


def _render_hunk(path: str, hunk: DiffHunk) -> tuple[str, list[dict[str, int]]]:
    """A hunk as text (`>` marks matching lines) and its match ranges as (line index, start, end) in the text."""
    lines = [f"--- {path}", hunk.header]
    ranges: list[dict[str, int]] = []
    for line in hunk.lines:
        marker = ">" if line.ranges else " "
        prefix = f"{marker}{line.origin}"
        for start, end in line.ranges:
            ranges.append({"line": len(lines), "start": start + len(prefix), "end": end + len(prefix)})
        lines.append(f"{prefix}{line.text}")
    return "\n".join(lines), ranges


def diff_search(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    pattern = args.get("pattern")
    if not isinstance(pattern, str):
        raise InvalidInput("`pattern` is required (a string)", hint='e.g. "pattern": "TODO"')
    result = ctx.runtime.get(HistoryService).diff_search(
        ctx.actor,
        pattern,
        _strings(args, "repos") or [],
        added=_bool(args, "added"),
        removed=_bool(args, "removed"),
        authors=_strings(args, "authors"),
        after=args.get("after"),
        before=args.get("before"),
        revisions=_strings(args, "revisions"),
        count=args.get("count"),
    )
    header = f"Found {len(result.matches)} commit{'s' if len(result.matches) != 1 else ''} with matching changes."
    blocks = ["\n".join([header, *_notes(result.unknown_repos, result.limit_hit, result.timed_out, "commits")])]
    results = []
    for match in result.matches:
        commit = match.commit
        rendered = [_render_hunk(path, hunk) for path, hunk in match.hunks]
        diff_text = "\n".join(text for text, _ in rendered)
        offset, ranges = 0, list[dict[str, int]]()
        for text, hunk_ranges in rendered:
            ranges.extend({**r, "line": r["line"] + offset} for r in hunk_ranges)
            offset += text.count("\n") + 1
        url = commit_url(ctx, commit.repo, commit.sha)
        blocks.append(f"{_commit_header(commit)}\n    {commit.subject}\nURL: {url}\n{diff_text}")
        results.append(
            {
                "repository": commit.repo,
                "commit": commit.sha,
                "diffHunk": diff_text,
                "url": url,
                "matchRanges": ranges,
                "authorName": commit.author_name,
                "authorEmail": commit.author_email,
                "date": commit.committed_at.isoformat(),
                "message": commit.message,
            }
        )
    structured = {
        "query": _query_text(args, ["pattern", "repos", "added", "removed", "authors", "after", "before", "revisions"]),
        "totalCount": len(results),
        "limitHit": result.limit_hit,
        "timedOut": result.timed_out,
        "unknownRepos": result.unknown_repos,
        "results": results,
    }
    return ToolResult("\n\n".join(b.rstrip() for b in blocks), structured)


# ---- compare_revisions -----------------------------------------------------------------------------------


def _file_json(file: FileDiff) -> dict[str, Any]:
    data: dict[str, Any] = {
        "path": file.path,
        "status": file.status,
        "added": file.added,
        "deleted": file.deleted,
        "binary": file.binary,
        "hunks": [
            {
                "oldRange": {"startLine": h.old_start, "lines": h.old_lines},
                "newRange": {"startLine": h.new_start, "lines": h.new_lines},
                "section": h.section,
                "body": h.body(),
            }
            for h in file.hunks
        ],
    }
    if file.old_path != file.path:
        data["oldPath"] = file.old_path
    if file.truncated:
        data["truncated"] = True
    return data


def compare_revisions(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    comparison = ctx.runtime.get(HistoryService).compare(
        ctx.actor,
        args.get("repo", ""),
        args.get("base", ""),
        args.get("head", ""),
        first=args.get("first"),
        after=args.get("after"),
    )
    c = comparison
    lines = [
        f"Comparing {c.repo}: {c.base} ({c.base_commit[:12]}) → {c.head} ({c.head_commit[:12]})",
        f"{c.total_files} files changed, {c.total_added} insertions(+), {c.total_deleted} deletions(-)",
        f"URL: {ctx.runtime.external_url}/{c.repo}/-/compare/{quote(c.base, safe='')}...{quote(c.head, safe='')}",
    ]
    blocks = ["\n".join(lines)]
    for file in c.files:
        name = f"{file.old_path} → {file.path}" if file.old_path != file.path else file.path
        head = f"# {name} ({file.status}, +{file.added} -{file.deleted})"
        if file.binary:
            blocks.append(f"{head}\nBinary file")
            continue
        body = "\n".join(f"{h.header}\n{h.body().rstrip()}" for h in file.hunks)
        blocks.append(f"{head}\n{body}" + ("\n... (diff truncated)" if file.truncated else ""))
    if c.has_next_page:
        blocks.append(f"More files: call again with after={c.end_cursor!r}")
    structured = {
        "repository": c.repo,
        "base": c.base,
        "head": c.head,
        "baseCommit": c.base_commit,
        "headCommit": c.head_commit,
        "totalAdded": c.total_added,
        "totalDeleted": c.total_deleted,
        "totalModified": c.total_files,
        "files": [_file_json(f) for f in c.files],
        "hasNextPage": c.has_next_page,
        "endCursor": c.end_cursor,
    }
    return ToolResult("\n\n".join(blocks), structured)


# ---- get_contributor_repos -------------------------------------------------------------------------------


def get_contributor_repos(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    authors = _strings(args, "authors") or []
    repos = ctx.runtime.get(HistoryService).contributor_repos(
        ctx.actor, authors, limit=args.get("limit"), min_commits=args.get("minCommits")
    )
    if not repos:
        text = f"No repositories with commits by {', '.join(authors)}."
    else:
        text = "\n".join(
            f"{r.repo} - {r.commit_count} commit{'s' if r.commit_count != 1 else ''}, last {r.last_commit_at:%Y-%m-%d}"
            for r in repos
        )
    structured = {
        "repositories": [
            {
                "repoName": r.repo,
                "repoCommitCount": r.commit_count,
                "repoMostRecentCommitDate": r.last_commit_at.isoformat(),
            }
            for r in repos
        ]
    }
    return ToolResult(text, structured)


# Filter parameters commit_search and diff_search share: one wording for both tools.
_FILTERS: dict[str, dict[str, Any]] = {
    "repos": {**_STRINGS, "description": "Repository names; /regex/ entries match names"},
    "authors": {**_STRINGS, "description": "Author name or e-mail substrings (case-insensitive)"},
    "after": {"type": "string", "description": f"Only commits after this date: {_DATE_HELP}"},
    "before": {"type": "string", "description": f"Only commits before this date: {_DATE_HELP}"},
    "revisions": {**_STRINGS, "description": "Branches, tags or ref globs (refs/heads/release-*)"},
}

TOOLS: list[ToolSpec] = [
    ToolSpec(
        name="commit_search",
        description=(
            "Search commits in the given repositories by message, author, changed code, changed files, date range "
            "and revisions. Filter kinds are ANDed; several values of one kind are ORed. Newest first."
        ),
        input_schema=_schema(
            {
                "repos": _FILTERS["repos"],
                "messageTerms": {**_STRINGS, "description": "Substrings of the commit message (case-insensitive)"},
                "authors": _FILTERS["authors"],
                "contentTerms": {**_STRINGS, "description": "Commits whose diff adds or removes one of these strings"},
                "files": {**_STRINGS, "description": "Substrings of changed file paths"},
                "after": _FILTERS["after"],
                "before": _FILTERS["before"],
                "revisions": _FILTERS["revisions"],
                "count": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": svc.COMMIT_COUNT_MAX,
                    "default": svc.COMMIT_COUNT_DEFAULT,
                },
            },
            ["repos"],
        ),
        handler=commit_search,
        endpoints=CORE_AND_ALL,
    ),
    ToolSpec(
        name="diff_search",
        description=(
            "Search the code changes (diffs) of commits for a pattern (RE2 regular expression, case-sensitive; a plain "
            "string matches literally). Returns matching hunks with the matching lines marked `>`, newest first."
        ),
        input_schema=_schema(
            {
                "pattern": {"type": "string", "description": "RE2 regular expression matched against changed lines"},
                "repos": _FILTERS["repos"],
                "added": {"type": "boolean", "description": "Only match added lines"},
                "removed": {"type": "boolean", "description": "Only match removed lines"},
                "authors": _FILTERS["authors"],
                "after": _FILTERS["after"],
                "before": _FILTERS["before"],
                "revisions": _FILTERS["revisions"],
                "count": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": svc.DIFF_COUNT_MAX,
                    "default": svc.DIFF_COUNT_DEFAULT,
                },
            },
            ["pattern", "repos"],
        ),
        handler=diff_search,
        endpoints=CORE_AND_ALL,
    ),
    ToolSpec(
        name="compare_revisions",
        description=(
            "Compare two revisions of a repository: per-file status (added/modified/deleted/renamed), line counts "
            "and hunks, with totals. Paginate over files with `after` = the previous endCursor."
        ),
        input_schema=_schema(
            {
                "repo": {"type": "string", "description": "Repository name"},
                "base": {"type": "string", "description": "Older revision (branch, tag or commit)"},
                "head": {"type": "string", "description": "Newer revision (branch, tag or commit)"},
                "first": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": svc.COMPARE_FIRST_MAX,
                    "default": svc.COMPARE_FIRST_DEFAULT,
                },
                "after": {"type": "string", "description": "Pagination cursor (endCursor of the previous page)"},
            },
            ["repo", "base", "head"],
        ),
        handler=compare_revisions,
        endpoints=ALL_ONLY,
    ),
    ToolSpec(
        name="get_contributor_repos",
        description=(
            "Repositories the given authors have committed to, with commit counts and most recent commit date, "
            "ordered by count then recency."
        ),
        input_schema=_schema(
            {
                "authors": {
                    **_STRINGS,
                    "maxItems": svc.CONTRIB_AUTHORS_MAX,
                    "description": "Author names or e-mail addresses (at most 5)",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": svc.CONTRIB_LIMIT_MAX,
                    "default": svc.CONTRIB_LIMIT_DEFAULT,
                },
                "minCommits": {"type": "integer", "minimum": 1, "default": 1},
            },
            ["authors"],
        ),
        handler=get_contributor_repos,
        endpoints=ALL_ONLY,
    ),
]
