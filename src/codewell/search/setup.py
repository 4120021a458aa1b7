"""Wiring of the search capability: re-index on sync, drop on removal, and a catch-up indexing loop."""

from __future__ import annotations

import asyncio
import logging

from codewell.core.actors import INTERNAL
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from codewell.search.service import SearchService

log = logging.getLogger(__name__)

# How often the catch-up loop looks for repositories without a current index (missed syncs, restarts).
RECONCILE_SECONDS = 60.0


async def index_loop(runtime: Runtime) -> None:
    """Index stale or missing shards in the background, forever."""
    service = runtime.get(SearchService)
    while True:
        try:
            await asyncio.to_thread(service.reconcile)
        except Exception:
            log.exception("index reconcile failed")
        await asyncio.sleep(RECONCILE_SECONDS)


def index_states(service: SearchService, name: str | None) -> dict[str, str]:
    """Repository name -> its index state for `codewell repos status` ("indexed 1234 files", "failed: ...")."""
    states = {}
    for s in service.status(INTERNAL, name):
        label = f"indexed {s.documents} files" if s.state == "indexed" else s.state
        states[s.repo] = f"{label}: {s.error}" if s.error else label
    return states


def setup(runtime: Runtime) -> None:
    """Re-index after each sync that changed refs; forget the index of removed repositories."""
    service = runtime.get(SearchService)
    repos = runtime.get(RepoService)
    repos.add_sync_listener(service.on_sync)
    repos.add_removal_listener(service.drop)
    repos.add_status_column("index", lambda name: index_states(service, name))
    runtime.background.append(("search-index", index_loop))
