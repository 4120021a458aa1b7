"""`codewell credits allocate|list` and `codewell analytics tokens|report|rebuild` (thin over the services).

The CLI acts as the service itself (INTERNAL): whoever can run it can read the data dir and database anyway.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta

import click

from codewell.clikit import handle_errors, open_runtime
from codewell.core.actors import INTERNAL
from codewell.core.errors import InvalidInput


@click.group("credits")
def credits() -> None:
    """Credit buckets: allocate, list."""


@credits.command("allocate")
@click.option("--amount", type=int, required=True, help="Credits in the bucket.")
@click.option("--start", "start", required=True, help="First active day, YYYY-MM-DD (UTC).")
@click.option("--end", "end", required=True, help="Last active day, YYYY-MM-DD (UTC, inclusive).")
@click.option("--note", default="", help="What the allocation is for.")
@click.pass_context
@handle_errors
def credits_allocate(ctx: click.Context, amount: int, start: str, end: str, note: str) -> None:
    """Allocate a credit bucket."""
    from codewell.analytics.credits import CreditService  # noqa: PLC0415 - lazy command (docs/architecture.md)
    from codewell.analytics.service import parse_date  # noqa: PLC0415 - lazy command (docs/architecture.md)

    runtime = open_runtime(ctx)
    starts_on, ends_on = parse_date("--start", start), parse_date("--end", end)
    if starts_on is None or ends_on is None:
        raise InvalidInput("--start and --end are required")
    bucket = runtime.get(CreditService).allocate(INTERNAL, amount, starts_on, ends_on, note)
    click.echo(f"allocated bucket {bucket.id}: {bucket.amount} credits, {bucket.starts_on} to {bucket.ends_on}")


@credits.command("list")
@click.option("--start", default=None, help="Only buckets active on or after this day (YYYY-MM-DD).")
@click.option("--end", default=None, help="Only buckets active on or before this day (YYYY-MM-DD).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the shape of GET /analytics/api/credits).")
@click.pass_context
@handle_errors
def credits_list(ctx: click.Context, start: str | None, end: str | None, as_json: bool) -> None:
    """List credit buckets with their consumption."""
    from codewell.analytics.credits import CreditService  # noqa: PLC0415 - lazy command (docs/architecture.md)
    from codewell.analytics.service import parse_range  # noqa: PLC0415 - lazy command (docs/architecture.md)

    runtime = open_runtime(ctx)
    first, last = parse_range(start, end)
    buckets = runtime.get(CreditService).list_buckets(INTERNAL, first, last)
    if as_json:
        click.echo(json.dumps([b.as_json() for b in buckets], indent=2))
        return
    for b in buckets:
        used = ", ".join(f"{k}={v}" for k, v in sorted(b.consumption_by_feature.items())) or "-"
        click.echo(f"{b.id}\t{b.starts_on}..{b.ends_on}\t{b.consumed}/{b.amount} used\t{used}\t{b.note}")


@click.group("analytics")
def analytics() -> None:
    """Analytics: access tokens, reports, rollup maintenance."""


@analytics.group("tokens")
def tokens() -> None:
    """Analytics access tokens: create, list, revoke."""


@tokens.command("create")
@click.option("--user", "username", required=True, help="The user the token acts as.")
@click.option("--name", "display_name", required=True, help="What the token is for.")
@click.option("--expires-in-days", type=int, default=None, help="Expiry (default: never).")
@click.pass_context
@handle_errors
def tokens_create(ctx: click.Context, username: str, display_name: str, expires_in_days: int | None) -> None:
    """Create an analytics token and print it (shown once)."""
    from codewell.accounts.service import AccountService  # noqa: PLC0415 - lazy command (docs/architecture.md)
    from codewell.analytics.tokens import AnalyticsTokenService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    runtime = open_runtime(ctx)
    user = runtime.get(AccountService).get_by_username(username)
    if expires_in_days is not None and expires_in_days <= 0:
        raise InvalidInput("--expires-in-days must be positive")
    expires = datetime.now(UTC) + timedelta(days=expires_in_days) if expires_in_days else None
    raw, info = runtime.get(AnalyticsTokenService).create_token(INTERNAL, display_name, expires, user_id=user.id)
    click.echo(f"created analytics token {info.id} for {user.username}: {raw}")


@tokens.command("list")
@click.option("--user", "username", default=None, help="Only this user's tokens.")
@click.option(
    "--json", "as_json", is_flag=True, help="Print JSON (the shape of GET /analytics/api/service-access-tokens)."
)
@click.pass_context
@handle_errors
def tokens_list(ctx: click.Context, username: str | None, as_json: bool) -> None:
    """List live analytics tokens (metadata only)."""
    from codewell.accounts.service import AccountService  # noqa: PLC0415 - lazy command (docs/architecture.md)
    from codewell.analytics.tokens import AnalyticsTokenService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    runtime = open_runtime(ctx)
    user_id = runtime.get(AccountService).get_by_username(username).id if username else None
    found = runtime.get(AnalyticsTokenService).list_tokens(INTERNAL, user_id)
    if as_json:
        click.echo(json.dumps({"tokens": [t.as_json() for t in found]}, indent=2))
        return
    for t in found:
        expires = t.expires_at.isoformat() if t.expires_at else "never"
        click.echo(
            f"{t.id}\tuser {t.user_id}\t{t.display_name}\texpires {expires}{' (expired)' if t.is_expired else ''}"
        )


@tokens.command("revoke")
@click.argument("token_id", type=int)
@click.pass_context
@handle_errors
def tokens_revoke(ctx: click.Context, token_id: int) -> None:
    """Revoke an analytics token."""
    from codewell.analytics.tokens import AnalyticsTokenService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    runtime = open_runtime(ctx)
    runtime.get(AnalyticsTokenService).revoke(INTERNAL, token_id)
    click.echo(f"revoked analytics token {token_id}")


@analytics.command("report")
@click.option(
    "--granularity", default=None, help="by_user | by_user_month | by_user_day | by_user_day_client_language."
)
@click.option("--start", default=None, help="First day (YYYY-MM-DD).")
@click.option("--end", default=None, help="Last day (YYYY-MM-DD).")
@click.pass_context
@handle_errors
def report(ctx: click.Context, granularity: str | None, start: str | None, end: str | None) -> None:
    """Write the usage report CSV to stdout."""
    from codewell.analytics.service import AnalyticsService, ReportRequest, parse_granularity, parse_range  # noqa: PLC0415 - lazy command (docs/architecture.md)

    runtime = open_runtime(ctx)
    first, last = parse_range(start, end)
    service = runtime.get(AnalyticsService)
    request = ReportRequest(parse_granularity(granularity), first, last)
    for chunk in service.usage_report(INTERNAL, service.instance_host(), request):
        sys.stdout.buffer.write(chunk)
    sys.stdout.flush()


@analytics.command("rebuild")
@click.pass_context
@handle_errors
def rebuild(ctx: click.Context) -> None:
    """Recompute the daily usage rollup from the raw events (after restoring or importing events)."""
    from codewell.analytics.rebuild import rebuild_rollup  # noqa: PLC0415 - lazy command (docs/architecture.md)

    runtime = open_runtime(ctx)
    click.echo(f"rebuilt the usage rollup from {rebuild_rollup(runtime)} events")


COMMANDS: list[click.Command] = [credits, analytics]
