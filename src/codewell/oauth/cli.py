"""`codewell oauth clients ...`: manage pre-registered (static) OAuth clients (thin over ClientService).

The CLI acts as the service itself (INTERNAL): whoever can run it can read the data dir anyway.
"""

from __future__ import annotations

import json

import click

from codewell.clikit import handle_errors, open_runtime
from codewell.core.actors import INTERNAL


@click.group("oauth")
def oauth() -> None:
    """The OAuth authorization server for MCP clients."""


@oauth.group("clients")
def clients() -> None:
    """OAuth clients: add, list, remove pre-registered clients."""


@clients.command("add")
@click.argument("name")
@click.option("--redirect-uri", "redirect_uris", multiple=True, required=True, help="Allowed redirect URI (repeat).")
@click.option("--confidential", is_flag=True, help="Issue a client secret (default: public client using PKCE).")
@click.pass_context
@handle_errors
def add(ctx: click.Context, name: str, redirect_uris: tuple[str, ...], confidential: bool) -> None:
    """Pre-register a client, e.g. `codewell oauth clients add "Claude Code" --redirect-uri http://localhost:3334/oauth/callback`."""
    from codewell.oauth.clients import ClientService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    runtime = open_runtime(ctx)
    client, secret = runtime.get(ClientService).create_static_client(
        INTERNAL, name, list(redirect_uris), confidential=confidential
    )
    click.echo(f"client_id: {client.client_id}")
    if secret:
        click.echo(f"client_secret: {secret}  (shown once; store it now)")


@clients.command("list")
@click.option("--kind", type=click.Choice(["static", "dynamic", "metadata"]), help="Only clients of this kind.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
@handle_errors
def list_(ctx: click.Context, kind: str | None, as_json: bool) -> None:
    """List registered clients."""
    from codewell.oauth.clients import ClientService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    runtime = open_runtime(ctx)
    found = runtime.get(ClientService).list_clients(INTERNAL, kind)
    if as_json:
        click.echo(json.dumps([c.as_json() for c in found], indent=2))
        return
    for client in found:
        click.echo(f"{client.client_id}\t{client.kind}\t{client.client_name}\t{' '.join(client.redirect_uris)}")


@clients.command("remove")
@click.argument("client_id")
@click.pass_context
@handle_errors
def remove(ctx: click.Context, client_id: str) -> None:
    """Delete a client and every code and token issued to it."""
    from codewell.oauth.clients import ClientService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    runtime = open_runtime(ctx)
    runtime.get(ClientService).delete_client(INTERNAL, client_id)
    click.echo(f"removed {client_id}")
