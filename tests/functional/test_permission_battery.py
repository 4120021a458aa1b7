"""The permission battery: every route of the app and every MCP tool, as five principals, against one table.

Principals: anonymous; `alice`, a normal user (session); `carol`, a user without MCP#ACCESS (the permission
is taken from the User role and given back to alice through a custom role); an analytics access token (of
the site admin: it still reaches the analytics API only); `root`, a site admin (session). Sessions send the
CSRF token of their session with every write, so the outcome is the permission decision, not the CSRF check.

Outcome classes: "ok" (2xx/3xx), "401" (401, or a page's redirect to the sign-in page), "403", "404", and
"400" for OAuth protocol endpoints that refuse the (deliberately empty) grant alike for everyone. A route or
tool added without a row here fails `test_every_route_and_tool_has_a_row`.

One app and one database for the module: rows that change state act on objects made for that row only, so
the rows may run in any order.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

from codewell.accounts.permissions import MCP_ACCESS
from codewell.accounts.roles import RoleService
from codewell.accounts.service import AccountService
from codewell.accounts.tokens import TokenService
from codewell.agents.service import AgentService
from codewell.analytics.credits import CreditService
from codewell.analytics.tokens import AnalyticsTokenService
from codewell.app import create_app
from codewell.capabilities import CAPABILITIES
from codewell.core.actors import INTERNAL
from codewell.core.settings import Settings
from codewell.oauth.service import OAuthService
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from tests.conftest import PostgresReset
from tests.factories import make_user, set_site_config
from tests.gitfixtures import make_repo, register_local_repo

PASSWORD = "correct horse battery staple"
PRINCIPALS = ("anonymous", "user", "no_mcp", "analytics", "admin")
ACCEPT = {"Accept": "application/json, text/event-stream"}
APP_FILES = {
    "app/__init__.py": "",
    "app/util.py": "def helper(x):\n    return x * 2\n",
    "app/main.py": "from .util import helper\n\n\ndef run():\n    return helper(21)\n",
}
_counter = itertools.count()


def unique(prefix: str) -> str:
    return f"{prefix}{next(_counter)}"


@dataclass
class World:
    runtime: Runtime
    clients: dict[str, TestClient]
    csrf: dict[str, str]
    ids: dict[str, int] = field(default_factory=dict)
    repo_path: Path = Path()
    usernames: dict[str, str] = field(default_factory=dict)  # the principals that act through a session

    def own_session(self, principal: str) -> tuple[TestClient, str]:
        """A client with a new session of the principal (for rows that end the session), and its CSRF token."""
        base = self.clients[principal]
        client = TestClient(base.app, base_url=str(base.base_url), follow_redirects=False)
        client.headers.update(ACCEPT)
        return client, _signed_in(client, self.usernames[principal])


def _csrf_of(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match, "page has no CSRF field"
    return match.group(1)


def _signed_in(client: TestClient, username: str) -> str:
    """Sign `client` in as `username` (session cookie) and return the session's CSRF token."""
    page = client.get("/sign-in")
    response = client.post(
        "/sign-in",
        data={"username": username, "password": PASSWORD, "csrf_token": _csrf_of(page.text)},
        follow_redirects=False,
    )
    assert response.status_code == 303, response.text
    return _csrf_of(client.get("/settings/tokens").text)


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory, database_template: str, postgres_reset: PostgresReset | None
) -> Iterator[World]:
    root = tmp_path_factory.mktemp("battery")
    if postgres_reset is not None:
        postgres_reset()
        url = database_template
    else:
        (root / "data").mkdir()
        shutil.copyfile(database_template, root / "data" / "codewell.db")
        url = f"sqlite:///{root / 'data' / 'codewell.db'}"
    runtime = Runtime.open(Settings.from_env({}, data_dir=root / "data", database_url=url))
    runtime.capabilities = CAPABILITIES
    # Sign-up is off by default (issue #33); on here, so that the sign-up rows test who may use it when it is on.
    set_site_config(runtime, {"auth.providers": [{"type": "builtin", "allowSignup": True}]})
    app = create_app(runtime, background=False)
    admin = make_user(runtime, "root", site_admin=True, password=PASSWORD, email="root@example.com")
    alice = make_user(runtime, "alice", password=PASSWORD, email="alice@example.com")
    make_user(runtime, "carol", password=PASSWORD)
    roles = runtime.get(RoleService)
    roles.set_permission(INTERNAL, "User", MCP_ACCESS, granted=False)
    roles.create_role(INTERNAL, "MCP users", (MCP_ACCESS,))
    roles.set_assignment(INTERNAL, "MCP users", alice.id, assigned=True)
    repo_path = make_repo(root / "app", APP_FILES)
    register_local_repo(runtime, repo_path, "acme/app")
    register_local_repo(runtime, make_repo(root / "secret", {"s.txt": "secret\n"}), "acme/secret", private=True)
    raw, _ = runtime.get(AnalyticsTokenService).create_token(INTERNAL, "battery", user_id=admin.id)
    base = runtime.external_url  # the MCP endpoints answer only requests addressed to the instance's host
    clients = {name: TestClient(app, base_url=base, follow_redirects=False) for name in PRINCIPALS}
    clients["analytics"].headers["Authorization"] = f"Bearer {raw}"
    csrf = {"anonymous": "", "analytics": ""}
    usernames = {"user": "alice", "no_mcp": "carol", "admin": "root"}
    for principal, username in usernames.items():
        csrf[principal] = _signed_in(clients[principal], username)
    for client in clients.values():
        client.headers.update(ACCEPT)
    yield World(runtime, clients, csrf, {"alice": alice.id, "root": admin.id}, repo_path, usernames)
    for client in clients.values():
        client.close()
    runtime.close()


# -- what each row acts on (made per row when the row changes it) ---------------------------------------------
Params = Callable[[World], dict[str, str]]


def victim(world: World) -> dict[str, str]:
    name = unique("victim")
    make_user(world.runtime, name, password=PASSWORD, email=f"{name}@example.com")
    return {"username": name, "email": f"{name}@example.com"}


def alice_unverified_email(world: World) -> dict[str, str]:
    email = unique("alice") + "@example.org"
    world.runtime.get(AccountService).add_email(INTERNAL, world.ids["alice"], email)
    return {"username": "alice", "email": email}


def role(world: World) -> dict[str, str]:
    name = unique("Role ")
    world.runtime.get(RoleService).create_role(INTERNAL, name)
    return {"name": name, "permission": MCP_ACCESS, "username": "carol"}


def alice_token(world: World) -> dict[str, str]:
    _, info = world.runtime.get(TokenService).create_token(INTERNAL, world.ids["alice"], "battery", ("user:all",))
    return {"token_id": str(info.id)}


def alice_analytics_token(world: World) -> dict[str, str]:
    _, info = world.runtime.get(AnalyticsTokenService).create_token(INTERNAL, "x", user_id=world.ids["alice"])
    return {"token_id": str(info.id)}


def alice_id(world: World) -> dict[str, str]:
    return {"user_id": str(world.ids["alice"])}


def alice_conversation(world: World) -> dict[str, str]:
    """A deep search conversation of alice's, not being answered (so that follow-ups are accepted)."""
    alice = world.runtime.get(AccountService).actor_for(
        world.runtime.get(AccountService).get_user(world.ids["alice"]), via="session"
    )
    service = world.runtime.get(AgentService)
    view = service.deepsearch(alice, "where is the helper defined?")
    service.cancel(alice, view.url)
    set_site_config(world.runtime, {"deepSearch": {"sharing": {"enabled": True}, "mcpWaitSeconds": 5}})
    return {"token": view.conversation.read_token, "identifier": view.url}


def alice_shared_conversation(world: World) -> dict[str, str]:
    """A conversation of alice's with a shared link (sharing on); `token` is the share token."""
    alice = world.runtime.get(AccountService).actor_for(
        world.runtime.get(AccountService).get_user(world.ids["alice"]), via="session"
    )
    identifier = alice_conversation(world)["identifier"]
    shared = world.runtime.get(AgentService).share(alice, identifier).share_url
    assert shared is not None
    return {"token": shared.rsplit("/", 1)[1]}


def code_finder_task(world: World) -> dict[str, str]:
    """A task with credits to pay for it (the credits rows make this instance metered)."""
    today = datetime.now(UTC).date()
    world.runtime.get(CreditService).allocate(INTERNAL, 10, today, today, feature="code_finder")
    return {"task": "where is helper defined in acme/app?"}


def repo_to_remove(world: World) -> dict[str, str]:
    name = unique("acme/gone")
    world.runtime.get(RepoService).add_repo(INTERNAL, str(world.repo_path), name=name)
    return {"name": name}


def oauth_client(world: World) -> dict[str, str]:
    client, _ = world.runtime.get(OAuthService).create_static_client(INTERNAL, "x", ["http://127.0.0.1/cb"])
    return {"client_id": client.client_id}


def no_params(world: World) -> dict[str, str]:
    return {}


def fixed(**values: str) -> Params:
    return lambda world: dict(values)


@dataclass(frozen=True)
class Row:
    method: str
    path: str  # the route's path, as declared
    expect: str  # outcome per principal, in PRINCIPALS order
    params: Params = no_params
    json: Any = None
    form: dict[str, str] | None = None
    query: str = ""
    ends_session: bool = False  # run with a session of its own, so the shared one lives on


def _expect(text: str) -> dict[str, str]:
    outcomes = text.split()
    assert len(outcomes) == len(PRINCIPALS), text
    return dict(zip(PRINCIPALS, outcomes, strict=True))


#          anonymous  user  no_mcp  analytics  admin
PUBLIC = "ok ok ok 403 ok"  # no sign-in needed; the analytics token reaches the analytics API only
SIGNED_IN = "401 ok ok 403 ok"
ADMIN = "401 403 403 403 ok"
ADMIN_ANALYTICS = "401 403 403 ok ok"  # instance-wide analytics: site admins, and their analytics tokens
MCP = "401 ok 403 403 ok"
HIDDEN_NAV = "401 404 404 403 404"
# Sign-in providers that are not configured refuse every caller (ProviderGone).
PROVIDER_GONE = "403 403 403 403 403"  # MCP#ACCESS: alice through her custom role, the admin implicitly
TODAY = "2026-01-01"

ROWS: list[Row] = [
    # -- operations ---------------------------------------------------------------------------------------
    # The analytics token is refused before routing wherever its scope does not reach (AuthService.scopes_allow).
    Row("GET", "/healthz", PUBLIC),
    Row("GET", "/readyz", PUBLIC),
    Row("GET", "/metrics", "401 403 403 403 ok"),
    # -- accounts: users ----------------------------------------------------------------------------------
    Row("GET", "/.api/users", SIGNED_IN),
    Row("POST", "/.api/users", ADMIN, json={"username": "created-by-battery", "serviceAccount": True}),
    Row("GET", "/.api/users/{username}", SIGNED_IN, fixed(username="alice")),
    Row("PATCH", "/.api/users/{username}", "401 ok 403 403 ok", fixed(username="alice"), json={"displayName": "A"}),
    Row("DELETE", "/.api/users/{username}", ADMIN, victim),
    Row("POST", "/.api/users/{username}/password-reset-link", ADMIN, victim),
    Row("POST", "/.api/users/{username}/emails", ADMIN, victim, json={"email": "x@example.net"}),
    Row("PATCH", "/.api/users/{username}/emails/{email}", ADMIN, alice_unverified_email, json={"verified": True}),
    # No SMTP here: the permitted callers (alice herself, the admin) get 400 (mail not configured) after the
    # permission check; carol is refused.
    Row("POST", "/.api/users/{username}/emails/{email}/verification", "401 400 403 403 400", alice_unverified_email),
    Row("DELETE", "/.api/users/{username}/emails/{email}", "401 ok 403 403 ok", alice_unverified_email),
    Row("GET", "/.api/users/{username}/repos", "401 ok 403 403 ok", fixed(username="alice")),
    Row("PUT", "/.api/users/{username}/repos", ADMIN, fixed(username="carol"), json={"repos": []}),
    # -- accounts: tokens, roles, audit -------------------------------------------------------------------
    Row("GET", "/.api/tokens", SIGNED_IN),
    Row("POST", "/.api/tokens", SIGNED_IN, json={"note": "battery", "expiresInDays": 30}),
    Row("DELETE", "/.api/tokens/{token_id}", "401 ok 404 403 ok", alice_token),
    Row("GET", "/.api/roles", SIGNED_IN),
    Row("POST", "/.api/roles", ADMIN, json={"name": "Battery role", "permissions": []}),
    Row("GET", "/.api/roles/{name}", SIGNED_IN, fixed(name="User")),
    Row("PATCH", "/.api/roles/{name}", ADMIN, role, json={"name": "Renamed"}),
    Row("DELETE", "/.api/roles/{name}", ADMIN, role),
    Row("PUT", "/.api/roles/{name}/permissions/{permission}", ADMIN, role),
    Row("DELETE", "/.api/roles/{name}/permissions/{permission}", ADMIN, role),
    Row("PUT", "/.api/roles/{name}/users/{username}", ADMIN, role),
    Row("DELETE", "/.api/roles/{name}/users/{username}", ADMIN, role),
    Row("GET", "/.api/audit", ADMIN),
    # -- accounts: pages ----------------------------------------------------------------------------------
    Row("GET", "/settings/tokens", SIGNED_IN),
    Row("POST", "/settings/tokens", SIGNED_IN, form={"note": "p", "scopes": "user:all", "expiresInDays": "30"}),
    Row("POST", "/settings/tokens/{token_id}/revoke", "401 ok 404 403 ok", alice_token),
    Row("GET", "/settings/emails", SIGNED_IN),
    Row("POST", "/settings/emails", SIGNED_IN, form={"email": "{unique}@example.net"}),
    # Self-service on the caller's own account: past the sign-in check, an unknown address is refused alike.
    Row("POST", "/settings/emails/resend", "401 400 400 403 400", form={"email": "nobody@example.net"}),
    Row("POST", "/settings/emails/remove", "401 404 404 403 404", form={"email": "nobody@example.net"}),
    Row("GET", "/.auth/verify-email", "ok 400 400 403 400", query="code=nope"),
    Row("GET", "/site-admin/users", ADMIN),
    Row("POST", "/site-admin/users", ADMIN, form={"username": "page-created", "serviceAccount": "true"}),
    Row("POST", "/site-admin/users/{username}/admin", ADMIN, victim, form={"siteAdmin": "false"}),
    Row("POST", "/site-admin/users/{username}/reset-link", ADMIN, victim),
    Row("POST", "/site-admin/users/{username}/delete", ADMIN, victim),
    Row("GET", "/site-admin/roles", ADMIN),
    Row("POST", "/site-admin/roles", ADMIN, form={"name": "Page role"}),
    Row(
        "POST", "/site-admin/roles/{name}/permissions", ADMIN, role, form={"permission": MCP_ACCESS, "granted": "true"}
    ),
    Row("POST", "/site-admin/roles/{name}/users", ADMIN, role, form={"username": "carol", "assigned": "true"}),
    Row("POST", "/site-admin/roles/{name}/delete", ADMIN, role),
    Row("GET", "/site-admin/audit", ADMIN),
    # -- licensing ------------------------------------------------------------------------------------------
    Row("GET", "/.api/license", ADMIN),
    # -- code host connections (none configured here: an admin's sync of an unknown one is a 404) -----------
    Row("GET", "/.api/codehosts", ADMIN),
    Row("POST", "/.api/codehosts/{connection_id}/sync", "401 403 403 403 404", fixed(connection_id="nope")),
    Row("POST", "/.api/codehosts/{connection_id}/test", "401 403 403 403 404", fixed(connection_id="nope")),
    Row("POST", "/.api/codehosts/repos/{name}/sync", "401 403 403 403 404", fixed(name="acme/app")),
    Row("GET", "/.api/codehosts/users/{user_id}", "401 ok 403 403 ok", alice_id),
    Row("POST", "/.api/codehosts/users/{user_id}/sync", "401 ok 403 403 ok", alice_id),
    Row("GET", "/site-admin/code-hosts", ADMIN),
    Row("GET", "/site-admin/jobs", ADMIN),
    Row("POST", "/site-admin/jobs/{job_id}/{action}", "401 403 403 403 404", fixed(job_id="999999", action="cancel")),
    Row("POST", "/site-admin/code-hosts/{connection_id}/sync", "401 403 403 403 404", fixed(connection_id="nope")),
    Row("POST", "/site-admin/code-hosts/{connection_id}/test", "401 403 403 403 404", fixed(connection_id="nope")),
    Row("POST", "/site-admin/code-hosts/{connection_id}/remove", "401 403 403 403 404", fixed(connection_id="nope")),
    # An empty form: the admin is told what is missing (400), nothing is added.
    Row("POST", "/site-admin/code-hosts", "401 403 403 403 400", form={}),
    Row("GET", "/settings/code-hosts", SIGNED_IN),
    Row("POST", "/settings/code-hosts/sync", SIGNED_IN),
    Row("GET", "/site-admin/license", ADMIN),
    # -- repositories -------------------------------------------------------------------------------------
    Row("GET", "/.api/repos", SIGNED_IN),
    Row("POST", "/.api/repos", ADMIN, json={"url": "https://example.com/battery.git", "name": "example.com/battery"}),
    Row("GET", "/.api/repos/{name}/-/files", SIGNED_IN, fixed(name="acme/app")),
    Row("GET", "/.api/repos/{name}/-/file", SIGNED_IN, fixed(name="acme/app"), query="path=app/util.py"),
    Row("GET", "/.api/repos/{name}/-/refs", SIGNED_IN, fixed(name="acme/app")),
    Row("POST", "/.api/repos/{name}/-/sync", ADMIN, fixed(name="acme/app"), query="wait=false"),
    Row("GET", "/.api/repos/{name}", SIGNED_IN, fixed(name="acme/app")),
    # A private repository reads as missing to whoever may not read it.
    Row("GET", "/.api/repos/{name}", "401 404 404 403 ok", fixed(name="acme/secret")),
    Row("DELETE", "/.api/repos/{name}", ADMIN, repo_to_remove),
    # -- sign-in, sign-up, providers ----------------------------------------------------------------------
    Row("GET", "/sign-in", PUBLIC),
    # Sign-in forms check the CSRF token of the pre-session cookie, which a caller without a page has not got.
    Row("POST", "/sign-in", "403 401 401 403 401", form={"username": "nobody", "password": "wrong"}, ends_session=True),
    Row("GET", "/sign-up", PUBLIC),
    Row("POST", "/sign-up", "403 ok ok 403 ok", form={"username": "{unique}", "password": PASSWORD}, ends_session=True),
    Row("POST", "/sign-out", "403 ok ok 403 ok", form={}, ends_session=True),
    Row("GET", "/password-reset", "400 400 400 403 400", query="code=nope"),
    Row("POST", "/password-reset", "400 400 400 403 400", query="code=nope", form={"password": PASSWORD}),
    *[
        Row("GET", f"/.auth/{provider}/{step}", PROVIDER_GONE)
        for provider in ("github", "gitlab", "bitbucketcloud", "bitbucketserver")
        for step in ("login", "callback")
    ],
    Row("GET", "/.auth/openidconnect/login", PROVIDER_GONE),
    Row("GET", "/.auth/saml/login", PROVIDER_GONE),
    Row("GET", "/.auth/callback", PROVIDER_GONE),
    Row("GET", "/.auth/saml/metadata", "404 404 404 403 404"),
    Row("POST", "/.auth/saml/acs", PROVIDER_GONE, form={}),
    Row("GET", "/.auth/gerrit/credentials", SIGNED_IN),
    Row("POST", "/.auth/gerrit/credentials", "401 404 404 403 404", form={}),
    # Connecting an account from /settings/accounts: signed-in users only; an unknown `pc` is refused.
    *[
        Row("POST", f"/.auth/{provider}/connect", "401 403 403 403 403", form={"pc": "nope"})
        for provider in ("github", "gitlab", "bitbucketcloud", "bitbucketserver", "openidconnect")
    ],
    # -- analytics ----------------------------------------------------------------------------------------
    Row("GET", "/analytics/api/reports/by-user-client-date", ADMIN_ANALYTICS, query="instanceURL={host}"),
    Row("GET", "/analytics/api/reports/user-registry", ADMIN_ANALYTICS, query="instanceURL={host}"),
    Row("GET", "/analytics/api/credits", ADMIN_ANALYTICS, query="instanceURL={host}"),
    Row("POST", "/analytics/api/credits", ADMIN, json={"amount": 10, "startDate": TODAY, "endDate": TODAY}),
    Row("POST", "/analytics/api/service-access-tokens", "401 ok ok 403 ok", json={"displayName": "b"}),
    Row("GET", "/analytics/api/service-access-tokens", "401 ok ok 403 ok"),
    Row("DELETE", "/analytics/api/service-access-tokens/{token_id}", "401 ok 404 403 ok", alice_analytics_token),
    Row("GET", "/analytics/tokens", SIGNED_IN),
    Row("POST", "/analytics/tokens", SIGNED_IN, form={"displayName": "page", "expiresInDays": "never"}),
    Row("POST", "/analytics/tokens/{token_id}/revoke", "401 ok 404 403 ok", alice_analytics_token),
    Row("GET", "/analytics/credits", ADMIN),
    Row("POST", "/analytics/credits", ADMIN, form={"amount": "10", "startDate": TODAY, "endDate": TODAY}),
    # -- OAuth server ---------------------------------------------------------------------------------------
    Row("GET", "/.well-known/oauth-authorization-server", PUBLIC),
    Row("GET", "/.auth/idp/oauth/authorize", "400 400 400 403 400"),
    Row("POST", "/.auth/idp/oauth/authorize", "400 400 400 403 400", form={}),
    Row("POST", "/.auth/idp/oauth/token", "401 401 401 403 401", form={}),  # no client authentication
    Row("POST", "/.auth/idp/oauth/register", "400 400 400 403 400", json={}),
    Row("POST", "/.auth/idp/oauth/revoke", "ok ok ok 403 ok", form={"token": "nope"}),
    Row("POST", "/.auth/idp/oauth/introspect", "401 401 401 403 ok", form={"token": "nope"}),
    Row("GET", "/.auth/idp/oauth/userinfo", "401 401 401 403 401"),
    Row("GET", "/.api/oauth/clients", ADMIN),
    Row("POST", "/.api/oauth/clients", ADMIN, json={"name": "b", "redirect_uris": ["http://127.0.0.1/cb"]}),
    Row("DELETE", "/.api/oauth/clients/{client_id}", ADMIN, oauth_client),
    Row("GET", "/site-admin/oauth-clients", ADMIN),
    Row("POST", "/site-admin/oauth-clients", ADMIN, form={"name": "b", "redirect_uris": "http://127.0.0.1/cb"}),
    # -- deep search (#18): another user's conversation reads as missing; only its owner asks follow-ups -----
    Row("POST", "/.api/deepsearch", SIGNED_IN, json={"question": "where is the helper defined?"}),
    Row("GET", "/.api/deepsearch", SIGNED_IN),
    Row("GET", "/.api/deepsearch/{token}", "401 ok 404 403 ok", alice_conversation),
    Row("DELETE", "/.api/deepsearch/{token}", "401 ok 404 403 ok", alice_conversation),
    Row(
        "POST",
        "/.api/deepsearch/{token}/questions",
        "401 ok 404 403 403",
        alice_conversation,
        json={"question": "and?"},
    ),
    Row("POST", "/.api/deepsearch/{token}/cancel", "401 ok 404 403 ok", alice_conversation),
    Row("POST", "/.api/deepsearch/{token}/share", "401 ok 404 403 ok", alice_conversation),
    Row("POST", "/.api/deepsearch/{token}/reset-share", "401 ok 404 403 ok", alice_conversation),
    # -- deep search pages (#19): the same decisions as the REST routes, through the session's forms ------
    Row("GET", "/deepsearch", SIGNED_IN),
    Row("POST", "/deepsearch", SIGNED_IN, form={"question": "where is the helper defined?"}),
    Row("GET", "/deepsearch/shared/{token}", SIGNED_IN, alice_shared_conversation),
    Row("GET", "/deepsearch/{token}", "401 ok 404 403 ok", alice_conversation),
    Row("POST", "/deepsearch/{token}/questions", "401 ok 404 403 403", alice_conversation, form={"question": "and?"}),
    Row("POST", "/deepsearch/{token}/cancel", "401 ok 404 403 ok", alice_conversation),
    Row("POST", "/deepsearch/{token}/share", "401 ok 404 403 ok", alice_conversation),
    Row("POST", "/deepsearch/{token}/reset-share", "401 ok 404 403 ok", alice_conversation),
    Row("GET", "/deepsearch/{token}/delete", "401 ok 404 403 ok", alice_conversation),
    Row("POST", "/deepsearch/{token}/delete", "401 ok 404 403 ok", alice_conversation),
    # -- search, history, evaluator -----------------------------------------------------------------------
    Row("GET", "/.api/search", SIGNED_IN, query="q=helper"),
    Row("GET", "/.api/search/status", SIGNED_IN),
    Row("GET", "/.api/nls/search", SIGNED_IN, query="q=helper"),
    Row("GET", "/.api/history/commits", SIGNED_IN, query="repos=acme/app"),
    Row("GET", "/.api/history/diffs", SIGNED_IN, query="repos=acme/app&pattern=helper"),
    Row("GET", "/.api/history/compare", SIGNED_IN, query="repo=acme/app&base=main&head=main"),
    Row("GET", "/.api/history/contributors", SIGNED_IN, query="authors=nobody"),
    # SCIP uploads (codenav): site admins only, refused before the repository is looked at; the admin's body
    # here (`{}`) is not a SCIP index, for a private repository as for a public one.
    # Navigation: readers of the repository; a hidden one is 404 like a missing one (for the admin too: the
    # battery builds no symbols of acme/secret, and an unindexed revision is 404).
    Row("GET", "/.api/codenav/definition", SIGNED_IN, query="repo=acme/app&path=app/main.py&symbol=helper"),
    Row("GET", "/.api/codenav/definition", HIDDEN_NAV, query="repo=acme/secret&path=s.txt&symbol=secret"),
    Row("GET", "/.api/codenav/references", SIGNED_IN, query="repo=acme/app&path=app/util.py&symbol=helper"),
    Row("GET", "/.api/codenav/references", HIDDEN_NAV, query="repo=acme/secret&path=s.txt&symbol=secret"),
    Row("POST", "/.api/codeintel/upload", "401 403 403 403 400", query="repo=acme/app&commit=main"),
    Row("POST", "/.api/codeintel/upload", "401 403 403 403 400", query="repo=acme/secret&commit=main"),
    Row("POST", "/.api/codeintel/upload", "401 403 403 403 404", query="repo=acme/missing&commit=main"),
    Row("POST", "/.api/evaluate", SIGNED_IN, json={"script": "return 1"}),
    # -- web pages: a private repository answers 404 exactly like a missing one ---------------------------
    Row("GET", "/", SIGNED_IN),
    Row("GET", "/search", SIGNED_IN, query="q=helper"),
    Row("GET", "/{repo:repo}", SIGNED_IN, fixed(repo="acme/app")),
    Row("GET", "/{repo:repo}", "401 404 404 403 ok", fixed(repo="acme/secret")),
    Row("GET", "/{repo:repo}/-/tree{path:subpath}", SIGNED_IN, fixed(repo="acme/app@main", path="/app")),
    Row("GET", "/{repo:repo}/-/tree{path:subpath}", "401 404 404 403 ok", fixed(repo="acme/secret", path="")),
    Row("GET", "/{repo:repo}/-/blob/{path:path}", SIGNED_IN, fixed(repo="acme/app", path="app/util.py")),
    Row("GET", "/{repo:repo}/-/blob/{path:path}", "401 404 404 403 ok", fixed(repo="acme/secret", path="s.txt")),
    Row("GET", "/{repo:repo}/-/raw/{path:path}", SIGNED_IN, fixed(repo="acme/app", path="app/util.py")),
    Row("GET", "/{repo:repo}/-/raw/{path:path}", "401 404 404 403 ok", fixed(repo="acme/secret", path="s.txt")),
    Row("GET", "/{repo:repo}/-/files", SIGNED_IN, fixed(repo="acme/app")),
    Row("GET", "/{repo:repo}/-/files", "401 404 404 403 ok", fixed(repo="acme/secret")),
    # code navigation pages (#19): acme/secret's s.txt defines nothing, so even its admin gets "no definition" 404
    # there (tests/functional/web/test_code_navigation.py covers the owner's 200/303 on a private repository).
    Row("GET", "/{repo:repo}/-/definition", SIGNED_IN, fixed(repo="acme/app"), query="path=app/main.py&symbol=helper"),
    Row(
        "GET",
        "/{repo:repo}/-/definition",
        "401 404 404 403 404",
        fixed(repo="acme/secret"),
        query="path=s.txt&symbol=s",
    ),
    Row("GET", "/{repo:repo}/-/references", SIGNED_IN, fixed(repo="acme/app"), query="path=app/util.py&symbol=helper"),
    Row(
        "GET",
        "/{repo:repo}/-/references",
        "401 404 404 403 404",
        fixed(repo="acme/secret"),
        query="path=s.txt&symbol=s",
    ),
    Row("GET", "/search", SIGNED_IN, query="q=where+is+helper+defined&mode=nls"),
    Row("GET", "/.static/{name}", PUBLIC, fixed(name="codewell.css")),
    Row("GET", "/search/suggest", SIGNED_IN, query="q=repo:acme"),
    Row("GET", "/repositories", SIGNED_IN),
    Row("GET", "/{repo:repo}/-/commits{path:subpath}", SIGNED_IN, fixed(repo="acme/app@main", path="/app/util.py")),
    Row("GET", "/{repo:repo}/-/commits{path:subpath}", "401 404 404 403 ok", fixed(repo="acme/secret", path="")),
    Row("GET", "/{repo:repo}/-/commit/{sha}", SIGNED_IN, fixed(repo="acme/app", sha="main")),
    Row("GET", "/{repo:repo}/-/commit/{sha}", "401 404 404 403 ok", fixed(repo="acme/secret", sha="main")),
    Row("GET", "/{repo:repo}/-/compare/{spec:path}", SIGNED_IN, fixed(repo="acme/app", spec="main...main")),
    Row(
        "GET", "/{repo:repo}/-/compare/{spec:path}", "401 404 404 403 ok", fixed(repo="acme/secret", spec="main...main")
    ),
    Row("GET", "/{repo:repo}/-/blame/{path:path}", SIGNED_IN, fixed(repo="acme/app", path="app/util.py")),
    Row("GET", "/{repo:repo}/-/blame/{path:path}", "401 404 404 403 ok", fixed(repo="acme/secret", path="s.txt")),
    Row("GET", "/settings", SIGNED_IN),
    Row("GET", "/settings/mcp", SIGNED_IN),
    Row("GET", "/settings/accounts", SIGNED_IN),
    # Own linked accounts only: an identity that is not the caller's (here: none exists) is not found.
    Row("POST", "/settings/accounts/{identity_id}/disconnect", "401 404 404 403 404", fixed(identity_id="999999")),
    Row("GET", "/site-admin", ADMIN),
    Row("GET", "/site-admin/repositories", ADMIN),
    # Push webhooks are anonymous by design: each proves itself with a connection's secret (none here), whoever
    # sends it; the analytics token is refused before routing as everywhere outside the analytics API.
    *[
        Row("POST", f"/.api/webhooks/{host}", "401 401 401 403 401")
        for host in ("github", "gitlab", "bitbucket-server", "bitbucket-cloud", "gerrit")
    ],
    Row("POST", "/site-admin/repositories", ADMIN, form={"action": "sync", "name": "acme/app"}),
    Row("GET", "/site-admin/configuration", ADMIN),
    # Invalid on purpose (nothing is saved): the battery's site config stays as it is for the other rows.
    Row("POST", "/site-admin/configuration", "401 403 403 403 400", form={"config": '{"no.such.option": 1}'}),
    Row("GET", "/site-admin/mcp", ADMIN),
    Row("POST", "/site-admin/mcp", "401 403 403 403 400", form={"mcp": "on", "enabled": "no-such-tool"}),
    # -- MCP (the gate; each tool has its own rows below) -------------------------------------------------
    Row("POST", "/.api/mcp", MCP, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    Row("POST", "/.api/mcp/{rest}", MCP, fixed(rest="all"), json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    *[Row("GET", f"/.well-known/oauth-protected-resource{p}", PUBLIC) for p in ("", "/.api/mcp", "/.api/mcp/all")],
    Row("GET", "/.well-known/oauth-protected-resource/.api/mcp/deepsearch", PUBLIC),
]

# Every MCP tool through /.api/mcp/all, with a valid argument set: "ok" is a result that is not an error.
TOOLS: dict[str, tuple[dict[str, Any] | Callable[[World], dict[str, Any]], str]] = {
    "list_repos": ({"query": "acme"}, MCP),
    "list_files": ({"repo": "acme/app"}, MCP),
    "read_file": ({"repo": "acme/app", "path": "app/util.py"}, MCP),
    "list_refs": ({"repo": "acme/app"}, MCP),
    "keyword_search": ({"query": "helper"}, MCP),
    "nls_search": ({"query": "where is the helper"}, MCP),
    "commit_search": ({"repos": ["acme/app"]}, MCP),
    "diff_search": ({"repos": ["acme/app"], "pattern": "helper"}, MCP),
    "compare_revisions": ({"repo": "acme/app", "base": "main", "head": "main"}, MCP),
    "get_contributor_repos": ({"authors": ["nobody"]}, MCP),
    "go_to_definition": ({"repo": "acme/app", "path": "app/main.py", "symbol": "helper"}, MCP),
    "find_references": ({"repo": "acme/app", "path": "app/util.py", "symbol": "helper"}, MCP),
    "evaluator": ({"script": "return 1"}, MCP),
    "code_finder": (code_finder_task, MCP),
    "deepsearch": ({"question": "where is the helper defined?"}, MCP),
    "deepsearch_read": (lambda world: {"identifier": alice_conversation(world)["identifier"]}, MCP),
}


def _outcome(status: int, location: str = "") -> str:
    if status == 401 or (status == 302 and location.startswith("/sign-in?returnTo=")):
        return "401"
    if status < 400:
        return "ok"
    return str(status)


def _row_id(row: Row) -> str:
    return f"{row.method} {row.path}" + (f"?{row.query}" if row.query else "")


def _send(world: World, principal: str, row: Row) -> str:
    client, csrf = world.clients[principal], world.csrf[principal]
    if row.ends_session and principal in world.usernames:
        client, csrf = world.own_session(principal)
    values = row.params(world)
    path = row.path
    for key, value in values.items():
        path = re.sub(r"\{" + key + r"(:[a-z]+)?\}", quote(value, safe="/@"), path)
    host = world.runtime.external_url.split("://", 1)[1]
    url = path + ("?" + row.query.replace("{host}", host) if row.query else "")
    headers = {"X-CSRF-Token": csrf} if csrf else {}
    fresh = unique("b")  # for rows that create something named: each principal's request names a new one
    body = json.loads(json.dumps(row.json).replace("{unique}", fresh)) if row.json is not None else None
    form = {k: v.replace("{unique}", fresh) for k, v in row.form.items()} if row.form is not None else None
    if row.method != "GET" and body is None and form is None and path.startswith(("/.api/", "/analytics/api/")):
        body = {}  # APIs read JSON bodies
    elif row.method != "GET" and body is None:
        form = {**(form or {}), "csrf_token": csrf}
    response = client.request(row.method, url, json=body, data=form, headers=headers)
    return _outcome(response.status_code, response.headers.get("location", ""))


@pytest.mark.parametrize("row", ROWS, ids=_row_id)
def test_route_outcomes_match_the_table(world: World, row: Row) -> None:
    observed = {principal: _send(world, principal, row) for principal in PRINCIPALS}
    assert observed == _expect(row.expect), f"observed: {' '.join(observed.values())}"


def _call_tool(world: World, principal: str, name: str, arguments: dict[str, Any]) -> str:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    csrf = world.csrf[principal]
    response = world.clients[principal].post("/.api/mcp/all", json=body, headers={"X-CSRF-Token": csrf} if csrf else {})
    if response.status_code != 200:
        return _outcome(response.status_code)
    for line in response.text.splitlines():
        if line.startswith("data:"):
            result = json.loads(line[5:])["result"]
            return "error: " + str(result["content"][0]["text"])[:200] if result.get("isError") else "ok"
    return "no result"


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_tool_outcomes_match_the_table(world: World, name: str) -> None:
    arguments, expect = TOOLS[name]
    if callable(arguments):
        arguments = arguments(world)
    observed = {principal: _call_tool(world, principal, name, arguments) for principal in PRINCIPALS}
    assert observed == _expect(expect), f"observed: {' | '.join(observed.values())}"


def test_every_route_and_tool_has_a_row(world: World) -> None:
    app = world.clients["admin"].app
    declared = set()
    for route in app.routes:  # type: ignore[attr-defined]
        assert isinstance(route, Route), f"{route!r}: the battery only knows plain routes"
        methods = route.methods or {"POST"}  # the MCP gate takes every method; POST is how tools are called
        declared |= {(method, re.sub(r":[a-z]+\}", "}", route.path)) for method in methods - {"HEAD", "OPTIONS"}}
    covered = {(row.method, re.sub(r":[a-z]+\}", "}", row.path)) for row in ROWS}
    assert declared - covered == set(), "routes without a row in the permission battery"
    assert covered - declared == set(), "rows for routes the app does not have"
    tools = {tool.name for capability in CAPABILITIES for tool in capability.tools}
    assert tools == set(TOOLS), "MCP tools without a row in the permission battery (or rows for gone tools)"
