"""Wire licensing into a runtime: the gates lower capabilities ask (they cannot import licensing), the page
banners, and a loop that allocates each month's credits of the license key in force."""

from __future__ import annotations

import asyncio
import logging
from typing import Self

import anyio.to_thread
from starlette.requests import Request

from codewell.accounts.service import AccountService
from codewell.analytics.service import AnalyticsService
from codewell.auth.service import AuthService
from codewell.http.requests import actor_of
from codewell.http.templates import Notice, PageNotices
from codewell.licensing.service import LicensingService
from codewell.runtime import Runtime

log = logging.getLogger(__name__)
ALLOCATION_INTERVAL = 600.0


class LicensingGates:
    """The callables registered with lower services (one per runtime, so that setup is idempotent). Each
    asks the runtime's LicensingService at call time (tests install one with a test key pair and clock)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    def _service(self) -> LicensingService:
        return self.runtime.get(LicensingService)

    def user_limit(self, existing: int) -> None:
        self._service().check_user_limit(existing)

    def sign_in_provider(self, kind: str) -> None:
        self._service().check_sign_in_provider(kind)

    def analytics_api(self) -> None:
        self._service().check_analytics_api()

    def page_notices(self, request: Request) -> list[Notice]:
        actor = actor_of(request)
        found = self._service().notices(request.url.path, signed_in=actor.is_user, site_admin=actor.site_admin)
        return [Notice(n.text, n.level, n.link, n.link_text) for n in found]


def setup(runtime: Runtime) -> None:
    """Register the user limit with accounts, the SAML gate with auth, the analytics API gate, the page
    banners and the credit allocation loop (idempotent)."""
    gates = runtime.get(LicensingGates)
    runtime.get(AccountService).add_user_limit_check(gates.user_limit)
    runtime.get(AuthService).add_provider_gate(gates.sign_in_provider)
    runtime.get(AnalyticsService).add_api_gate(gates.analytics_api)
    runtime.get(PageNotices).add(gates.page_notices)
    if not any(name == "licensing-credits" for name, _ in runtime.background):
        runtime.background.append(("licensing-credits", allocation_loop))


async def allocation_loop(runtime: Runtime) -> None:
    """Allocate the key's credits for the month when it begins (and when a key appears), every 10 minutes."""
    while True:
        try:
            await anyio.to_thread.run_sync(runtime.get(LicensingService).allocate_credits)
        except Exception:
            log.exception("allocating the license key's credits failed; retrying in %.0f s", ALLOCATION_INTERVAL)
        await asyncio.sleep(ALLOCATION_INTERVAL)
