"""A fake code host on loopback speaking the real OAuth 2 and REST shapes of GitHub, GitLab, Bitbucket Cloud,
Bitbucket Data Center and Gerrit: authorization (with PKCE S256 checks), token exchange, user, e-mails with
verified flags, organizations and teams (display names), groups with access levels (Minimal Access = 5) and
the `X-GitHub-SSO` header for organizations whose SSO the token was not authorized for. List endpoints paginate
as the hosts do: `page`/`per_page` parameters (GitHub: default 30, GitLab: default 20, both at most 100),
GitHub's `Link` header (`next`, `last`, `first`, `prev`), GitLab's `X-Page`/`X-Next-Page`/`X-Total` headers
plus its `Link` header (`gitlab_link_header = False` leaves only `X-Next-Page`).

The "browser" signed in at the host is `host.signed_in` (a login); its authorization page approves at once.

Repositories (`host.add_repo`) are served for code host connections: GitHub REST v3 (`/api/v3/orgs/{org}/repos`,
`/user/repos`, `/repos/{owner}/{name}[/collaborators]`, with `ETag`/`If-None-Match` and 304s), GitLab API v4
(`/groups/{path}/projects`, `/projects?min_access_level=`, `/projects/{id}[/members/all]`), and their git
contents over smart HTTP through `git http-backend` at `/git/<path>.git` (basic auth: password = a token) and,
as Gerrit serves them, at `/a/<project>` (basic auth with the user's HTTP password; unreadable projects 404).
`host.down` answers 503, `host.rate_limited` rate-limits that many API calls (GitHub: 403 with
`X-RateLimit-Remaining: 0`, GitLab: 429 with `Retry-After`), `host.restricted_orgs` refuses OAuth tokens
(not personal tokens, `host.pat(login)`) for those organizations as GitHub's OAuth App access restrictions
do, and `host.token_lifetime` makes tokens expire (refresh_token grant supported).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import secrets
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from tests.fakes.server import LoopbackServer


@dataclass
class HostUser:
    id: int
    login: str
    name: str = ""
    emails: list[tuple[str, bool]] = field(default_factory=list)  # (address, verified); first is primary
    orgs: list[tuple[int, str]] = field(default_factory=list)  # (org ID, org login)
    teams: list[tuple[str, str]] = field(default_factory=list)  # (org login, team display name)
    groups: dict[str, int] = field(default_factory=dict)  # GitLab group full path → access level
    sso_unauthorized: list[int] = field(default_factory=list)  # GitHub org IDs whose SSO the token lacks
    http_password: str = ""  # Gerrit HTTP credential


@dataclass
class FakeRepo:
    id: int
    path: str  # owner/name (GitLab: group/subgroup/name)
    visibility: str = "private"  # public | private | internal
    members: dict[str, int] = field(default_factory=dict)  # login -> GitLab access level (GitHub: any = pull)
    fork: bool = False
    archived: bool = False
    git_dir: Path | None = None  # a bare repository served over smart HTTP
    description: str = ""

    @property
    def owner(self) -> str:
        return self.path.rsplit("/", 1)[0]


def _page_window(request: Request, default: int) -> tuple[int, int]:
    """(page, per_page) of a list request, clamped as the hosts do (page ≥ 1, per_page 1-100)."""
    params = request.query_params
    page = int(params["page"]) if params.get("page", "").isdigit() and int(params["page"]) > 0 else 1
    per_page = int(params["per_page"]) if params.get("per_page", "").isdigit() else default
    return page, min(max(per_page, 1), 100)


def _page_url(request: Request, page: int) -> str:
    query = [(k, v) for k, v in request.query_params.multi_items() if k != "page"]
    return str(request.url.replace(query=urlencode([*query, ("page", str(page))])))


def paginate(request: Request, items: list[Any], *, host: str, link: bool = True) -> JSONResponse:
    """One page of `items` with the pagination headers `host` ("github" or "gitlab") sends."""
    page, per_page = _page_window(request, 30 if host == "github" else 20)
    last = max(1, -(-len(items) // per_page))
    response = JSONResponse(items[(page - 1) * per_page : page * per_page])
    rels = []
    if page < last:
        rels.append(("next", page + 1))
    if page > 1:
        rels.append(("prev", page - 1))
    rels += [("first", 1), ("last", last)]
    if link and (host == "gitlab" or last > 1):
        response.headers["Link"] = ", ".join(f'<{_page_url(request, n)}>; rel="{rel}"' for rel, n in rels)
    if host == "gitlab":
        response.headers["X-Page"] = str(page)
        response.headers["X-Per-Page"] = str(per_page)
        response.headers["X-Next-Page"] = str(page + 1) if page < last else ""
        response.headers["X-Prev-Page"] = str(page - 1) if page > 1 else ""
        response.headers["X-Total"] = str(len(items))
        response.headers["X-Total-Pages"] = str(last)
    return response


@dataclass
class _Grant:
    login: str
    redirect_uri: str
    challenge: str
    scope: str


class FakeCodeHost:
    def __init__(self, client_id: str = "client-id", client_secret: str = "client-secret") -> None:
        self.client_id = client_id
        self.client_secret = client_secret
        self.users: dict[str, HostUser] = {}
        self.signed_in: str | None = None
        self.codes: dict[str, _Grant] = {}
        self.tokens: dict[str, str] = {}
        self.authorize_requests: list[dict[str, str]] = []
        self.token_requests: list[dict[str, str]] = []
        self.api_requests: list[str] = []  # path?query of every REST call
        self.gitlab_link_header = True
        self.repos: dict[str, FakeRepo] = {}
        self.admins: set[str] = set()  # logins that see every repository (host administrators)
        self.pats: set[str] = set()  # personal access tokens (not subject to OAuth App restrictions)
        self.restricted_orgs: set[str] = set()
        self.down = False
        self.rate_limited = 0
        self.rate_limit_reset_seconds = 1
        self.token_lifetime: int | None = None
        self.expiry: dict[str, float] = {}
        self.refresh_tokens: dict[str, str] = {}
        self.not_modified = 0
        self.git_requests: list[str] = []  # Authorization headers of git requests
        self.token_scopes: dict[str, str] = {}  # token -> GitHub's X-OAuth-Scopes of a classic token
        self._server = LoopbackServer(self.app())
        self.url = self._server.url + "/"

    def __enter__(self) -> FakeCodeHost:
        self._server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.__exit__(*exc)

    def add(self, user: HostUser) -> HostUser:
        self.users[user.login] = user
        return user

    # -- OAuth 2 ------------------------------------------------------------------------------------------
    async def authorize(self, request: Request) -> Response:
        params = dict(request.query_params)
        self.authorize_requests.append(params)
        if params.get("client_id") != self.client_id:
            return PlainTextResponse("unknown client_id", status_code=400)
        if params.get("response_type") != "code" or not params.get("redirect_uri"):
            return PlainTextResponse("bad request", status_code=400)
        if params.get("code_challenge") and params.get("code_challenge_method") != "S256":
            return PlainTextResponse("only S256", status_code=400)
        if self.signed_in is None:
            return PlainTextResponse("not signed in at the code host", status_code=403)
        code = secrets.token_hex(10)
        self.codes[code] = _Grant(
            self.signed_in, params["redirect_uri"], params.get("code_challenge", ""), params.get("scope", "")
        )
        query = urlencode({"code": code, "state": params.get("state", "")})
        return RedirectResponse(f"{params['redirect_uri']}?{query}", status_code=302)

    async def token(self, request: Request) -> Response:
        form = {k: str(v) for k, v in (await request.form()).items()}
        self.token_requests.append(form)
        client_id, client_secret = form.get("client_id", ""), form.get("client_secret", "")
        basic = request.headers.get("authorization", "")
        if basic.lower().startswith("basic "):
            client_id, _, client_secret = base64.b64decode(basic[6:]).decode().partition(":")
        if (client_id, client_secret) != (self.client_id, self.client_secret):
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        if form.get("grant_type") == "refresh_token":
            login = self.refresh_tokens.pop(form.get("refresh_token", ""), None)
            if login is None:
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            return JSONResponse(self._issue(login, ""))
        grant = self.codes.pop(form.get("code", ""), None)  # single use
        if grant is None or form.get("grant_type") != "authorization_code":
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        if form.get("redirect_uri") != grant.redirect_uri:
            return JSONResponse({"error": "invalid_grant", "error_description": "redirect_uri"}, status_code=400)
        if grant.challenge:
            digest = hashlib.sha256(form.get("code_verifier", "").encode()).digest()
            if base64.urlsafe_b64encode(digest).decode().rstrip("=") != grant.challenge:
                return JSONResponse({"error": "invalid_grant", "error_description": "PKCE"}, status_code=400)
        body = self._issue(grant.login, grant.scope)
        if "application/json" not in request.headers.get("accept", ""):
            return PlainTextResponse(urlencode(body), media_type="application/x-www-form-urlencoded")
        return JSONResponse(body)

    def _issue(self, login: str, scope: str) -> dict[str, Any]:
        access = secrets.token_hex(20)
        self.tokens[access] = login
        body: dict[str, Any] = {"access_token": access, "token_type": "bearer", "scope": scope}
        if self.token_lifetime is not None:
            refresh = secrets.token_hex(20)
            self.refresh_tokens[refresh] = login
            self.expiry[access] = time.time() + self.token_lifetime
            body |= {"expires_in": self.token_lifetime, "refresh_token": refresh}
        return body

    def pat(self, login: str) -> str:
        """A personal access token of `login` (connection tokens)."""
        token = "pat-" + secrets.token_hex(16)
        self.tokens[token] = login
        self.pats.add(token)
        return token

    def add_repo(self, repo: FakeRepo) -> FakeRepo:
        self.repos[repo.path] = repo
        return repo

    def _token(self, request: Request) -> str:
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        return value.strip() if scheme.lower() in ("bearer", "token") else ""

    def _user(self, request: Request) -> HostUser | None:
        header = request.headers.get("authorization", "")
        if header.lower().startswith("basic "):
            # Bitbucket app passwords and Gerrit HTTP passwords: user:secret.
            login, _, secret = base64.b64decode(header[6:]).decode().partition(":")
            user = self.users.get(login)
            if user is not None and (self.tokens.get(secret) == login or secret == user.http_password):
                return user
            return None
        token = self._token(request)
        login = self.tokens.get(token)
        if login is None or self.expiry.get(token, float("inf")) < time.time():
            return None
        return self.users.get(login)

    def _api(self, handler: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            self.api_requests.append(f"{request.url.path}?{request.url.query}")
            if self.down:
                return PlainTextResponse("unavailable", status_code=503)
            if self.rate_limited > 0:
                self.rate_limited -= 1
                reset = self.rate_limit_reset_seconds
                if request.url.path.startswith("/api/v4/"):
                    return JSONResponse({"message": "429 Too Many Requests"}, 429, {"Retry-After": str(reset)})
                headers = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(time.time()) + reset)}
                return JSONResponse({"message": "API rate limit exceeded"}, 403, headers)
            user = self._user(request)
            if user is None:
                return JSONResponse({"message": "Bad credentials"}, status_code=401)
            result: Response = handler(request, user)
            etag = None
            if request.url.path.startswith("/api/v3/") and result.status_code == 200:
                etag = '"' + hashlib.sha256(bytes(result.body)).hexdigest()[:32] + '"'
                result.headers["ETag"] = etag
            if etag is not None and request.headers.get("if-none-match") == etag:
                self.not_modified += 1
                return Response(status_code=304, headers={"ETag": etag})
            return result

        return endpoint

    # -- repositories -------------------------------------------------------------------------------------
    def _sees(self, user: HostUser, repo: FakeRepo) -> bool:
        return repo.visibility == "public" or user.login in self.admins or user.login in repo.members

    def _restricted(self, request: Request, org: str) -> bool:
        return org in self.restricted_orgs and self._token(request) not in self.pats

    def _gh_repo(self, repo: FakeRepo) -> dict[str, Any]:
        return {
            "id": repo.id,
            "name": repo.path.rsplit("/", 1)[-1],
            "full_name": repo.path,
            "private": repo.visibility != "public",
            "visibility": repo.visibility,
            "fork": repo.fork,
            "archived": repo.archived,
            "description": repo.description,
            "clone_url": f"{self.url}git/{repo.path}.git",
            "owner": {"login": repo.owner},
        }

    def gh_org_repos(self, request: Request, user: HostUser) -> Response:
        org = request.path_params["org"]
        if self._restricted(request, org):
            message = (
                f"Although you appear to have the correct authorization credentials, the `{org}` organization has "
                "enabled OAuth App access restrictions"
            )
            return JSONResponse({"message": message}, status_code=403)
        items = [self._gh_repo(r) for r in self.repos.values() if r.owner == org and self._sees(user, r)]
        if not items and not any(r.owner == org for r in self.repos.values()):
            return JSONResponse({"message": "Not Found"}, status_code=404)
        return paginate(request, items, host="github")

    def gh_user_repos(self, request: Request, user: HostUser) -> Response:
        items = [
            self._gh_repo(r)
            for r in self.repos.values()
            if (user.login in r.members or user.login in self.admins) and not self._restricted(request, r.owner)
        ]
        return paginate(request, items, host="github")

    def gh_repo(self, request: Request, user: HostUser) -> Response:
        repo = self.repos.get(f"{request.path_params['owner']}/{request.path_params['name']}")
        if repo is None or not self._sees(user, repo) or self._restricted(request, repo.owner):
            return JSONResponse({"message": "Not Found"}, status_code=404)
        return JSONResponse(self._gh_repo(repo))

    def gh_collaborators(self, request: Request, user: HostUser) -> Response:
        repo = self.repos.get(f"{request.path_params['owner']}/{request.path_params['name']}")
        if repo is None or not self._sees(user, repo):
            return JSONResponse({"message": "Not Found"}, status_code=404)
        items = [
            {"id": self.users[login].id, "login": login, "permissions": {"pull": True}}
            for login in repo.members
            if login in self.users
        ]
        return paginate(request, items, host="github")

    def _gl_project(self, repo: FakeRepo) -> dict[str, Any]:
        return {
            "id": repo.id,
            "path_with_namespace": repo.path,
            "http_url_to_repo": f"{self.url}git/{repo.path}.git",
            "visibility": repo.visibility,
            "archived": repo.archived,
            "description": repo.description,
        }

    def _gl_find(self, ident: str) -> FakeRepo | None:
        ident = unquote(ident)
        if ident.isdigit():
            return next((r for r in self.repos.values() if r.id == int(ident)), None)
        return self.repos.get(ident)

    def gl_group_projects(self, request: Request, user: HostUser) -> Response:
        group = unquote(request.path_params["group"])
        nested = request.query_params.get("include_subgroups") == "true"
        archived = request.query_params.get("archived")
        items = [
            self._gl_project(r)
            for r in self.repos.values()
            if (r.owner == group or (nested and r.owner.startswith(group + "/")))
            and self._sees(user, r)
            and (archived is None or r.archived == (archived == "true"))
        ]
        return paginate(request, items, host="gitlab", link=self.gitlab_link_header)

    def gl_projects(self, request: Request, user: HostUser) -> Response:
        minimum = int(request.query_params.get("min_access_level", "0") or 0)
        membership = request.query_params.get("membership") == "true" or minimum > 0
        items = [
            self._gl_project(r)
            for r in self.repos.values()
            if (r.members.get(user.login, 0) >= max(minimum, 1) if membership else self._sees(user, r))
        ]
        return paginate(request, items, host="gitlab", link=self.gitlab_link_header)

    def gl_project(self, request: Request, user: HostUser) -> Response:
        repo = self._gl_find(request.path_params["ident"])
        if repo is None or not self._sees(user, repo):
            return JSONResponse({"message": "404 Project Not Found"}, status_code=404)
        return JSONResponse(self._gl_project(repo))

    def gl_members(self, request: Request, user: HostUser) -> Response:
        repo = self._gl_find(request.path_params["ident"])
        if repo is None or not self._sees(user, repo):
            return JSONResponse({"message": "404 Project Not Found"}, status_code=404)
        items = [
            {"id": self.users[login].id, "username": login, "access_level": level}
            for login, level in repo.members.items()
            if login in self.users
        ]
        return paginate(request, items, host="gitlab", link=self.gitlab_link_header)

    # -- Bitbucket Cloud 2.0 ------------------------------------------------------------------------------
    def _bbc_repo(self, repo: FakeRepo) -> dict[str, Any]:
        return {
            "uuid": f"{{repo-{repo.id}}}",
            "full_name": repo.path,
            "is_private": repo.visibility != "public",
            "description": repo.description,
            "links": {"clone": [{"name": "https", "href": f"{self.url}git/{repo.path}.git"}]},
        }

    def bbc_page(self, request: Request, values: list[Any]) -> Response:
        page, per_page = _page_window(request, 10)
        per_page = int(request.query_params.get("pagelen", per_page))
        body: dict[str, Any] = {"values": values[(page - 1) * per_page : page * per_page], "page": page}
        body |= {"pagelen": per_page, "size": len(values)}
        if page * per_page < len(values):
            body["next"] = _page_url(request, page + 1)
        return JSONResponse(body)

    def bbc_workspace_repos(self, request: Request, user: HostUser) -> Response:
        workspace = request.path_params["workspace"]
        items = [self._bbc_repo(r) for r in self.repos.values() if r.owner == workspace and self._sees(user, r)]
        return self.bbc_page(request, items)

    def bbc_repo(self, request: Request, user: HostUser) -> Response:
        repo = self.repos.get(f"{request.path_params['workspace']}/{request.path_params['slug']}")
        if repo is None or not self._sees(user, repo):
            return JSONResponse({"type": "error", "error": {"message": "not found"}}, status_code=404)
        return JSONResponse(self._bbc_repo(repo))

    def bbc_user_permissions(self, request: Request, user: HostUser) -> Response:
        items = [
            {"permission": "read", "repository": {"uuid": f"{{repo-{r.id}}}", "full_name": r.path}}
            for r in self.repos.values()
            if user.login in r.members
        ]
        return self.bbc_page(request, items)

    def bbc_workspace_permissions(self, request: Request, user: HostUser) -> Response:
        query = request.query_params.get("q", "")
        wanted = query.partition('"')[2].rstrip('"')
        repo = self.repos.get(wanted)
        items = [
            {"permission": "read", "user": {"uuid": f"{{{self.users[m].id:08d}}}", "account_id": str(self.users[m].id)}}
            for m in (repo.members if repo else {})
            if m in self.users
        ]
        return self.bbc_page(request, items)

    # -- Bitbucket Server 1.0 -----------------------------------------------------------------------------
    def _bbs_repo(self, repo: FakeRepo) -> dict[str, Any]:
        key, _, slug = repo.path.partition("/")
        return {
            "id": repo.id,
            "slug": slug,
            "name": slug,
            "project": {"key": key},
            "public": repo.visibility == "public",
            "archived": repo.archived,
            "links": {"clone": [{"name": "http", "href": f"{self.url}git/{repo.path}.git"}]},
        }

    @staticmethod
    def bbs_page(request: Request, values: list[Any]) -> Response:
        start = int(request.query_params.get("start", "0") or 0)
        limit = int(request.query_params.get("limit", "25") or 25)
        chunk = values[start : start + limit]
        last = start + limit >= len(values)
        body: dict[str, Any] = {"values": chunk, "size": len(chunk), "limit": limit, "start": start, "isLastPage": last}
        if not last:
            body["nextPageStart"] = start + limit
        return JSONResponse(body)

    def bbs_project_repos(self, request: Request, user: HostUser) -> Response:
        key = request.path_params["key"]
        items = [self._bbs_repo(r) for r in self.repos.values() if r.owner == key and self._sees(user, r)]
        return self.bbs_page(request, items)

    def bbs_repos(self, request: Request, user: HostUser) -> Response:
        items = [self._bbs_repo(r) for r in self.repos.values() if user.login in r.members or user.login in self.admins]
        return self.bbs_page(request, items)

    def bbs_repo_users(self, request: Request, user: HostUser) -> Response:
        repo = self.repos.get(f"{request.path_params['key']}/{request.path_params['slug']}")
        if repo is None or user.login not in self.admins:
            return JSONResponse({"errors": [{"message": "no such repository"}]}, status_code=404)
        items = [
            {"user": {"id": self.users[m].id, "name": m, "slug": m}, "permission": "REPO_READ"}
            for m in repo.members
            if m in self.users
        ]
        return self.bbs_page(request, items)

    # -- Gerrit -------------------------------------------------------------------------------------------
    def gerrit_projects(self, request: Request, user: HostUser) -> Response:
        body = {
            r.path: {"id": r.path.replace("/", "%2F"), "description": r.description, "state": "ACTIVE"}
            for r in self.repos.values()
            if self._sees(user, r)
        }
        return Response(")]}'\n" + json.dumps(body), media_type="application/json")

    async def git(self, request: Request) -> Response:
        """Smart HTTP through `git http-backend` (CGI); basic auth whose password is a known token."""
        header = request.headers.get("authorization", "")
        self.git_requests.append(header)
        password = ""
        if header.lower().startswith("basic "):
            password = base64.b64decode(header[6:]).decode().partition(":")[2]
        if self.down:
            return PlainTextResponse("unavailable", status_code=503)
        if password not in self.tokens:
            return PlainTextResponse("auth", status_code=401, headers={"WWW-Authenticate": 'Basic realm="git"'})
        path = request.path_params["path"]
        repo_path, _, rest = path.partition(".git/")
        repo = self.repos.get(repo_path)
        if repo is None or repo.git_dir is None:
            return PlainTextResponse("not found", status_code=404)
        return await self._http_backend(request, repo.git_dir, rest)

    async def gerrit_git(self, request: Request) -> Response:
        """Gerrit's authenticated clones at `/a/<project>` (no `.git`): basic auth with the user's HTTP password
        (or a token); only projects the user may read, others answer 404 as Gerrit does."""
        self.git_requests.append(request.headers.get("authorization", ""))
        if self.down:
            return PlainTextResponse("unavailable", status_code=503)
        user = self._user(request)
        if user is None:
            return PlainTextResponse(
                "Unauthorized", status_code=401, headers={"WWW-Authenticate": 'Basic realm="Gerrit"'}
            )
        path = request.path_params["path"]
        for suffix in ("/info/refs", "/git-upload-pack", "/HEAD"):
            if path.endswith(suffix):
                name, rest = path[: -len(suffix)], suffix[1:]
                break
        else:
            return PlainTextResponse("Not Found", status_code=404)
        repo = self.repos.get(name)
        if repo is None or repo.git_dir is None or not self._sees(user, repo):
            return PlainTextResponse("Not Found", status_code=404)
        return await self._http_backend(request, repo.git_dir, rest)

    async def _http_backend(self, request: Request, git_dir: Path, rest: str) -> Response:
        """Run `git http-backend` (CGI) for `rest` (info/refs, git-upload-pack, ...) of the bare repository."""
        body = await request.body()
        env = {
            **os.environ,
            "GIT_PROJECT_ROOT": str(git_dir.parent),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": f"/{git_dir.name}/{rest}",
            "REQUEST_METHOD": request.method,
            "QUERY_STRING": request.url.query,
            "CONTENT_TYPE": request.headers.get("content-type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": "127.0.0.1",
        }
        if request.headers.get("content-encoding"):
            env["HTTP_CONTENT_ENCODING"] = request.headers["content-encoding"]
        if request.headers.get("git-protocol"):
            env["HTTP_GIT_PROTOCOL"] = request.headers["git-protocol"]
        # A thread, not asyncio's subprocess support: the server's loop runs in a thread of its own.
        done = await asyncio.to_thread(
            subprocess.run, ["git", "http-backend"], input=body, env=env, capture_output=True, check=False
        )
        out = done.stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        status, headers = 200, {}
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers[name] = value.strip()
        return Response(payload, status_code=status, headers=headers)

    # -- GitHub -------------------------------------------------------------------------------------------
    def gh_user(self, request: Request, user: HostUser) -> Response:
        primary = user.emails[0][0] if user.emails else None
        response = JSONResponse({"id": user.id, "login": user.login, "name": user.name, "email": primary})
        scopes = self.token_scopes.get(self._token(request))
        if scopes is not None:  # classic tokens say their scopes; fine-grained ones send no such header
            response.headers["X-OAuth-Scopes"] = scopes
        return response

    @staticmethod
    def gh_emails(request: Request, user: HostUser) -> Response:
        items = [
            {"email": e, "verified": v, "primary": i == 0, "visibility": None} for i, (e, v) in enumerate(user.emails)
        ]
        return paginate(request, items, host="github")

    @staticmethod
    def gh_orgs(request: Request, user: HostUser) -> Response:
        hidden = set(user.sso_unauthorized)
        items = [{"id": i, "login": login} for i, login in user.orgs if i not in hidden]
        response = paginate(request, items, host="github")
        if hidden:
            ids = ",".join(str(i) for i in sorted(hidden))
            response.headers["X-GitHub-SSO"] = f"partial-results; organizations={ids}"
        return response

    @staticmethod
    def gh_teams(request: Request, user: HostUser) -> Response:
        items = [
            {"name": team, "slug": team.lower().replace(" ", "-"), "organization": {"login": org}}
            for org, team in user.teams
        ]
        return paginate(request, items, host="github")

    # -- GitLab -------------------------------------------------------------------------------------------
    @staticmethod
    def gl_user(request: Request, user: HostUser) -> Response:
        primary = user.emails[0] if user.emails else ("", False)
        return JSONResponse(
            {
                "id": user.id,
                "username": user.login,
                "name": user.name,
                "email": primary[0],
                "confirmed_at": "2024-01-01T00:00:00Z" if primary[1] else None,
            }
        )

    def gl_emails(self, request: Request, user: HostUser) -> Response:
        items = [
            {"id": i, "email": e, "confirmed_at": "2024-01-01T00:00:00Z" if v else None}
            for i, (e, v) in enumerate(user.emails[1:])
        ]
        return paginate(request, items, host="gitlab", link=self.gitlab_link_header)

    def gl_groups(self, request: Request, user: HostUser) -> Response:
        minimum = int(request.query_params.get("min_access_level", "0"))
        items = [
            {"id": i, "full_path": path, "name": path.rsplit("/", 1)[-1]}
            for i, (path, level) in enumerate(user.groups.items())  # insertion order: tests place the match
            if level >= minimum
        ]
        return paginate(request, items, host="gitlab", link=self.gitlab_link_header)

    # -- Bitbucket Cloud ----------------------------------------------------------------------------------
    @staticmethod
    def bbc_user(request: Request, user: HostUser) -> Response:
        return JSONResponse(
            {
                "uuid": f"{{{user.id:08d}}}",
                "username": user.login,
                "display_name": user.name,
                "account_id": str(user.id),
            }
        )

    @staticmethod
    def bbc_emails(request: Request, user: HostUser) -> Response:
        values = [{"email": e, "is_confirmed": v, "is_primary": i == 0} for i, (e, v) in enumerate(user.emails)]
        return JSONResponse({"values": values, "pagelen": 10, "page": 1, "size": len(values)})

    # -- Bitbucket Data Center ----------------------------------------------------------------------------
    @staticmethod
    def bbs_whoami(request: Request, user: HostUser) -> Response:
        return PlainTextResponse(user.login)

    def bbs_user(self, request: Request, user: HostUser) -> Response:
        target = self.users.get(request.path_params["slug"])
        if target is None:
            return JSONResponse({"errors": [{"message": "no such user"}]}, status_code=404)
        email = target.emails[0][0] if target.emails else None
        return JSONResponse(
            {
                "name": target.login,
                "emailAddress": email,
                "id": target.id,
                "displayName": target.name,
                "slug": target.login,
            }
        )

    # -- Gerrit -------------------------------------------------------------------------------------------
    async def gerrit_self(self, request: Request) -> Response:
        header = request.headers.get("authorization", "")
        if not header.lower().startswith("basic "):
            return PlainTextResponse("Unauthorized", status_code=401)
        login, _, password = base64.b64decode(header[6:]).decode().partition(":")
        user = self.users.get(login)
        if user is None or not user.http_password or password != user.http_password:
            return PlainTextResponse("Unauthorized", status_code=401)
        email = user.emails[0][0] if user.emails else None
        body = {"_account_id": user.id, "name": user.name, "email": email, "username": user.login}
        # Gerrit prefixes every JSON response with a line that stops cross-site script inclusion.
        return Response(")]}'\n" + json.dumps(body), media_type="application/json")

    def app(self) -> Starlette:
        api = self._api
        return Starlette(
            routes=[
                Route("/login/oauth/authorize", self.authorize),
                Route("/login/oauth/access_token", self.token, methods=["POST"]),
                Route("/api/v3/user", api(self.gh_user)),
                Route("/api/v3/user/emails", api(self.gh_emails)),
                Route("/api/v3/user/orgs", api(self.gh_orgs)),
                Route("/api/v3/user/teams", api(self.gh_teams)),
                Route("/api/v3/user/repos", api(self.gh_user_repos)),
                Route("/api/v3/orgs/{org}/repos", api(self.gh_org_repos)),
                Route("/api/v3/repos/{owner}/{name}", api(self.gh_repo)),
                Route("/api/v3/repos/{owner}/{name}/collaborators", api(self.gh_collaborators)),
                Route("/api/v4/groups/{group:path}/projects", api(self.gl_group_projects)),
                Route("/api/v4/projects", api(self.gl_projects)),
                Route("/api/v4/projects/{ident:path}/members/all", api(self.gl_members)),
                Route("/api/v4/projects/{ident:path}", api(self.gl_project)),
                Route("/git/{path:path}", self.git, methods=["GET", "POST"]),
                Route("/api/2.0/repositories/{workspace}", api(self.bbc_workspace_repos)),
                Route("/api/2.0/repositories/{workspace}/{slug}", api(self.bbc_repo)),
                Route("/api/2.0/user/permissions/repositories", api(self.bbc_user_permissions)),
                Route("/api/2.0/workspaces/{workspace}/permissions/repositories", api(self.bbc_workspace_permissions)),
                Route("/rest/api/1.0/projects/{key}/repos", api(self.bbs_project_repos)),
                Route("/rest/api/1.0/projects/{key}/repos/{slug}/permissions/users", api(self.bbs_repo_users)),
                Route("/rest/api/1.0/repos", api(self.bbs_repos)),
                Route("/a/projects/", api(self.gerrit_projects)),
                Route("/oauth/authorize", self.authorize),
                Route("/oauth/token", self.token, methods=["POST"]),
                Route("/api/v4/user", api(self.gl_user)),
                Route("/api/v4/user/emails", api(self.gl_emails)),
                Route("/api/v4/groups", api(self.gl_groups)),
                Route("/site/oauth2/authorize", self.authorize),
                Route("/site/oauth2/access_token", self.token, methods=["POST"]),
                Route("/api/2.0/user", api(self.bbc_user)),
                Route("/api/2.0/user/emails", api(self.bbc_emails)),
                Route("/rest/oauth2/latest/authorize", self.authorize),
                Route("/rest/oauth2/latest/token", self.token, methods=["POST"]),
                Route("/plugins/servlet/applinks/whoami", api(self.bbs_whoami)),
                Route("/rest/api/1.0/users/{slug}", api(self.bbs_user)),
                Route("/a/accounts/self", self.gerrit_self),
                # Last: every other `/a/...` path is a clone of a project (`/a/<project>/info/refs`, ...).
                Route("/a/{path:path}", self.gerrit_git, methods=["GET", "POST"]),
            ]
        )
