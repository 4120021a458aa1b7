"""Wire licensing into a runtime: the gates lower capabilities ask (they cannot import licensing) and the page
banners. Each month's credits of the license key in force are allocated by a periodic job (licensing/jobs.py)."""

from __future__ import annotations

from typing import Self

from starlette.requests import Request

from codewell.accounts.service import AccountService
from codewell.analytics.service import AnalyticsService
from codewell.auth.service import AuthService
from codewell.http.requests import actor_of
from codewell.http.templates import Notice, PageNotices
from codewell.licensing.service import LicensingService
from codewell.runtime import Runtime


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
    """Register the user limit with accounts, the SAML gate with auth, the analytics API gate and the page
    banners (idempotent)."""
    gates = runtime.get(LicensingGates)
    runtime.get(AccountService).add_user_limit_check(gates.user_limit)
    runtime.get(AuthService).add_provider_gate(gates.sign_in_provider)
    runtime.get(AnalyticsService).add_api_gate(gates.analytics_api)
    runtime.get(PageNotices).add(gates.page_notices)
