"""The http-header provider: an authenticating proxy in front of codewell names the user in a header.

Only the configured headers are read, and only when an http-header provider is configured. Requests
without the username header are refused (401, audited) unless they carry a session cookie or go to a
path anonymous callers may reach (health checks, sign-in pages). The first request of a person links or
creates their account (by the e-mail header, then by username: discouraged, usernames are mutable).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from codewell.accounts.audit import AuditService
from codewell.accounts.service import AccountService
from codewell.auth.identities import ExternalAccount, IdentityService
from codewell.auth.providers.service import ExternalSignIn
from codewell.config.providers import HTTPHeaderProvider
from codewell.core.actors import Actor
from codewell.core.errors import InvalidInput, Unauthenticated
from codewell.http.sessions import SESSION_COOKIE

if TYPE_CHECKING:
    from codewell.auth.service import AuthService, ClientInfo
    from codewell.runtime import Runtime

SERVICE_ID = "http-header"
MAX_HEADER_USERNAME = 255


def account_from_headers(provider: HTTPHeaderProvider, headers: dict[str, str]) -> ExternalAccount | None:
    """The account the proxy's headers name, or None when the username header is missing or empty."""
    raw = headers.get(provider.username_header.lower(), "").strip()
    if provider.strip_username_header_prefix:
        raw = raw.removeprefix(provider.strip_username_header_prefix)
    if not raw:
        return None
    if len(raw) > MAX_HEADER_USERNAME:
        raise InvalidInput(f"The {provider.username_header} header is longer than {MAX_HEADER_USERNAME} characters.")
    email = headers.get(provider.email_header.lower(), "").strip() if provider.email_header else ""
    return ExternalAccount(
        kind="http-header",
        service_id=SERVICE_ID,
        client_id="",
        account_id=raw,
        username=raw,
        # The proxy authenticated the person: its e-mail header counts as verified.
        verified_emails=(email,) if email else (),
        data={"username": raw, "email": email},
    )


class HeaderResolver:
    """The AuthService request resolver for the http-header provider."""

    def __init__(self, runtime: Runtime, auth: AuthService) -> None:
        self.runtime = runtime
        self.auth = auth

    def __call__(self, path: str, headers: dict[str, str], client: ClientInfo) -> Actor | None:
        provider = self.runtime.get(ExternalSignIn).first_of_kind("http-header")
        if not isinstance(provider, HTTPHeaderProvider):
            return None
        account = account_from_headers(provider, headers)
        if account is None:
            if self.auth.is_anonymous_path(path) or f"{SESSION_COOKIE}=" in headers.get("cookie", ""):
                return None
            self.runtime.get(AuditService).record(
                "auth.signIn",
                "failed",
                reason=f"missing proxy header {provider.username_header}",
                ip=client.ip,
                user_agent=client.user_agent,
                details={"provider": "http-header"},
            )
            raise Unauthenticated(
                f"The authentication proxy did not send the {provider.username_header} header.",
                hint="requests must come through the authenticating proxy",
            )
        identities = self.runtime.get(IdentityService)
        accounts = self.runtime.get(AccountService)
        known = identities.find(account)  # fast path: no audit entry for every request of a known user
        user = (
            accounts.get_user(known.user_id)
            if known
            else self.runtime.get(ExternalSignIn).complete(provider, account, client)
        )
        return accounts.actor_for(user, via="http-header")
