"""Wiring of the external sign-in providers into a runtime (codewell.capabilities)."""

from __future__ import annotations

from codewell.auth.providers.httpheader import HeaderResolver
from codewell.auth.service import AuthService
from codewell.runtime import Runtime


def setup(runtime: Runtime) -> None:
    """Register the http-header resolver (idle while no http-header provider is configured)."""
    auth = runtime.get(AuthService)
    auth.add_request_resolver(HeaderResolver(runtime, auth))
