"""OAuth 2 authorization-code sign-in with a code host (the shared part; one subclass per host kind).

authlib's OAuth 2 client builds the authorization URL (state, PKCE S256 where the host supports it) and
exchanges the code; the subclass reads the account (user, verified e-mails) and applies the provider's
sign-up filters (organizations, teams, groups, SSO) through the host's REST API with the new token.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any, ClassVar, Generic, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import requests
from authlib.integrations.requests_client import OAuth2Session

from codewell.auth.identities import ExternalAccount
from codewell.auth.providers.flows import Flow
from codewell.config.providers import OAuthCodeHostProvider
from codewell.core.errors import PermissionDenied, Unavailable

HTTP_TIMEOUT = 15.0
# Lists (organizations, teams, groups, e-mails) are read at most this many pages deep (5,000 entries at
# per_page=100): a bound on the sign-in's latency. Past it, a membership not yet seen counts as absent.
MAX_PAGES = 50
log = logging.getLogger(__name__)
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

    def get_pages(self, http: OAuth2Session, url: str, **params: Any) -> Iterator[requests.Response]:
        """Each page of a list endpoint, first to last, following the host's pagination: the
        `Link: <...>; rel="next"` header (GitHub, GitLab) or GitLab's `X-Next-Page`. Stops after MAX_PAGES
        pages; ProviderError when a next link points at another origin (the token must not travel there)."""
        response = self.get(http, url, **params)
        yield response
        for _ in range(MAX_PAGES - 1):
            next_url = next_page_url(response, url)
            if next_url is None:
                return
            response = self.get(http, next_url)
            yield response
        if next_page_url(response, url) is not None:
            log.warning("%s: %s has more than %d pages; the rest is not read", self.kind, url, MAX_PAGES)

    def get_all(self, http: OAuth2Session, url: str, **params: Any) -> Iterator[Any]:
        """The entries of every page of a JSON-array list endpoint (lazily: callers may stop early)."""
        for response in self.get_pages(http, url, **params):
            yield from page_entries(self.kind, response)


def page_entries(kind: str, response: requests.Response) -> list[Any]:
    """The JSON array of one list page; ProviderError for any other body."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, list):
        raise ProviderError(f"{kind} answered {response.url} with something other than a JSON list")
    return body


def next_page_url(response: requests.Response, first_url: str) -> str | None:
    """The URL of the page after `response`, or None on the last page. A `rel="next"` link wins; else GitLab's
    `X-Next-Page` (empty on the last page) replaces the `page` parameter of the request's URL."""
    origin = urlsplit(first_url)[:2]
    link = response.links.get("next", {}).get("url")
    if link:
        if urlsplit(link)[:2] != origin:
            raise ProviderError(f"the pagination link of {first_url} points at another host")
        return str(link)
    following = response.headers.get("X-Next-Page", "").strip()
    if not following.isdigit():
        return None
    parts = urlsplit(response.request.url or first_url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "page"]
    return urlunsplit((*parts[:3], urlencode([*query, ("page", following)]), ""))


def _short(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
