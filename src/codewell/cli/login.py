"""`codewell login URL` and `codewell logout URL`: the access token `codewell --server URL` sends.

The token is read from standard input (a prompt that does not echo on a terminal, or a pipe: `echo $T | codewell
login URL`), never from an argument that `ps` and the shell history would show. It is checked against the server
before it is stored (clikit/remote.py: `credentials.json`, mode 0600).
"""

from __future__ import annotations

import sys

import click

from codewell.clikit import fail, handle_errors
from codewell.clikit.remote import Remote, forget_token, normalize_url, store_token


@click.command("login")
@click.argument("url")
@click.pass_context
@handle_errors
def login(ctx: click.Context, url: str) -> None:
    """Store an access token for the server at URL (for --server URL)."""
    server = normalize_url(url)
    if sys.stdin.isatty():
        click.echo(f"Create an access token at {server}/settings/tokens, then paste it here.", err=True)
        token = click.prompt("Token", hide_input=True, err=True).strip()
    else:
        token = sys.stdin.readline().strip()
    if not token:
        fail("no token given", hint=f'echo "$TOKEN" | codewell login {server}')
    # Any authenticated API call tells a good token from a refused one (401) and the URL from a wrong one.
    Remote.connect(server, token).get("/.api/repos", {"limit": 1})
    path = store_token(server, token)
    click.echo(f"Logged in to {server}; the token is stored in {path}.", err=True)


@click.command("logout")
@click.argument("url")
@handle_errors
def logout(url: str) -> None:
    """Forget the access token stored for the server at URL."""
    server = normalize_url(url)
    if forget_token(server):
        click.echo(f"Logged out of {server}.", err=True)
    else:
        click.echo(f"No token was stored for {server}.", err=True)
