"""`codewell db`: apply and inspect the database schema's migrations."""

from __future__ import annotations

import json
import sys

import click

from codewell.clikit import handle_errors, settings_from_context


@click.group("db")
def db() -> None:
    """Database schema commands."""


@db.command("upgrade")
@click.pass_context
@handle_errors
def db_upgrade(ctx: click.Context) -> None:
    """Apply pending migrations."""
    from codewell.db import Database  # noqa: PLC0415 - lazy command (docs/architecture.md)
    from codewell.runtime import ensure_data_dir  # noqa: PLC0415 - lazy command (docs/architecture.md)

    settings = settings_from_context(ctx)
    ensure_data_dir(settings.data_dir)
    database = Database(settings.database_url, busy_timeout=settings.db_busy_timeout)
    database.check_connection()
    before = database.migration_state()
    database.upgrade()
    after = database.migration_state()
    if before.current == after.current:
        click.echo("database schema is already current")
    else:
        click.echo(f"database schema upgraded to {', '.join(sorted(after.current))}")


@db.command("status")
@click.option("--json", "as_json", is_flag=True, help='Print JSON: {"applied", "latest", "pending"}.')
@click.pass_context
@handle_errors
def db_status(ctx: click.Context, as_json: bool) -> None:
    """Show applied and pending migrations; exit 3 when migrations are pending."""
    from codewell.db import Database  # noqa: PLC0415 - lazy command (docs/architecture.md)

    settings = settings_from_context(ctx)
    database = Database(settings.database_url, busy_timeout=settings.db_busy_timeout)
    database.check_connection()
    state = database.migration_state()
    if as_json:
        applied, latest = sorted(state.current), sorted(state.heads)
        click.echo(json.dumps({"applied": applied, "latest": latest, "pending": state.pending}, indent=2))
        sys.exit(3 if state.pending else 0)
    click.echo(f"applied: {', '.join(sorted(state.current)) or '(none)'}")
    click.echo(f"latest:  {', '.join(sorted(state.heads))}")
    if state.pending:
        click.echo("migrations are pending: run `codewell db upgrade`")
        sys.exit(3)
