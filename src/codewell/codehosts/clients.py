"""One client per code host kind: discovery of repositories and both directions of permissions.

Each client speaks its host's real REST API through the code-host API kit (`codewell.hostapi`: the API's address,
authentication, paging, rate limits, errors and Gerrit's `)]}'` prefix, shared with sign-in's providers):
- GitHub REST v3 (`/api/v3/` on GitHub Enterprise Server, api.github.com for github.com);
- GitLab API v4 (`min_access_level=20`: Reporter or above, so host administrators only get repositories where
  they hold a role);
- Bitbucket Cloud 2.0, Bitbucket Server (Data Center) REST 1.0, Gerrit REST.

Discovery uses the connection's token; user-centric permissions use the user's OAuth token; repo-centric
permissions list a repository's members with the connection's token and return the host's account IDs (the
service maps them to users through linked external identities).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import quote

import requests

from codewell.config.codehosts import CodeHostConnection
from codewell.hostapi.hosts import (
    GITLAB_REPORTER,
    PER_PAGE,
    BitbucketCloudAPI,
    BitbucketServerAPI,
    GerritAPI,
    GitHubAPI,
    GitLabAPI,
    HostAPI,
)
from codewell.hostapi.http import Forbidden, HostHTTP, Missing


@dataclass(frozen=True, slots=True)
class HostRepo:
    """A repository as its host describes it."""

    external_id: str
    path: str  # owner/name (GitLab: the full path with subgroups)
    clone_url: str
    visibility: str  # public | private | internal
    fork: bool = False
    archived: bool = False
    description: str = ""


@dataclass
class Discovery:
    repos: list[HostRepo] = field(default_factory=list)
    # Scopes that could not be listed (an org the token may not read): "org acme: ...".
    warnings: list[str] = field(default_factory=list)
    seen: set[str] = field(default_factory=set, repr=False)

    def add(self, repo: HostRepo) -> None:
        """Keep `repo` once: the same repository may be listed by two scopes (an org and an explicit entry)."""
        if repo.external_id not in self.seen:
            self.seen.add(repo.external_id)
            self.repos.append(repo)


@dataclass
class UserRepos:
    """What a user's own token can read on the host (external IDs), and why some scope was left out."""

    external_ids: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)


class HostClient(ABC):
    API: ClassVar[type[HostAPI]]

    def __init__(self, connection: CodeHostConnection, token: str, session: requests.Session | None = None) -> None:
        self.connection = connection
        self.token = token
        # The pooled session of the connection (CodeHostService's), else each conversation opens its own.
        self.session = session
        self.http = self.connect(token)

    @property
    def kind(self) -> str:
        return self.API.kind

    @property
    def api(self) -> str:
        return self.API.base(self.connection.url)

    def connect(self, token: str, *, basic_user: str | None = None) -> HostHTTP:
        """An HTTP conversation with the API authenticated by `token` (bearer unless the kind uses basic)."""
        if basic_user is not None:
            return self.API.connect(self.connection.url, basic=(basic_user, token), session=self.session)
        return self.API.connect(self.connection.url, bearer=token, session=self.session)

    def git_secret(self) -> str:
        """`user:token` for git over https (sent as an http.extraHeader, never in a URL)."""
        return f"{self.connection.username or self.API.git_user}:{self.token}"

    def keep(self, found: Discovery, repo: HostRepo) -> None:
        """Add `repo` to `found` when the connection wants it (see `wanted`), once."""
        if self.wanted(repo):
            found.add(repo)

    def wanted(self, repo: HostRepo) -> bool:
        connection = self.connection
        if repo.archived and not connection.archived:
            return False
        if repo.fork and not connection.forks:
            return False
        return not connection.excluded(repo.path)

    @abstractmethod
    def discover(self) -> Discovery: ...

    @abstractmethod
    def user_repos(self, http: HostHTTP) -> UserRepos:
        """External IDs of the repositories the owner of `http`'s token may read."""

    @abstractmethod
    def repo_members(self, repo: HostRepo) -> set[str]:
        """Account IDs (as linked identities store them) of the users who may read `repo`."""


# -- GitHub -------------------------------------------------------------------------------------------------
class GitHubClient(HostClient):
    API = GitHubAPI

    @staticmethod
    def repo_of(entry: dict[str, Any]) -> HostRepo:
        private = bool(entry.get("private"))
        visibility = str(entry.get("visibility") or ("private" if private else "public"))
        return HostRepo(
            external_id=str(entry["id"]),
            path=str(entry["full_name"]),
            clone_url=str(entry["clone_url"]),
            visibility=visibility,
            fork=bool(entry.get("fork")),
            archived=bool(entry.get("archived")),
            description=str(entry.get("description") or ""),
        )

    def discover(self) -> Discovery:
        found = Discovery()

        for org in self.connection.orgs:
            try:
                for entry in self.http.items(f"orgs/{quote(org)}/repos", {"per_page": PER_PAGE, "type": "all"}):
                    self.keep(found, self.repo_of(entry))
            except (Forbidden, Missing) as exc:
                found.warnings.append(f"org {org}: {exc.message}")
        for path in self.connection.repos:
            try:
                self.keep(found, self.repo_of(self.http.get(f"repos/{path}").body))
            except (Forbidden, Missing) as exc:
                found.warnings.append(f"repo {path}: {exc.message}")
        if not self.connection.orgs and not self.connection.repos:
            for entry in self.http.items("user/repos", {"per_page": PER_PAGE}):
                self.keep(found, self.repo_of(entry))
        return found

    def user_repos(self, http: HostHTTP) -> UserRepos:
        result = UserRepos()
        for entry in http.items("user/repos", {"per_page": PER_PAGE}):
            result.external_ids.add(str(entry["id"]))
        # An organization whose OAuth App access restrictions keep this application out: its repositories
        # are missing from the list above; say so.
        for org in self.connection.orgs:
            try:
                http.get(f"orgs/{quote(org)}/repos", {"per_page": 1})
            except Forbidden as exc:
                result.warnings.append(
                    f"org {org}: the OAuth application has no access to this organization ({exc.message}); "
                    "an organization owner must approve it"
                )
            except Missing:
                result.warnings.append(f"org {org}: not visible to this account")
        return result

    def repo_members(self, repo: HostRepo) -> set[str]:
        entries = self.http.items(f"repos/{repo.path}/collaborators", {"per_page": PER_PAGE, "affiliation": "all"})
        return {str(e["id"]) for e in entries if (e.get("permissions") or {"pull": True}).get("pull")}


# -- GitLab -------------------------------------------------------------------------------------------------
class GitLabClient(HostClient):
    API = GitLabAPI

    @staticmethod
    def repo_of(entry: dict[str, Any]) -> HostRepo:
        return HostRepo(
            external_id=str(entry["id"]),
            path=str(entry["path_with_namespace"]),
            clone_url=str(entry["http_url_to_repo"]),
            visibility=str(entry.get("visibility") or "private"),
            fork="forked_from_project" in entry,
            archived=bool(entry.get("archived")),
            description=str(entry.get("description") or ""),
        )

    def discover(self) -> Discovery:
        found = Discovery()

        for group in self.connection.groups:
            params = {"per_page": PER_PAGE, "include_subgroups": "true"}
            if not self.connection.archived:
                params["archived"] = "false"  # `true` would list only archived projects
            try:
                for entry in self.http.items(f"groups/{quote(group, safe='')}/projects", params):
                    self.keep(found, self.repo_of(entry))
            except (Forbidden, Missing) as exc:
                found.warnings.append(f"group {group}: {exc.message}")
        for path in [*self.connection.projects, *self.connection.repos]:
            try:
                self.keep(found, self.repo_of(self.http.get(f"projects/{quote(path, safe='')}").body))
            except (Forbidden, Missing) as exc:
                found.warnings.append(f"project {path}: {exc.message}")
        if not (self.connection.groups or self.connection.projects or self.connection.repos):
            for entry in self.http.items("projects", {"per_page": PER_PAGE, "membership": "true"}):
                self.keep(found, self.repo_of(entry))
        return found

    def user_repos(self, http: HostHTTP) -> UserRepos:
        result = UserRepos()
        params = {"per_page": PER_PAGE, "min_access_level": GITLAB_REPORTER, "simple": "true"}
        for entry in http.items("projects", params):
            if entry.get("visibility") == "internal" and not self.connection.sync_internal_repo_permissions:
                continue
            result.external_ids.add(str(entry["id"]))
        return result

    def repo_members(self, repo: HostRepo) -> set[str]:
        if repo.visibility == "internal" and not self.connection.sync_internal_repo_permissions:
            return set()
        entries = self.http.items(f"projects/{repo.external_id}/members/all", {"per_page": PER_PAGE})
        return {str(e["id"]) for e in entries if int(e.get("access_level", 0)) >= GITLAB_REPORTER}


# -- Bitbucket Cloud ----------------------------------------------------------------------------------------
class BitbucketCloudClient(HostClient):
    API = BitbucketCloudAPI

    def connect(self, token: str, *, basic_user: str | None = None) -> HostHTTP:
        # The connection authenticates with a username and app password; users with their OAuth token.
        if basic_user is None and token is self.token:
            basic_user = self.connection.username
        return super().connect(token, basic_user=basic_user)

    @staticmethod
    def repo_of(entry: dict[str, Any]) -> HostRepo:
        clones = {c.get("name"): c.get("href") for c in (entry.get("links") or {}).get("clone", [])}
        return HostRepo(
            external_id=str(entry["uuid"]),
            path=str(entry["full_name"]),
            clone_url=str(clones.get("https") or ""),
            visibility="private" if entry.get("is_private") else "public",
            fork="parent" in entry,
            description=str(entry.get("description") or ""),
        )

    def discover(self) -> Discovery:
        found = Discovery()
        for workspace in self.connection.workspaces:
            try:
                for entry in self.http.items(f"repositories/{quote(workspace)}", {"pagelen": 100}):
                    self.keep(found, self.repo_of(entry))
            except (Forbidden, Missing) as exc:
                found.warnings.append(f"workspace {workspace}: {exc.message}")
        for path in self.connection.repos:
            try:
                repo = self.repo_of(self.http.get(f"repositories/{path}").body)
            except (Forbidden, Missing) as exc:
                found.warnings.append(f"repo {path}: {exc.message}")
                continue
            self.keep(found, repo)
        return found

    def user_repos(self, http: HostHTTP) -> UserRepos:
        result = UserRepos()
        for entry in http.items("user/permissions/repositories", {"pagelen": 100}):
            result.external_ids.add(str((entry.get("repository") or {}).get("uuid")))
        return result

    def repo_members(self, repo: HostRepo) -> set[str]:
        workspace = repo.path.split("/", 1)[0]
        params = {"pagelen": 100, "q": f'repository.full_name="{repo.path}"'}
        entries = self.http.items(f"workspaces/{quote(workspace)}/permissions/repositories", params)
        # Linked Bitbucket Cloud identities are keyed by the account's UUID.
        return {str((e.get("user") or {}).get("uuid")) for e in entries}


# -- Bitbucket Server / Data Center -------------------------------------------------------------------------
class BitbucketServerClient(HostClient):
    API = BitbucketServerAPI

    def connect(self, token: str, *, basic_user: str | None = None) -> HostHTTP:
        return self.API.connect(self.connection.url, bearer=token, session=self.session)

    @staticmethod
    def repo_of(entry: dict[str, Any]) -> HostRepo:
        clones = {c.get("name"): c.get("href") for c in (entry.get("links") or {}).get("clone", [])}
        project = str((entry.get("project") or {}).get("key", ""))
        return HostRepo(
            external_id=str(entry["id"]),
            path=f"{project}/{entry['slug']}",
            clone_url=str(clones.get("http") or clones.get("https") or ""),
            visibility="public" if entry.get("public") else "private",
            fork="origin" in entry,
            archived=bool(entry.get("archived")),
            description=str(entry.get("description") or ""),
        )

    def discover(self) -> Discovery:
        found = Discovery()

        for project in self.connection.projects:
            try:
                for entry in self.http.items(f"projects/{quote(project)}/repos", {"limit": 100}):
                    self.keep(found, self.repo_of(entry))
            except (Forbidden, Missing) as exc:
                found.warnings.append(f"project {project}: {exc.message}")
        for path in self.connection.repos:
            key, _, slug = path.partition("/")
            try:
                self.keep(found, self.repo_of(self.http.get(f"projects/{quote(key)}/repos/{quote(slug)}").body))
            except (Forbidden, Missing) as exc:
                found.warnings.append(f"repo {path}: {exc.message}")
        if not (self.connection.projects or self.connection.repos):
            for entry in self.http.items("repos", {"limit": 100}):
                self.keep(found, self.repo_of(entry))
        return found

    def user_repos(self, http: HostHTTP) -> UserRepos:
        return UserRepos({str(e["id"]) for e in http.items("repos", {"limit": 100, "permission": "REPO_READ"})})

    def repo_members(self, repo: HostRepo) -> set[str]:
        key, _, slug = repo.path.partition("/")
        entries = self.http.items(
            f"projects/{quote(key)}/repos/{quote(slug)}/permissions/users", {"limit": 100, "filter": ""}
        )
        return {str((e.get("user") or {}).get("id")) for e in entries}


# -- Gerrit -------------------------------------------------------------------------------------------------
class GerritClient(HostClient):
    API = GerritAPI

    def connect(self, token: str, *, basic_user: str | None = None) -> HostHTTP:
        basic = (basic_user or self.connection.username or "", token)
        return self.API.connect(self.connection.url, basic=basic, session=self.session)

    def repo_of(self, name: str, entry: dict[str, Any]) -> HostRepo:
        return HostRepo(
            external_id=str(entry.get("id") or quote(name, safe="")),
            path=name,
            clone_url=f"{self.connection.url}a/{name}",
            visibility="private",
            archived=entry.get("state") == "READ_ONLY",
            description=str(entry.get("description") or ""),
        )

    def _projects(self, http: HostHTTP) -> dict[str, Any]:
        body = http.get("projects/", {"d": "", "t": ""}).body
        return body if isinstance(body, dict) else {}

    def discover(self) -> Discovery:
        found = Discovery()
        wanted = set(self.connection.projects) | set(self.connection.repos)
        for name, entry in sorted(self._projects(self.http).items()):
            if wanted and name not in wanted:
                continue
            self.keep(found, self.repo_of(name, entry))
        return found

    def user_repos(self, http: HostHTTP) -> UserRepos:
        # Gerrit lists only the projects the caller may read.
        return UserRepos({self.repo_of(n, e).external_id for n, e in self._projects(http).items()})

    def repo_members(self, repo: HostRepo) -> set[str]:
        return set()  # Gerrit has no member listing per project: user-centric sync only


CLIENTS: dict[str, type[HostClient]] = {
    c.API.kind: c for c in (GitHubClient, GitLabClient, BitbucketCloudClient, BitbucketServerClient, GerritClient)
}


def client_for(connection: CodeHostConnection, token: str, session: requests.Session | None = None) -> HostClient:
    return CLIENTS[connection.kind](connection, token, session)


def api_base(connection: CodeHostConnection) -> str:
    """The base URL of the connection's API (what its clients' sessions are pooled for)."""
    return CLIENTS[connection.kind].API.base(connection.url)
