"""Bitbucket Data Center/Server (spec `codehost_c_server`) incoming-link OAuth 2 sign-in."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from authlib.integrations.requests_client import OAuth2Session

from codewell.auth.identities import ExternalAccount
from codewell.auth.providers.oauth import CodeHostClient, ProviderError
from codewell.config.providers import BitbucketServerProvider


class BitbucketServerClient(CodeHostClient[BitbucketServerProvider]):
    kind = "bitbucketserver"
    pkce = True

    def authorize_endpoint(self) -> str:
        return f"{self.provider.url}rest/oauth2/latest/authorize"

    def token_endpoint(self) -> str:
        return f"{self.provider.url}rest/oauth2/latest/token"

    def scope(self) -> str:
        return "PUBLIC_REPOS REPO_READ"

    def fetch_account(self, http: OAuth2Session, token: dict[str, Any]) -> ExternalAccount:
        # The whoami servlet names the token's user; the REST API then gives the profile.
        slug = self.get(http, f"{self.provider.url}plugins/servlet/applinks/whoami").text.strip()
        if not slug:
            raise ProviderError("Bitbucket did not say which user signed in")
        user = self.get_json(http, f"{self.provider.url}rest/api/1.0/users/{quote(slug, safe='')}")
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
