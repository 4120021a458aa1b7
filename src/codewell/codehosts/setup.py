"""Wiring of codehosts into a runtime: sync on sign-in (a job: codehosts/jobs.py), git credentials. Discovery and
permission syncs run as jobs (`codehosts.schedule` and the kinds it enqueues), not in a loop of their own."""

from __future__ import annotations

from codewell.auth.service import AuthService
from codewell.codehosts.jobs import SignInSync
from codewell.codehosts.service import CodeHostService
from codewell.codehosts.webhooks import WEBHOOKS_PREFIX
from codewell.runtime import Runtime


def setup(runtime: Runtime) -> None:
    # Creating the service hands repos its credential source (`git_credential`): per process, workers included,
    # repos asks for a connection's token at each fetch, read from its tokenEnv/tokenFile then, never exported.
    service = runtime.get(CodeHostService)
    runtime.get(AuthService).add_identity_listener(runtime.get(SignInSync).identity_linked)
    runtime.get(AuthService).add_unlink_listener(service.identity_unlinked)
    # Code hosts send no codewell credential: each webhook proves itself with its connection's secret.
    runtime.get(AuthService).add_anonymous_path(WEBHOOKS_PREFIX)
