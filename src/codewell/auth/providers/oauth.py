"""OAuth 2 authorization-code sign-in with a code host (the shared part; one subclass per host kind).

authlib's OAuth 2 client builds the authorization URL (state, PKCE S256 where the host supports it) and
exchanges the code; the subclass reads the account (user, verified e-mails) and applies the provider's
sign-up filters (organizations, teams, groups, SSO) through the host's REST API with the new token.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Generic, TypeVar

import requests
from authlib.integrations.requests_client import OAuth2Session

from codewell.auth.identities import ExternalAccount
from codewell.auth.providers.flows import Flow
from codewell.config.providers import OAuthCodeHostProvider
from codewell.core.errors import PermissionDenied, Unavailable

HTTP_TIMEOUT = 15.0
P = TypeVar("P", bound=OAuthCodeHostProvider)


class ProviderError(Unavailable):
    """The provider answered with an error or something unusable (message safe to show)."""


class FilterRefused(PermissionDenied):
    """The external account does not pass the provider's sign-up filters (organizations, groups, SSO)."""


class CodeHostClient(ABC, Generic[P]):
    """One sign-in attempt's conversation with a code host."""

    kind: ClassVar[str]
    pkce: ClassVar[bool] = True  # the host accepts RFC 7636 code challenges

    def __init__(self, provider: P, redirect_uri: str) -> None:
        self.provider = provider
        self.redirect_uri = redirect_uri

    # -- endpoints (per host) -----------------------------------------------------------------------------
    @abstractmethod
    def authorize_endpoint(self) -> str: ...

    @abstractmethod
    def token_endpoint(self) -> str: ...

    @abstractmethod
    def scope(self) -> str: ...

    @abstractmethod
    def fetch_account(self, http: OAuth2Session, token: dict[str, Any]) -> ExternalAccount:
        """The signed-in account at the host (ID, login, verified e-mails)."""

    def check_filters(self, http: OAuth2Session, account: ExternalAccount) -> None:
        """Raise FilterRefused when the account fails the provider's filters (default: none)."""
        return

    # -- the flow -----------------------------------------------------------------------------------------
    def session(self, token: dict[str, Any] | None = None) -> OAuth2Session:
        http = OAuth2Session(
            self.provider.client_id,
            self.provider.client_secret,
            scope=self.scope(),
            redirect_uri=self.redirect_uri,
            code_challenge_method="S256" if self.pkce else None,
            token=token,
        )
        http.headers["User-Agent"] = "codewell"
        return http

    def authorization_url(self, flow: Flow) -> str:
        url, _ = self.session().create_authorization_url(
            self.authorize_endpoint(), state=flow.state, code_verifier=flow.code_verifier or None
        )
        return str(url)

    def exchange(self, code: str, flow: Flow) -> tuple[OAuth2Session, dict[str, Any]]:
        """Trade the code for a token (sending the PKCE verifier); ProviderError when the host refuses."""
        http = self.session()
        try:
            token = http.fetch_token(
                self.token_endpoint(),
                code=code,
                code_verifier=flow.code_verifier or None,
                timeout=HTTP_TIMEOUT,
            )
        except Exception as exc:  # authlib raises OAuthError; requests raises on transport errors
            raise ProviderError(
                f"{self.kind} refused the sign-in code: {_short(exc)}", hint="start the sign-in again"
            ) from None
        return http, dict(token)

    def get_json(self, http: OAuth2Session, url: str, **params: Any) -> Any:
        return self.get(http, url, **params).json()

    def get(self, http: OAuth2Session, url: str, **params: Any) -> requests.Response:
        try:
            response: requests.Response = http.get(url, params=params or None, timeout=HTTP_TIMEOUT)
        except requests.RequestException as exc:
            raise ProviderError(f"could not reach {self.kind} at {url}: {_short(exc)}") from None
        if response.status_code >= 400:
            raise ProviderError(f"{self.kind} answered {response.status_code} for {url}")
        return response


def _short(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
