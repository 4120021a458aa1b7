"""A fake code host on loopback speaking the real OAuth 2 and REST shapes of GitHub, GitLab, Bitbucket Cloud,
Bitbucket Data Center and Gerrit: authorization (with PKCE S256 checks), token exchange, user, e-mails with
verified flags, organizations and teams (display names), groups with access levels (Minimal Access = 5) and
the `X-GitHub-SSO` header for organizations whose SSO the token was not authorized for. List endpoints paginate
as the hosts do: `page`/`per_page` parameters (GitHub: default 30, GitLab: default 20, both at most 100),
GitHub's `Link` header (`next`, `last`, `first`, `prev`), GitLab's `X-Page`/`X-Next-Page`/`X-Total` headers
plus its `Link` header (`gitlab_link_header = False` leaves only `X-Next-Page`).

The "browser" signed in at the host is `host.signed_in` (a login); its authorization page approves at once.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

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
        grant = self.codes.pop(form.get("code", ""), None)  # single use
        if grant is None or form.get("grant_type") != "authorization_code":
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        if form.get("redirect_uri") != grant.redirect_uri:
            return JSONResponse({"error": "invalid_grant", "error_description": "redirect_uri"}, status_code=400)
        if grant.challenge:
            digest = hashlib.sha256(form.get("code_verifier", "").encode()).digest()
            if base64.urlsafe_b64encode(digest).decode().rstrip("=") != grant.challenge:
                return JSONResponse({"error": "invalid_grant", "error_description": "PKCE"}, status_code=400)
        access = secrets.token_hex(20)
        self.tokens[access] = grant.login
        body = {"access_token": access, "token_type": "bearer", "scope": grant.scope}
        if "application/json" not in request.headers.get("accept", ""):
            return PlainTextResponse(urlencode(body), media_type="application/x-www-form-urlencoded")
        return JSONResponse(body)

    def _user(self, request: Request) -> HostUser | None:
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() not in ("bearer", "token"):
            return None
        login = self.tokens.get(value.strip())
        return self.users.get(login) if login else None

    def _api(self, handler: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            self.api_requests.append(f"{request.url.path}?{request.url.query}")
            user = self._user(request)
            if user is None:
                return JSONResponse({"message": "Bad credentials"}, status_code=401)
            result: Response = handler(request, user)
            return result

        return endpoint

    # -- GitHub -------------------------------------------------------------------------------------------
    @staticmethod
    def gh_user(request: Request, user: HostUser) -> Response:
        primary = user.emails[0][0] if user.emails else None
        return JSONResponse({"id": user.id, "login": user.login, "name": user.name, "email": primary})

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
            ]
        )
