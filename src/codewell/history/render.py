"""Text and JSON renderings of history results, shared by the MCP tools and the REST routes.

The JSON shapes are the reference's structuredContent (behaviour-notes §1) with a few additive fields;
REST answers the same JSON. The tools also print text, and hold each answer under the MCP output budget:
a diff_search answer always lists every matching commit and keeps hunks newest commit first, saying how
to ask for a cut commit alone (compare_revisions pages: history.compare_page).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, timedelta
from typing import Any

from codewell.history.diffs import DiffHunk
from codewell.history.results import (
    CommitInfo,
    CommitSearchResult,
    ContributorRepo,
    DiffSearchResult,
)
from codewell.history.scope import describe_unknown
from codewell.http import urls

MAX_MESSAGE_LINES = 12
# The arguments echoed in the `query` field of commit_search and diff_search results, in this order.
COMMIT_QUERY = ("repos", "messageTerms", "authors", "contentTerms", "files", "after", "before", "revisions")
DIFF_QUERY = ("pattern", "repos", "added", "removed", "authors", "after", "before", "revisions")
# What one tool answer may hold, text plus structuredContent: the MCP output budget (mcp.results,
# ~20k tokens = 80,000 characters) less a margin for the envelope. A test keeps the two in step.
OUTPUT_BUDGET_CHARS = 80_000
PAGE_BUDGET_CHARS = OUTPUT_BUDGET_CHARS - 4_000


def query_text(values: Mapping[str, Any], names: Sequence[str]) -> str:
    """`name:value` pairs of the given arguments (lists comma-joined), the `query` field of the results."""
    parts = []
    for name in names:
        value = values.get(name)
        if value not in (None, [], ""):
            shown = ",".join(value) if isinstance(value, list) else str(value)
            parts.append(f"{name}:{shown}")
    return " ".join(parts)


def _commit_header(commit: CommitInfo) -> str:
    return (
        f"{commit.repo}@{commit.sha[:12]} · {commit.committed_at:%Y-%m-%d %H:%M} UTC · "
        f"{commit.author_name} <{commit.author_email}>"
    )


def _notes(unknown: list[str], suggestions: dict[str, str], limit_hit: bool, timed_out: bool, noun: str) -> list[str]:
    lines = []
    if unknown:
        lines.append(f"Repositories not found (not searched): {describe_unknown(unknown, suggestions)}")
    if timed_out:
        lines.append(f"Search stopped at its time limit; more {noun} may match. Narrow the repos or date range.")
    elif limit_hit:
        lines.append(f"More {noun} match: raise `count` or narrow the filters.")
    return lines


# ---- commit_search ---------------------------------------------------------------------------------------


def commits_json(result: CommitSearchResult, external_url: str, query: str) -> dict[str, Any]:
    return {
        "query": query,
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
                "url": urls.commit_url(external_url, c.repo, c.sha),
            }
            for c in result.commits
        ],
    }


def commits_text(result: CommitSearchResult, external_url: str) -> str:
    blocks = [f"Found {len(result.commits)} commit{'s' if len(result.commits) != 1 else ''}."]
    notes = _notes(result.unknown_repos, result.suggestions, result.limit_hit, result.timed_out, "commits")
    blocks[0] += "\n" + "\n".join(notes)
    for commit in result.commits:
        message = commit.message.splitlines()
        body = "\n".join(f"    {line}" for line in message[:MAX_MESSAGE_LINES])
        if len(message) > MAX_MESSAGE_LINES:
            body += f"\n    ... ({len(message) - MAX_MESSAGE_LINES} more lines)"
        url = urls.commit_url(external_url, commit.repo, commit.sha)
        block = f"{_commit_header(commit)}\n{body}\nURL: {url}"
        if commit.refs:
            block += "\nBranches: " + ", ".join(r.removeprefix("refs/heads/") for r in commit.refs)
        blocks.append(block)
    return "\n\n".join(b.rstrip() for b in blocks)


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


def diffs_json(result: DiffSearchResult, external_url: str, query: str) -> dict[str, Any]:
    results = []
    for match in result.matches:
        commit = match.commit
        rendered = [_render_hunk(path, hunk) for path, hunk in match.hunks]
        offset, ranges = 0, list[dict[str, int]]()
        for text, hunk_ranges in rendered:
            ranges.extend({**r, "line": r["line"] + offset} for r in hunk_ranges)
            offset += text.count("\n") + 1
        results.append(
            {
                "repository": commit.repo,
                "commit": commit.sha,
                "diffHunk": "\n".join(text for text, _ in rendered),
                "url": urls.commit_url(external_url, commit.repo, commit.sha),
                "matchRanges": ranges,
                "authorName": commit.author_name,
                "authorEmail": commit.author_email,
                "date": commit.committed_at.isoformat(),
                "message": commit.message,
            }
        )
    return {
        "query": query,
        "totalCount": len(results),
        "limitHit": result.limit_hit,
        "timedOut": result.timed_out,
        "unknownRepos": result.unknown_repos,
        "results": results,
    }


def _omitted_note(commit: CommitInfo) -> str:
    start = commit.committed_at.astimezone(UTC)
    after, before = start.isoformat(), (start + timedelta(seconds=1)).isoformat()
    return f"(matching hunks not shown: output budget; this commit alone: after={after!r}, before={before!r})"


def diffs_text(result: DiffSearchResult, data: Mapping[str, Any]) -> str:
    """The text of a diff_search answer; `data` is its `diffs_json` (the rendered hunks are reused)."""
    count = len(result.matches)
    header = f"Found {count} commit{'s' if count != 1 else ''} with matching changes."
    notes = _notes(result.unknown_repos, result.suggestions, result.limit_hit, result.timed_out, "commits")
    blocks = ["\n".join([header, *notes])]
    for match, item in zip(result.matches, data["results"], strict=True):
        commit = match.commit
        hunks = _omitted_note(commit) if item.get("hunksOmitted") else item["diffHunk"]
        blocks.append(f"{_commit_header(commit)}\n    {commit.subject}\nURL: {item['url']}\n{hunks}")
    return "\n\n".join(b.rstrip() for b in blocks)


def answer_size(text: str, data: Mapping[str, Any]) -> int:
    """Characters of a tool answer as the MCP output budget counts them: the text plus the JSON."""
    return len(text) + len(json.dumps(data, ensure_ascii=False, default=str))


def diffs_answer(
    result: DiffSearchResult, external_url: str, query: str, budget: int = PAGE_BUDGET_CHARS
) -> tuple[str, dict[str, Any]]:
    """Text and JSON of a diff_search answer within `budget` characters (the tool's answer).

    Every matching commit keeps its header (repository, SHA, date, author, subject, URL); the matching
    hunks are kept newest commit first while they fit, and a commit whose hunks do not fit says how to
    ask for it alone (its commit second as `after`/`before`).
    """
    data = diffs_json(result, external_url, query)
    text = diffs_text(result, data)
    if answer_size(text, data) <= budget:
        return text, data
    items: list[dict[str, Any]] = data["results"]
    bare = [{**item, "diffHunk": "", "matchRanges": [], "hunksOmitted": True} for item in items]

    def page(kept: list[bool]) -> tuple[str, dict[str, Any]]:
        cut = {
            **data,
            "results": [item if keep else empty for item, empty, keep in zip(items, bare, kept, strict=True)],
        }
        return diffs_text(result, cut), cut

    kept = [False] * len(items)
    remaining = budget - answer_size(*page(kept))
    for index, item in enumerate(items):
        cost = len(item["diffHunk"]) + len(json.dumps(item["diffHunk"], ensure_ascii=False))
        cost += len(json.dumps(item["matchRanges"]))
        if cost <= remaining:
            kept[index] = True
            remaining -= cost
    answer = page(kept)
    while answer_size(*answer) > budget and any(kept):
        kept[max(i for i, keep in enumerate(kept) if keep)] = False
        answer = page(kept)
    return answer


# ---- get_contributor_repos -------------------------------------------------------------------------------


def contributors_json(repos: Sequence[ContributorRepo]) -> dict[str, Any]:
    return {
        "repositories": [
            {
                "repoName": r.repo,
                "repoCommitCount": r.commit_count,
                "repoMostRecentCommitDate": r.last_commit_at.isoformat(),
            }
            for r in repos
        ]
    }


def contributors_text(repos: Sequence[ContributorRepo], authors: Sequence[str]) -> str:
    if not repos:
        return f"No repositories with commits by {', '.join(authors)}."
    return "\n".join(
        f"{r.repo} - {r.commit_count} commit{'s' if r.commit_count != 1 else ''}, last {r.last_commit_at:%Y-%m-%d}"
        for r in repos
    )
