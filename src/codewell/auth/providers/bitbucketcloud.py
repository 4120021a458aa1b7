"""Bitbucket Cloud (spec `codehost_c_cloud`) OAuth consumer sign-in: account and confirmed e-mails."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from authlib.integrations.requests_client import OAuth2Session

from codewell.auth.identities import ExternalAccount
from codewell.auth.providers.oauth import CodeHostClient
from codewell.config.providers import BitbucketCloudProvider


def api_base(url: str) -> str:
    return "https://api.bitbucket.org/2.0/" if urlparse(url).hostname == "bitbucket.org" else f"{url}api/2.0/"


class BitbucketCloudClient(CodeHostClient[BitbucketCloudProvider]):
    kind = "bitbucketcloud"
    pkce = False  # Bitbucket Cloud OAuth consumers do not take PKCE code challenges

    def authorize_endpoint(self) -> str:
        return f"{self.provider.url}site/oauth2/authorize"

    def token_endpoint(self) -> str:
        return f"{self.provider.url}site/oauth2/access_token"

    def scope(self) -> str:
        return " ".join(s.strip() for s in self.provider.api_scope.split(",") if s.strip())

    def fetch_account(self, http: OAuth2Session, token: dict[str, Any]) -> ExternalAccount:
        api = api_base(self.provider.url)
        user = self.get_json(http, f"{api}user")
        emails = self.get_json(http, f"{api}user/emails").get("values", [])
        verified = tuple(
            e["email"]
            for e in sorted(emails, key=lambda e: not e.get("is_primary"))
            if e.get("is_confirmed") and e.get("email")
        )
        return ExternalAccount(
            kind=self.kind,
            service_id=self.provider.service_id,
            client_id=self.provider.client_id,
            account_id=str(user.get("uuid") or user.get("account_id")),
            username=str(user.get("username") or user.get("nickname") or ""),
            display_name=str(user.get("display_name") or ""),
            verified_emails=verified,
            data={"username": user.get("username"), "displayName": user.get("display_name"), "emails": list(verified)},
            token=token,
        )
