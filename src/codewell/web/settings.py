"""Your account: the hub linking tokens, e-mails and linked accounts, the linked external accounts
(`/settings/accounts`: connect and disconnect sign-in providers) and the MCP client setup snippets with this
instance's external URL filled in (`/settings/mcp`)."""

from __future__ import annotations

import json

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from codewell.auth.service import AuthService, ClientInfo
from codewell.authz import Action, UserRef, ensure
from codewell.core.actors import Actor
from codewell.core.errors import CodewellError
from codewell.http.csrf import verify_form
from codewell.http.guards import require_actor
from codewell.http.requests import runtime_of
from codewell.http.templates import render
from codewell.runtime import Runtime

MCP_PATH = "/.api/mcp"
ACCOUNTS_PATH = "/settings/accounts"
# `?done=` after a redirect to the linked accounts page: fixed texts only (nothing from the URL is shown).
DONE_NOTICES = {"connected": "Account connected.", "disconnected": "Account disconnected."}


def mcp_snippets(external_url: str) -> list[dict[str, str]]:
    """Setup of each MCP client for this instance: OAuth first (no secret in files), then an access token."""
    url = external_url + MCP_PATH
    cursor = {"mcpServers": {"codewell": {"url": url, "headers": {"Authorization": "token ${env:CODEWELL_TOKEN}"}}}}
    vscode = {
        "servers": {
            "codewell": {"type": "http", "url": url, "headers": {"Authorization": "token ${input:codewell-token}"}}
        },
        "inputs": [
            {"type": "promptString", "id": "codewell-token", "description": "codewell access token", "password": True}
        ],
    }
    return [
        {
            "client": "Claude Code",
            "where": "in a shell",
            "lang": "bash",
            "text": "# OAuth (opens the browser to sign in and approve)\n"
            f"claude mcp add --transport http codewell {url}\n"
            f"# or an access token\nclaude mcp add --transport http codewell {url} \\\n"
            '  --header "Authorization: token $CODEWELL_TOKEN"',
        },
        {
            "client": "Cursor",
            "where": "~/.cursor/mcp.json (omit headers to use OAuth)",
            "lang": "json",
            "text": json.dumps(cursor, indent=2),
        },
        {
            "client": "VS Code",
            "where": ".vscode/mcp.json (omit headers and inputs to use OAuth)",
            "lang": "json",
            "text": json.dumps(vscode, indent=2),
        },
        {
            "client": "Codex",
            "where": "~/.codex/config.toml",
            "lang": "toml",
            "text": f'# OAuth: run `codex mcp login codewell` once\n[mcp_servers.codewell]\nurl = "{url}"\n'
            f'scopes = ["mcp"]\n\n# or an access token from the environment\n[mcp_servers.codewell-token]\n'
            f'url = "{url}"\nbearer_token_env_var = "CODEWELL_TOKEN"',
        },
    ]


async def account_page(request: Request) -> Response:
    require_actor(request)
    return render(request, "web/settings.html")


async def mcp_page(request: Request) -> Response:
    require_actor(request)
    external = runtime_of(request).external_url
    return render(
        request,
        "web/settings_mcp.html",
        endpoint=external + MCP_PATH,
        external_url=external,
        snippets=mcp_snippets(external),
    )


def _own(request: Request) -> Actor:
    actor = require_actor(request)
    if actor.user_id is not None:
        ensure(actor, Action.USER_READ, UserRef(actor.user_id))
    return actor


def _accounts_page(request: Request, actor: Actor, *, error: str = "", status_code: int = 200) -> Response:
    auth = runtime_of(request).get(AuthService)
    return render(
        request,
        "web/settings_accounts.html",
        status_code=status_code,
        identities=auth.list_identities(actor),
        options=auth.connect_options(actor),
        error=error,
        notice=DONE_NOTICES.get(request.query_params.get("done", ""), ""),
    )


async def accounts_page(request: Request) -> Response:
    """Linked external accounts: each with Disconnect, and Connect for configured providers not linked yet."""
    actor = _own(request)
    return await run_in_threadpool(_accounts_page, request, actor)


async def disconnect(request: Request) -> Response:
    """`POST /settings/accounts/<id>/disconnect`: unlink one of your own external accounts."""
    actor = _own(request)
    verify_form(request, await request.form())
    client = ClientInfo(
        ip=request.client.host if request.client else "", user_agent=request.headers.get("user-agent", "")
    )
    auth = runtime_of(request).get(AuthService)
    try:
        await run_in_threadpool(auth.unlink_identity, actor, request.path_params["identity_id"], client)
    except CodewellError as exc:
        message = exc.message + (f" ({exc.hint})" if exc.hint else "")
        return await run_in_threadpool(_accounts_page, request, actor, error=message, status_code=exc.http_status)
    return RedirectResponse(f"{ACCOUNTS_PATH}?done=disconnected", status_code=303)


def routes(runtime: Runtime) -> list[BaseRoute]:
    return [
        Route("/settings", account_page, methods=["GET"]),
        Route(ACCOUNTS_PATH, accounts_page, methods=["GET"]),
        Route(ACCOUNTS_PATH + "/{identity_id:int}/disconnect", disconnect, methods=["POST"]),
        Route("/settings/mcp", mcp_page, methods=["GET"]),
    ]
