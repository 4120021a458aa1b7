"""The wire form of each history query (the MCP tools' and REST routes' argument names) mapped to one service
call, so that every adapter (MCP tools, REST routes, the agents' toolbox) asks the same question the same way."""

from __future__ import annotations

from typing import Any

from codewell.core.actors import Actor
from codewell.history.results import CommitSearchResult, Comparison, ContributorRepo, DiffSearchResult
from codewell.history.service import SCAN_TIMEOUT, HistoryService


def commit_search(
    service: HistoryService, actor: Actor, args: dict[str, Any], *, timeout: float = SCAN_TIMEOUT
) -> CommitSearchResult:
    return service.commit_search(
        actor,
        args.get("repos", []),
        message_terms=args.get("messageTerms"),
        authors=args.get("authors"),
        content_terms=args.get("contentTerms"),
        files=args.get("files"),
        after=args.get("after"),
        before=args.get("before"),
        revisions=args.get("revisions"),
        count=args.get("count"),
        timeout=timeout,
    )


def diff_search(
    service: HistoryService, actor: Actor, args: dict[str, Any], *, timeout: float = SCAN_TIMEOUT
) -> DiffSearchResult:
    return service.diff_search(
        actor,
        args.get("pattern", ""),
        args.get("repos", []),
        added=args.get("added"),
        removed=args.get("removed"),
        authors=args.get("authors"),
        after=args.get("after"),
        before=args.get("before"),
        revisions=args.get("revisions"),
        count=args.get("count"),
        timeout=timeout,
    )


def compare(service: HistoryService, actor: Actor, args: dict[str, Any]) -> Comparison:
    return service.compare(
        actor,
        args.get("repo", ""),
        args.get("base", ""),
        args.get("head", ""),
        first=args.get("first"),
        after=args.get("after"),
    )


def contributor_repos(service: HistoryService, actor: Actor, args: dict[str, Any]) -> list[ContributorRepo]:
    return service.contributor_repos(
        actor, args.get("authors", []), limit=args.get("limit"), min_commits=args.get("minCommits")
    )
