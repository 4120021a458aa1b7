"""Wiring of the history capability: index new commits after every repository sync."""

from __future__ import annotations

from codewell.runtime import Runtime


def setup(runtime: Runtime) -> None:
    """Register the commit indexer as a sync listener of RepoService (idempotent per runtime)."""
    from codewell.history.service import HistoryService
    from codewell.repos.service import Repo, RepoService

    history = runtime.get(HistoryService)
    if history.listening:
        return
    history.listening = True

    def on_sync(repo: Repo) -> None:
        history.index_repo(repo)

    runtime.get(RepoService).add_sync_listener(on_sync)
