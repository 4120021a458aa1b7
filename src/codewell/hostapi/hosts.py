"""Each code host kind's REST API: where it lives for an instance's URL, how a token authenticates, and how its
JSON is framed. Sign-in (auth/providers: the signed-in account, its e-mails, organizations, teams, groups) and
connections (codehosts/clients.py: repositories and permissions) both open their conversations here, so the
two never disagree about an API's address or a host's quirks.

- GitHub: REST v3 at `https://api.github.com/` for github.com, `<url>api/v3/` for GitHub Enterprise Server; git
  over https takes the token as the password of `x-access-token`.
- GitLab: API v4 at `<url>api/v4/`; git user `oauth2`. Access levels: 10 Guest, 20 Reporter.
- Bitbucket Cloud: API 2.0 at `https://api.bitbucket.org/2.0/` for bitbucket.org, `<url>api/2.0/` otherwise; git
  user `x-token-auth`; a connection authenticates with a username and app password (basic), a user with OAuth.
- Bitbucket Server / Data Center: REST 1.0 at `<url>rest/api/1.0/`, bearer tokens (HTTP access tokens, OAuth).
- Gerrit: the authenticated REST API at `<url>a/`, HTTP credentials (basic), every JSON body after `)]}'`.
"""

from __future__ import annotations

from typing import Any, ClassVar
from urllib.parse import urlsplit

import requests

from codewell.hostapi.http import HostHTTP

GITLAB_GUEST = 10  # GitLab access levels: 5 Minimal Access, 10 Guest, 20 Reporter, 30 Developer, ...
GITLAB_REPORTER = 20
PER_PAGE = 100


class HostAPI:
    """One host kind's API; `connect` opens an authenticated conversation with an instance of it."""

    kind: ClassVar[str]
    root: ClassVar[str]  # the API's path under a self-hosted instance's URL
    # The hosted service's own API address, for the instance URLs that name the hosted service.
    cloud: ClassVar[tuple[frozenset[str], str]] = (frozenset(), "")
    git_user: ClassVar[str] = "x-access-token"  # the user git sends with the token over https
    gerrit: ClassVar[bool] = False  # JSON bodies prefixed with `)]}'`

    @classmethod
    def base(cls, url: str) -> str:
        """The API's root for the instance at `url` (which ends with `/`)."""
        hosts, api = cls.cloud
        return api if urlsplit(url).hostname in hosts else f"{url}{cls.root}"

    @classmethod
    def connect(
        cls,
        url: str,
        *,
        bearer: str | None = None,
        basic: tuple[str, str] | None = None,
        session: requests.Session | None = None,
        **options: Any,
    ) -> HostHTTP:
        """A conversation with the API of the instance at `url`, authenticated by `bearer` or `basic`."""
        return HostHTTP(cls.base(url), bearer=bearer, basic=basic, gerrit=cls.gerrit, session=session, **options)


class GitHubAPI(HostAPI):
    kind, root = "github", "api/v3/"
    cloud = (frozenset({"github.com", "www.github.com"}), "https://api.github.com/")
    # GitHub lists organizations whose SAML SSO the token has not been authorized for in this response header.
    SSO_HEADER = "X-GitHub-SSO"


class GitLabAPI(HostAPI):
    kind, root, git_user = "gitlab", "api/v4/", "oauth2"


class BitbucketCloudAPI(HostAPI):
    kind, root, git_user = "bitbucketcloud", "api/2.0/", "x-token-auth"
    cloud = (frozenset({"bitbucket.org"}), "https://api.bitbucket.org/2.0/")


class BitbucketServerAPI(HostAPI):
    kind, root = "bitbucketserver", "rest/api/1.0/"


class GerritAPI(HostAPI):
    kind, root, gerrit = "gerrit", "a/", True


APIS: dict[str, type[HostAPI]] = {
    api.kind: api for api in (GitHubAPI, GitLabAPI, BitbucketCloudAPI, BitbucketServerAPI, GerritAPI)
}
