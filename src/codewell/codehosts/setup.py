"""Wiring of codehosts into a runtime: the background schedule, sync on sign-in, git credentials."""

from __future__ import annotations

import asyncio
import logging

from codewell.auth.service import AuthService
from codewell.codehosts.service import CodeHostService
from codewell.config import SiteConfig
from codewell.runtime import Runtime

log = logging.getLogger(__name__)
TICK_SECONDS = 5.0


def setup(runtime: Runtime) -> None:
    service = runtime.get(CodeHostService)
    runtime.get(AuthService).add_identity_listener(service.identity_linked)
    runtime.get(AuthService).add_unlink_listener(service.identity_unlinked)

    def config_changed(_config: SiteConfig) -> None:
        service.export_git_credentials()

    runtime.site_config.on_change(config_changed)
    runtime.background.append(("codehost-sync", sync_loop))


async def sync_loop(runtime: Runtime) -> None:
    """Background task of `codewell serve`: discovery and permission syncs as they fall due."""
    service = runtime.get(CodeHostService)
    await asyncio.to_thread(service.export_git_credentials)
    while True:
        try:
            await asyncio.to_thread(service.run_due)
        except Exception:
            log.exception("code host sync tick failed")
        await asyncio.sleep(TICK_SECONDS)
