"""Wiring of codehosts into a runtime: sync on sign-in (a job: codehosts/jobs.py), git credentials. Discovery and
permission syncs run as jobs (`codehosts.schedule` and the kinds it enqueues), not in a loop of their own."""

from __future__ import annotations

from codewell.auth.service import AuthService
from codewell.codehosts.jobs import SignInSync
from codewell.codehosts.service import CodeHostService
from codewell.codehosts.webhooks import WEBHOOKS_PREFIX
from codewell.config import SiteConfig
from codewell.runtime import Runtime


def setup(runtime: Runtime) -> None:
    service = runtime.get(CodeHostService)
    runtime.get(AuthService).add_identity_listener(runtime.get(SignInSync).identity_linked)
    runtime.get(AuthService).add_unlink_listener(service.identity_unlinked)
    # Code hosts send no codewell credential: each webhook proves itself with its connection's secret.
    runtime.get(AuthService).add_anonymous_path(WEBHOOKS_PREFIX)

    def config_changed(_config: SiteConfig) -> None:
        service.export_git_credentials()

    runtime.site_config.on_change(config_changed)
    # Per process (every process that fetches with a connection's token, workers included).
    service.export_git_credentials()
