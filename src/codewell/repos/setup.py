"""Wiring of the repos capability into a runtime: the sync loop and the site config listener."""

from __future__ import annotations

from codewell.config import SiteConfig
from codewell.repos.scheduler import SyncScheduler, sync_loop
from codewell.runtime import Runtime


def setup(runtime: Runtime) -> None:
    """Register the background sync loop and reconcile `repositories` whenever the site config changes."""
    scheduler = runtime.get(SyncScheduler)

    def config_changed(_config: SiteConfig) -> None:
        scheduler.config_changed.set()

    runtime.site_config.on_change(config_changed)
    runtime.background.append(("repo-sync", sync_loop))
