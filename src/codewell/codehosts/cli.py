"""`codewell codehosts status|test|sync|sync-user|sync-repo` (thin over CodeHostService and ConnectionService; acts
as INTERNAL)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from codewell.clikit import fail, handle_errors, open_runtime
from codewell.core.actors import INTERNAL

if TYPE_CHECKING:
    from codewell.codehosts.service import ConnectionStatus


@click.group("codehosts")
def codehosts() -> None:
    """Code host connections: status, discovery and permission sync."""


def _when(value: object) -> str:
    return f"{value:%Y-%m-%d %H:%M:%S} UTC" if value is not None else "never"


def _print(status: ConnectionStatus) -> None:
    click.echo(f"{status.id} ({status.kind} {status.url})")
    click.echo(f"  last sync: {_when(status.last_sync_at)}, last success: {_when(status.last_success_at)}")
    click.echo(f"  repositories found: {status.repos_found}")
    click.echo(f"  permissions: {'synced' if status.permissions_enabled else 'not synced (authorization off)'}")
    if status.permissions_enabled:
        click.echo(f"  permissions synced: {_when(status.perms_synced_at)}")
    if status.error:
        click.echo(f"  error: {status.error}")
    if status.perms_error:
        click.echo(f"  permission error: {status.perms_error}")
    for warning in status.warnings:
        click.echo(f"  warning: {warning}")


@codehosts.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the shape of GET /.api/codehosts).")
@click.pass_context
@handle_errors
def status(ctx: click.Context, as_json: bool) -> None:
    """Show each connection: last sync, repositories found, errors."""
    from codewell.codehosts.service import CodeHostService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    statuses = open_runtime(ctx).get(CodeHostService).status(INTERNAL)
    if as_json:
        click.echo(json.dumps([s.as_json() for s in statuses], indent=2))
        return
    if not statuses:
        click.echo("no code host connections (site config codeHostConnections)")
    for item in statuses:
        _print(item)


@codehosts.command("sync")
@click.argument("connection_id", required=False)
@click.option("--no-permissions", is_flag=True, help="Discover repositories only.")
@click.pass_context
@handle_errors
def sync(ctx: click.Context, connection_id: str | None, no_permissions: bool) -> None:
    """Discover repositories (and sync permissions) now, of one connection or all."""
    from codewell.codehosts.service import CodeHostService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    service = open_runtime(ctx).get(CodeHostService)
    ids = [connection_id] if connection_id else [c.id for c in service.connections()]
    failed = 0
    for cid in ids:
        report = service.sync_connection(INTERNAL, cid, permissions=not no_permissions)
        click.echo(
            f"{cid}: {report.found} found, {len(report.added)} added, {len(report.updated)} updated, "
            f"{len(report.removed)} removed, {len(report.pending_removal)} missing upstream (grace period), "
            f"{report.repos_permissions_synced} repository and {report.users_permissions_synced} user "
            "permission syncs"
        )
        for warning in report.warnings:
            click.echo(f"  warning: {warning}")
        if report.error:
            failed += 1
            click.echo(f"error: {cid}: {report.error}", err=True)
    if failed:
        fail(f"{failed} of {len(ids)} connections failed", "see `codewell codehosts status`")


@codehosts.command("test")
@click.argument("connection_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the shape of POST /.api/codehosts/{id}/test).")
@click.pass_context
@handle_errors
def test(ctx: click.Context, connection_id: str, as_json: bool) -> None:
    """Ask the host what the connection's token can do: token, whose, scopes, repositories (changes nothing)."""
    from codewell.codehosts.connections import ConnectionService  # noqa: PLC0415 - lazy command

    probe = open_runtime(ctx).get(ConnectionService).test(INTERNAL, connection_id)
    if as_json:
        click.echo(json.dumps(probe.as_json(), indent=2))
    else:
        for check in probe.checks:
            outcome = {True: "works", False: "fails", None: "note"}[check.ok]
            click.echo(f"{outcome:5} {check.name}: {check.detail}")
    if not probe.ok:
        fail(f"{connection_id}: something does not work (the lines above say what)")


@codehosts.command("remove")
@click.argument("connection_id")
@click.option(
    "--remove-repos", is_flag=True, help="Remove its repositories too (default: they stay registered and searchable)."
)
@click.option("--json", "as_json", is_flag=True, help='Print JSON: {"id", "label", "kept", "removed"}.')
@click.pass_context
@handle_errors
def remove(ctx: click.Context, connection_id: str, remove_repos: bool, as_json: bool) -> None:
    """Take a connection out of the site config, with its token file and synced permissions (as the site-admin
    page's "Remove connection" does)."""
    from codewell.codehosts.connections import ConnectionService  # noqa: PLC0415 - lazy command

    connections = open_runtime(ctx).get(ConnectionService)
    removal = connections.remove(INTERNAL, connection_id, with_repos=remove_repos)
    if as_json:
        click.echo(json.dumps(removal.as_json(), indent=2))
        return
    click.echo(f"removed the connection {removal.id}")
    if removal.kept:
        click.echo(
            f"its {len(removal.kept)} repositories stay registered (no longer fetched with its token): "
            "remove those not wanted with `codewell repos remove NAME`"
        )
    if removal.removed:
        click.echo(f"its {len(removal.removed)} repositories were removed too")


@codehosts.command("sync-user")
@click.argument("username")
@click.pass_context
@handle_errors
def sync_user(ctx: click.Context, username: str) -> None:
    """Sync one user's repository permissions now and show their status."""
    from codewell.accounts.service import AccountService  # noqa: PLC0415 - lazy command (docs/architecture.md)
    from codewell.codehosts.service import CodeHostService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    runtime = open_runtime(ctx)
    user = runtime.get(AccountService).find_by_username(username)
    if user is None:
        fail(f"user {username!r} not found", "`codewell users list` shows the usernames")
        return
    for item in runtime.get(CodeHostService).sync_user_now(INTERNAL, user.id):
        click.echo(f"{item.connection_id}: {item.summary}")


@codehosts.command("sync-repo")
@click.argument("name")
@click.pass_context
@handle_errors
def sync_repo(ctx: click.Context, name: str) -> None:
    """Sync one private repository's permissions (its members at the host) now."""
    from codewell.codehosts.service import CodeHostService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    synced = open_runtime(ctx).get(CodeHostService).sync_repo_now(INTERNAL, name)
    click.echo(f"{name}: permissions {'synced' if synced else 'not synced (see codewell codehosts status)'}")
