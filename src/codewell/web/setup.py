"""The web capability's wiring: its static files are public (the sign-in page uses the stylesheet too)."""

from __future__ import annotations

from codewell.auth.service import AuthService
from codewell.runtime import Runtime
from codewell.web.static import STATIC_PREFIX


def setup(runtime: Runtime) -> None:
    runtime.get(AuthService).add_anonymous_path(STATIC_PREFIX)
