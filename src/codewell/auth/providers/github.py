"""GitHub (spec `codehost_a`) OAuth sign-in: account, verified e-mails, allowOrgs, allowOrgsMap, requiredSsoOrgs."""

from __future__ import annotations

from typing import Any

from codewell.auth.identities import ExternalAccount
from codewell.auth.providers.oauth import CodeHostSignIn, FilterRefused
from codewell.config.providers import GitHubProvider
from codewell.hostapi.hosts import PER_PAGE, GitHubAPI
from codewell.hostapi.http import HostHTTP


def unauthorized_sso_orgs(header: str) -> set[str]:
    """Organization IDs in `partial-results; organizations=1,2` (empty for any other value)."""
    kind, _, rest = header.partition(";")
    if kind.strip() != "partial-results":
        return set()
    key, _, ids = rest.strip().partition("=")
    return {i.strip() for i in ids.split(",") if i.strip()} if key.strip() == "organizations" else set()


class GitHubSignIn(CodeHostSignIn[GitHubProvider]):
    API = GitHubAPI
    pkce = True

    def authorize_endpoint(self) -> str:
        return f"{self.provider.url}login/oauth/authorize"

    def token_endpoint(self) -> str:
        return f"{self.provider.url}login/oauth/access_token"

    def scope(self) -> str:
        # read:org lets allowOrgs/allowOrgsMap see private memberships; repo serves permission sync.
        return "user:email repo read:org"

    def fetch_account(self, http: HostHTTP, token: dict[str, Any]) -> ExternalAccount:
        user = http.get("user").body
        emails = list(self.items(http, "user/emails", per_page=PER_PAGE))
        verified = tuple(
            e["email"]
            for e in sorted(emails, key=lambda e: not e.get("primary"))
            if e.get("verified") and e.get("email")
        )
        return ExternalAccount(
            kind=self.kind,
            service_id=self.provider.service_id,
            client_id=self.provider.client_id,
            account_id=str(user["id"]),
            username=str(user.get("login", "")),
            display_name=str(user.get("name") or ""),
            verified_emails=verified,
            data={"login": user.get("login"), "name": user.get("name"), "emails": list(verified)},
            token=token,
        )

    def check_filters(self, http: HostHTTP, account: ExternalAccount) -> None:
        provider = self.provider
        if not (provider.allow_orgs or provider.allow_orgs_map or provider.required_sso_orgs):
            return
        orgs: set[str] = set()
        unauthorized: set[str] = set()
        for page in self.pages(http, "user/orgs", per_page=PER_PAGE):
            # Every page carries the SSO header; the SSO check needs all of them before deciding.
            unauthorized |= unauthorized_sso_orgs(page.headers.get(GitHubAPI.SSO_HEADER, ""))
            orgs |= {str(o.get("login", "")).lower() for o in page.entries()}
        self._check_sso(unauthorized)
        if not (provider.allow_orgs or provider.allow_orgs_map):
            return
        # Organizations first; teams only when the user is in none of the listed organizations.
        if any(org.lower() in orgs for org in provider.allow_orgs):
            return
        if provider.allow_orgs_map and self._in_listed_team(http):
            return
        raise FilterRefused(
            f"The GitHub account {account.username!r} is not a member of an organization or team allowed to sign in.",
            hint="ask a site admin to add you to one of the allowed organizations or teams (allowOrgs, allowOrgsMap)",
        )

    def _in_listed_team(self, http: HostHTTP) -> bool:
        wanted = {org.lower(): set(teams) for org, teams in self.provider.allow_orgs_map.items()}
        for team in self.items(http, "user/teams", per_page=PER_PAGE):
            org = str((team.get("organization") or {}).get("login", "")).lower()
            # Display names must match exactly; a parent team does not admit members of its subteams.
            if team.get("name") in wanted.get(org, set()):
                return True
        return False

    def _check_sso(self, unauthorized: set[str]) -> None:
        required = self.provider.required_sso_orgs
        if not required or not unauthorized:
            return
        missing = sorted(unauthorized) if required == ["all"] else sorted(unauthorized & set(required))
        if missing:
            raise FilterRefused(
                "You must authorize this OAuth application for SSO in the GitHub organization(s) "
                f"{', '.join(missing)} to sign in.",
                hint="sign in again and choose 'Authorize' next to each organization that enforces SAML SSO",
            )
