"""Plain-text and JSON renderings of repos service results (the formats agents of the reference expect)."""

from __future__ import annotations

from typing import Any

from codewell.repos.service import FileContent, FileListing, RefList, Repo, RepoPage

MORE_REPOS = "(more results available - set a higher limit if you want to see more)"


def repo_line(repo: Repo) -> str:
    """`<repo> [★<stars>] - <description>`, the star and description parts omitted when absent."""
    line = repo.name
    if repo.stars is not None:
        line += f" ★{repo.stars}"
    if repo.description:
        line += f" - {repo.description}"
    return line


def repos_text(page: RepoPage) -> str:
    if not page.repos:
        return "No repositories found."
    text = "\n".join(repo_line(repo) for repo in page.repos)
    return text + (f"\n\n{MORE_REPOS}" if page.has_more else "")


def repo_json(repo: Repo) -> dict[str, Any]:
    return {
        "name": repo.name,
        "description": repo.description,
        "defaultBranch": repo.default_branch,
        "private": repo.private,
        "fork": repo.fork,
        "archived": repo.archived,
        "stars": repo.stars,
        "cloneURL": repo.clone_url,
        "syncState": repo.sync_state,
        "lastError": repo.last_error,
        "lastFetchedAt": repo.last_fetched_at.isoformat() if repo.last_fetched_at else None,
        "sizeBytes": repo.size_bytes,
        "extraBranches": list(repo.extra_branches),
    }


def repos_json(page: RepoPage) -> dict[str, Any]:
    return {
        "repos": [{"name": r.name, "description": r.description, "stars": r.stars} for r in page.repos],
        "hasMoreResults": page.has_more,
    }


def file_text(content: FileContent) -> str:
    """`URL: ...` then `<lineno>: <text>` per line; binary files and truncations get a notice line."""
    out = [f"URL: {content.url}"]
    if content.binary:
        out.append(content.notice or "Binary file.")
        return "\n".join(out)
    out.extend(f"{content.start_line + offset}: {line}" for offset, line in enumerate(content.lines))
    if not content.lines:
        out.append("(empty file)")
    if content.notice:
        out.extend(["", content.notice])
    return "\n".join(out)


def file_json(content: FileContent) -> dict[str, Any]:
    data: dict[str, Any] = {
        "repo": content.repo,
        "path": content.path,
        "revision": content.revision,
        "commit": content.commit,
        "url": content.url,
        "sizeBytes": content.size_bytes,
        "binary": content.binary,
        "contentType": content.content_type,
        "truncated": content.truncated,
        "notice": content.notice,
    }
    if not content.binary:
        data.update(
            startLine=content.start_line,
            endLine=content.end_line,
            totalLines=content.total_lines,
            content="".join(line + "\n" for line in content.lines),
        )
    return data


def files_text(listing: FileListing) -> str:
    text = "\n".join(entry.path for entry in listing.entries) or "(empty directory)"
    return text + (f"\n\n{listing.notice}" if listing.notice else "")


def files_json(listing: FileListing) -> dict[str, Any]:
    return {
        "repo": listing.repo,
        "path": listing.path,
        "revision": listing.revision,
        "commit": listing.commit,
        "entries": [{"path": e.path, "type": e.kind} for e in listing.entries],
        "total": listing.total,
        "truncated": listing.truncated,
    }


def refs_text(refs: RefList) -> str:
    """One ref per line: `<full ref name> <commit>` plus `(default branch)` / `(annotated tag)`."""
    if not refs.refs:
        return "No matching refs."
    lines = []
    for ref in refs.refs:
        note = " (default branch)" if ref.default else (" (annotated tag)" if ref.annotated else "")
        lines.append(f"{ref.name} {ref.commit}{note}")
    text = "\n".join(lines)
    if refs.has_more:
        text += f"\n\n(showing {len(refs.refs)} of {refs.total} refs - set a higher limit to see more)"
    return text


def refs_json(refs: RefList) -> dict[str, Any]:
    return {
        "repo": refs.repo,
        "refs": [
            {
                "name": r.name,
                "shortName": r.short_name,
                "type": r.kind,
                "commit": r.commit,
                "annotated": r.annotated,
                "default": r.default,
            }
            for r in refs.refs
        ],
        "total": refs.total,
        "hasMoreResults": refs.has_more,
    }
