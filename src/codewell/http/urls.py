"""Every URL the tools and pages print: one place that knows the shape of the web app's addresses.

Pure functions of the external URL (`Runtime.external_url`, no trailing slash) and what the address
names. Repository names keep their slashes (they are path segments); revisions given by name go through
`quote` so that a branch like `feature/x` or a tag like `v1.0+rc` stays one segment.
"""

from __future__ import annotations

from urllib.parse import quote


def repo_url(external_url: str, repo: str) -> str:
    """The repository's page."""
    return f"{external_url}/{repo}"


def blob_url(external_url: str, repo: str, revision: str, path: str, lines: tuple[int, int] | None = None) -> str:
    """A file at a revision (a commit SHA in tool output, so the link never moves), optionally a line range.

    The range is appended as `%3FL<start>-<end>` (an encoded `?L...`): the reference system's tool output
    prints it that way and agents of the reference are used to it.
    """
    url = f"{external_url}/{repo}@{revision}/-/blob/{path}"
    return url + (f"%3FL{lines[0]}-{lines[1]}" if lines else "")


def raw_url(external_url: str, repo: str, revision: str, path: str) -> str:
    """A file's bytes as plain text (the file view's "raw" link)."""
    return f"{external_url}/{repo}@{revision}/-/raw/{path}"


def tree_url(external_url: str, repo: str, revision: str, path: str = "") -> str:
    """A directory at a revision (the root when `path` is empty)."""
    return f"{external_url}/{repo}@{revision}/-/tree/{path}".rstrip("/")


def commit_url(external_url: str, repo: str, sha: str) -> str:
    """One commit."""
    return f"{external_url}/{repo}/-/commit/{sha}"


def compare_url(external_url: str, repo: str, base: str, head: str) -> str:
    """The diff between two revisions as asked (names are quoted: `release/1.0...main`)."""
    return f"{external_url}/{repo}/-/compare/{quote(base, safe='')}...{quote(head, safe='')}"


def deepsearch_url(external_url: str, read_token: str) -> str:
    """A deep search conversation, for its owner (the `Link:` the deepsearch tool prints)."""
    return f"{external_url}/deepsearch/{read_token}"


def deepsearch_shared_url(external_url: str, share_token: str) -> str:
    """A shared deep search conversation (while `deepSearch.sharing.enabled`)."""
    return f"{external_url}/deepsearch/shared/{share_token}"


def webhook_url(external_url: str, host: str) -> str:
    """Where code hosts of one kind post push webhooks (`host`: `github`, `gitlab`, `bitbucket-server`, ...)."""
    return f"{external_url}/.api/webhooks/{host}"
