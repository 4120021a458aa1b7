"""GitLab (spec `codehost_b`) OAuth sign-in: account, confirmed e-mails, allowGroups (at least Guest), ssoURL."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from codewell.auth.identities import ExternalAccount
from codewell.auth.providers.flows import Flow
from codewell.auth.providers.oauth import CodeHostSignIn, FilterRefused
from codewell.config.providers import GitLabProvider
from codewell.hostapi.hosts import GITLAB_GUEST, PER_PAGE, GitLabAPI
from codewell.hostapi.http import HostHTTP


class GitLabSignIn(CodeHostSignIn[GitLabProvider]):
    API = GitLabAPI
    pkce = True

    def authorize_endpoint(self) -> str:
        return f"{self.provider.url}oauth/authorize"

    def token_endpoint(self) -> str:
        return f"{self.provider.url}oauth/token"

    def scope(self) -> str:
        return f"read_user {self.provider.api_scope}"

    def authorization_url(self, flow: Flow) -> str:
        url = super().authorization_url(flow)
        if self.provider.sso_url:
            # Groups that enforce SAML SSO need the group's SSO sign-in first; it then continues to `redirect`.
            joiner = "&" if "?" in self.provider.sso_url else "?"
            return f"{self.provider.sso_url}{joiner}{urlencode({'redirect': url})}"
        return url

    def fetch_account(self, http: HostHTTP, token: dict[str, Any]) -> ExternalAccount:
        user = http.get("user").body
        verified: list[str] = []
        if user.get("email") and user.get("confirmed_at"):
            verified.append(str(user["email"]))
        for entry in self.items(http, "user/emails", per_page=PER_PAGE):
            email = str(entry.get("email", ""))
            if email and entry.get("confirmed_at") and email not in verified:
                verified.append(email)
        return ExternalAccount(
            kind=self.kind,
            service_id=self.provider.service_id,
            client_id=self.provider.client_id,
            account_id=str(user["id"]),
            username=str(user.get("username", "")),
            display_name=str(user.get("name") or ""),
            verified_emails=tuple(verified),
            data={"username": user.get("username"), "name": user.get("name"), "emails": verified},
            token=token,
        )

    def check_filters(self, http: HostHTTP, account: ExternalAccount) -> None:
        allowed = set(self.provider.allow_groups)
        if not allowed:
            return
        # min_access_level=Guest leaves out groups where the user only has Minimal Access.
        groups = self.items(http, "groups", min_access_level=GITLAB_GUEST, per_page=PER_PAGE)
        if any(str(g.get("full_path", "")) in allowed for g in groups):  # stops reading pages at the first match
            return
        raise FilterRefused(
            f"The GitLab account {account.username!r} does not have at least Guest access in a group allowed "
            "to sign in.",
            hint="ask a site admin for Guest (or higher) access in one of the groups in allowGroups",
        )
