"""The background sync loop: reconcile site config, then clone/fetch every repository when it is due.

Runs inside `codewell serve` (registered by `codewell.repos.setup`). Syncs run in a dedicated thread pool
so that slow clones never starve the default executor that request handlers use; a failing or slow
repository occupies one slot at most, with its own back-off, and never blocks the others.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Self

from codewell.core.actors import INTERNAL
from codewell.repos.git import GIT_PROCESS_LIMIT
from codewell.repos.service import RepoService

if TYPE_CHECKING:
    from codewell.runtime import Runtime

log = logging.getLogger(__name__)

TICK_SECONDS = 2.0


class SyncScheduler:
    """Starts due syncs, at most `slots` at a time; `config_changed` makes the next tick reconcile first."""

    def __init__(self, service: RepoService, *, slots: int = GIT_PROCESS_LIMIT) -> None:
        self.service = service
        self.slots = slots
        self.config_changed = threading.Event()
        self.config_changed.set()  # reconcile on start
        self.running: dict[str, asyncio.Future[object]] = {}
        self._executor = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="repo-sync")

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime.get(RepoService))

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def tick(self) -> None:
        """Reconcile when the config changed, then start syncs that are due and have a free slot."""
        loop = asyncio.get_running_loop()
        if self.config_changed.is_set():
            self.config_changed.clear()
            await loop.run_in_executor(self._executor, self.service.reconcile)
        self.running = {name: f for name, f in self.running.items() if not f.done()}
        free = self.slots - len(self.running)
        if free <= 0:
            return
        due = await loop.run_in_executor(self._executor, self.service.due_repos)
        for name in [n for n in due if n not in self.running][:free]:
            self.running[name] = loop.run_in_executor(self._executor, self._sync_one, name)

    def _sync_one(self, name: str) -> object:
        try:
            return self.service.sync_repo(INTERNAL, name)
        except Exception:
            # Removed meanwhile, or a bug: log it and keep the loop alive for the other repositories.
            log.exception("repository sync crashed", extra={"repo": name})
            return None

    async def run(self, tick_seconds: float = TICK_SECONDS) -> None:
        try:
            while True:
                try:
                    await self.tick()
                except Exception:
                    log.exception("repository sync scheduler tick failed")
                await asyncio.sleep(tick_seconds)
        finally:
            self.close()


async def sync_loop(runtime: Runtime) -> None:
    """Background task of `codewell serve`: reconcile and sync repositories until cancelled."""
    await runtime.get(SyncScheduler).run()
