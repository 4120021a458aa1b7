"""Bitbucket Data Center/Server (spec `codehost_c_server`) incoming-link OAuth 2 sign-in."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from codewell.auth.identities import ExternalAccount
from codewell.auth.providers.oauth import CodeHostSignIn, ProviderError
from codewell.config.providers import BitbucketServerProvider
from codewell.hostapi.hosts import BitbucketServerAPI
from codewell.hostapi.http import HostHTTP


class BitbucketServerSignIn(CodeHostSignIn[BitbucketServerProvider]):
    API = BitbucketServerAPI
    pkce = True

    def authorize_endpoint(self) -> str:
        return f"{self.provider.url}rest/oauth2/latest/authorize"

    def token_endpoint(self) -> str:
        return f"{self.provider.url}rest/oauth2/latest/token"

    def scope(self) -> str:
        return "PUBLIC_REPOS REPO_READ"

    def fetch_account(self, http: HostHTTP, token: dict[str, Any]) -> ExternalAccount:
        # The whoami servlet (outside the REST API, plain text) names the token's user; the API gives the profile.
        slug = http.text(f"{self.provider.url}plugins/servlet/applinks/whoami").strip()
        if not slug:
            raise ProviderError("Bitbucket did not say which user signed in")
        user = http.get(f"users/{quote(slug, safe='')}").body
        # E-mail addresses on Bitbucket Data Center come from its admin-managed user directory.
        email = str(user.get("emailAddress") or "")
        return ExternalAccount(
            kind=self.kind,
            service_id=self.provider.service_id,
            client_id=self.provider.client_id,
            account_id=str(user["id"]),
            username=str(user.get("name") or slug),
            display_name=str(user.get("displayName") or ""),
            verified_emails=(email,) if email else (),
            data={"name": user.get("name"), "slug": user.get("slug"), "email": email},
            token=token,
        )
