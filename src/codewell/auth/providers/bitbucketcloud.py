"""Bitbucket Cloud (spec `codehost_c_cloud`) OAuth consumer sign-in: account and confirmed e-mails."""

from __future__ import annotations

from typing import Any

from codewell.auth.identities import ExternalAccount
from codewell.auth.providers.oauth import CodeHostSignIn
from codewell.config.providers import BitbucketCloudProvider
from codewell.hostapi.hosts import PER_PAGE, BitbucketCloudAPI
from codewell.hostapi.http import HostHTTP


class BitbucketCloudSignIn(CodeHostSignIn[BitbucketCloudProvider]):
    API = BitbucketCloudAPI
    pkce = False  # Bitbucket Cloud OAuth consumers do not take PKCE code challenges

    def authorize_endpoint(self) -> str:
        return f"{self.provider.url}site/oauth2/authorize"

    def token_endpoint(self) -> str:
        return f"{self.provider.url}site/oauth2/access_token"

    def scope(self) -> str:
        return " ".join(s.strip() for s in self.provider.api_scope.split(",") if s.strip())

    def fetch_account(self, http: HostHTTP, token: dict[str, Any]) -> ExternalAccount:
        user = http.get("user").body
        emails = list(self.items(http, "user/emails", pagelen=PER_PAGE))
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
