"""OAuth 2 authorization-code sign-in with a code host (the shared part; one subclass per host kind).

authlib's OAuth 2 client builds the authorization URL (state, PKCE S256 where the host supports it) and
exchanges the code; the subclass reads the account (user, verified e-mails) and applies the provider's
sign-up filters (organizations, teams, groups, SSO) through the host's REST API with the new token, over the
code-host API kit that code host connections use too (`codewell.hostapi`: the API's address per host kind,
paging, errors). A host's error during sign-in is a `ProviderError` (safe to show: no token, no body).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from codewell.auth.identities import ExternalAccount
from codewell.auth.providers.flows import Flow
from codewell.config.providers import OAuthCodeHostProvider
from codewell.core.errors import PermissionDenied, Unavailable
from codewell.hostapi.hosts import HostAPI
from codewell.hostapi.http import HostError, HostHTTP, Page

if TYPE_CHECKING:
    from authlib.integrations.requests_client import OAuth2Session

HTTP_TIMEOUT = 15.0
# Lists (organizations, teams, groups, e-mails) are read at most this many pages deep (5,000 entries at
# per_page=100): a bound on the sign-in's latency. Past it, a membership not yet seen counts as absent.
MAX_PAGES = 50
# A sign-in waits for a host's rate limit at most this long, and retries a failed request once: a person waits.
MAX_WAIT = 5.0
P = TypeVar("P", bound=OAuthCodeHostProvider)


class ProviderError(Unavailable):
    """The provider answered with an error or something unusable (message safe to show)."""


class FilterRefused(PermissionDenied):
    """The external account does not pass the provider's sign-up filters (organizations, groups, SSO)."""


@contextmanager
def host_errors(kind: str) -> Iterator[None]:
    """The code host's errors (codewell.hostapi) inside the block as ProviderError."""
    try:
        yield
    except HostError as exc:
        raise ProviderError(f"{kind}: {exc.message}") from None


class CodeHostSignIn(ABC, Generic[P]):
    """One sign-in attempt's conversation with a code host."""

    API: ClassVar[type[HostAPI]]
    pkce: ClassVar[bool] = True  # the host accepts RFC 7636 code challenges

    def __init__(self, provider: P, redirect_uri: str) -> None:
        self.provider = provider
        self.redirect_uri = redirect_uri

    @property
    def kind(self) -> str:
        return self.API.kind

    # -- endpoints (per host) -----------------------------------------------------------------------------
    @abstractmethod
    def authorize_endpoint(self) -> str: ...

    @abstractmethod
    def token_endpoint(self) -> str: ...

    @abstractmethod
    def scope(self) -> str: ...

    @abstractmethod
    def fetch_account(self, http: HostHTTP, token: dict[str, Any]) -> ExternalAccount:
        """The signed-in account at the host (ID, login, verified e-mails)."""

    def check_filters(self, http: HostHTTP, account: ExternalAccount) -> None:
        """Raise FilterRefused when the account fails the provider's filters (default: none)."""
        return

    # -- the flow -----------------------------------------------------------------------------------------
    def session(self, token: dict[str, Any] | None = None) -> OAuth2Session:
        # authlib (and joserfc under it) loads with the first sign-in through a host, not with every process.
        from authlib.integrations.requests_client import OAuth2Session  # noqa: PLC0415

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

    def exchange(self, code: str, flow: Flow) -> tuple[HostHTTP, dict[str, Any]]:
        """Trade the code for a token (sending the PKCE verifier): the host's API authenticated by it, and the
        token. ProviderError when the host refuses."""
        try:
            token = self.session().fetch_token(
                self.token_endpoint(),
                code=code,
                code_verifier=flow.code_verifier or None,
                timeout=HTTP_TIMEOUT,
            )
        except Exception as exc:  # authlib raises OAuthError; requests raises on transport errors
            raise ProviderError(
                f"{self.kind} refused the sign-in code: {_short(exc)}", hint="start the sign-in again"
            ) from None
        return self.api(str(token.get("access_token", ""))), dict(token)

    def api(self, access_token: str) -> HostHTTP:
        """The host's REST API authenticated by a user's OAuth access token."""
        return self.API.connect(self.provider.url, bearer=access_token, max_wait=MAX_WAIT, retries=1)

    def items(self, http: HostHTTP, path: str, **params: Any) -> Iterator[Any]:
        """The entries of a list endpoint, at most MAX_PAGES pages deep (lazily: callers may stop early)."""
        return http.items(path, params, limit=MAX_PAGES)

    def pages(self, http: HostHTTP, path: str, **params: Any) -> Iterator[Page]:
        """The pages of a list endpoint (headers and body), at most MAX_PAGES deep."""
        return http.pages(path, params, limit=MAX_PAGES)

    def account(self, http: HostHTTP, token: dict[str, Any], *, filters: bool = True) -> ExternalAccount:
        """The signed-in account, checked against the provider's filters when `filters`; ProviderError when the
        host fails to answer, FilterRefused when the account does not pass."""
        with host_errors(self.kind):
            account = self.fetch_account(http, token)
            if filters:
                self.check_filters(http, account)
        return account


def _short(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
