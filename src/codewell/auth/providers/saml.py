"""SAML 2.0 sign-in (placeholder while being written)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from codewell.accounts.service import User
from codewell.auth.providers.flows import Flow
from codewell.config.providers import SAMLProvider
from codewell.core.errors import NotFound

if TYPE_CHECKING:
    from codewell.auth.service import ClientInfo
    from codewell.runtime import Runtime


class SAMLClient:
    def __init__(self, provider: SAMLProvider, external_url: str) -> None:
        self.provider = provider
        self.external_url = external_url

    def authorization_url(self, flow: Flow) -> str:
        raise NotFound("SAML is not available yet")


def sp_metadata(runtime: Runtime) -> str:
    raise NotFound("SAML is not available yet")


def finish_saml(runtime: Runtime, fields: dict[str, str], browser_token: str, client: ClientInfo) -> tuple[User, str]:
    raise NotFound("SAML is not available yet")
