"""GitHub (spec `codehost_a`) OAuth sign-in: account, verified e-mails, allowOrgs, allowOrgsMap, requiredSsoOrgs."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from authlib.integrations.requests_client import OAuth2Session

from codewell.auth.identities import ExternalAccount
from codewell.auth.providers.oauth import CodeHostClient, FilterRefused, page_entries
from codewell.config.providers import GitHubProvider

# GitHub lists organizations whose SAML SSO the token has not been authorized for in this response header.
SSO_HEADER = "X-GitHub-SSO"


def api_base(url: str) -> str:
    """https://api.github.com/ for github.com, `<url>api/v3/` for GitHub Enterprise Server."""
    return "https://api.github.com/" if urlparse(url).hostname in ("github.com", "www.github.com") else f"{url}api/v3/"


def unauthorized_sso_orgs(header: str) -> set[str]:
    """Organization IDs in `partial-results; organizations=1,2` (empty for any other value)."""
    kind, _, rest = header.partition(";")
    if kind.strip() != "partial-results":
        return set()
    key, _, ids = rest.strip().partition("=")
    return {i.strip() for i in ids.split(",") if i.strip()} if key.strip() == "organizations" else set()


class GitHubClient(CodeHostClient[GitHubProvider]):
    kind = "github"
    pkce = True

    def authorize_endpoint(self) -> str:
        return f"{self.provider.url}login/oauth/authorize"

    def token_endpoint(self) -> str:
        return f"{self.provider.url}login/oauth/access_token"

    def scope(self) -> str:
        # read:org lets allowOrgs/allowOrgsMap see private memberships; repo serves permission sync.
        return "user:email repo read:org"

    def fetch_account(self, http: OAuth2Session, token: dict[str, Any]) -> ExternalAccount:
        api = api_base(self.provider.url)
        user = self.get_json(http, f"{api}user")
        emails = list(self.get_all(http, f"{api}user/emails", per_page=100))
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

    def check_filters(self, http: OAuth2Session, account: ExternalAccount) -> None:
        provider = self.provider
        if not (provider.allow_orgs or provider.allow_orgs_map or provider.required_sso_orgs):
            return
        api = api_base(provider.url)
        orgs: set[str] = set()
        unauthorized: set[str] = set()
        for response in self.get_pages(http, f"{api}user/orgs", per_page=100):
            # Every page carries the SSO header; the SSO check needs all of them before deciding.
            unauthorized |= unauthorized_sso_orgs(response.headers.get(SSO_HEADER, ""))
            orgs |= {str(o.get("login", "")).lower() for o in page_entries(self.kind, response)}
        self._check_sso(unauthorized)
        if not (provider.allow_orgs or provider.allow_orgs_map):
            return
        # Organizations first; teams only when the user is in none of the listed organizations.
        if any(org.lower() in orgs for org in provider.allow_orgs):
            return
        if provider.allow_orgs_map and self._in_listed_team(http, api):
            return
        raise FilterRefused(
            f"The GitHub account {account.username!r} is not a member of an organization or team allowed to sign in.",
            hint="ask a site admin to add you to one of the allowed organizations or teams (allowOrgs, allowOrgsMap)",
        )

    def _in_listed_team(self, http: OAuth2Session, api: str) -> bool:
        wanted = {org.lower(): set(teams) for org, teams in self.provider.allow_orgs_map.items()}
        for team in self.get_all(http, f"{api}user/teams", per_page=100):
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
