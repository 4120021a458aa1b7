"""Wiring of the history capability: index new commits after every repository sync."""

from __future__ import annotations

from codewell.history.indexer import sweep_orphan_words
from codewell.history.service import HistoryService
from codewell.repos.service import Repo, RepoService
from codewell.runtime import Runtime


def setup(runtime: Runtime) -> None:
    """Register the commit indexer as a sync listener of RepoService (idempotent per runtime)."""
    history = runtime.get(HistoryService)
    if history.listening:
        return
    history.listening = True

    def on_sync(repo: Repo) -> None:
        history.index_repo(repo)

    def on_removal(repo: Repo) -> None:
        # Commits, refs and branch rows went with the repository (ON DELETE CASCADE); postings have no FK.
        sweep_orphan_words(runtime.db)

    repos = runtime.get(RepoService)
    repos.add_sync_listener(on_sync)
    repos.add_removal_listener(on_removal)
