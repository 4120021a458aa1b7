"""`codewell license show|set|clear` (thin over LicensingService).

The CLI acts as the service itself (INTERNAL): whoever can run it can read the data dir and database anyway.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

from codewell.clikit import handle_errors, open_runtime
from codewell.core.actors import INTERNAL

if TYPE_CHECKING:
    from codewell.licensing.service import LicenseReport


@click.group("license")
def license_group() -> None:
    """The license: show the plan in force, install or remove a license key."""


def _print_report(report: LicenseReport) -> None:
    status = report.status
    if status.release_key_problem:
        # First, so that nobody reads the plan below without knowing no key could change it in this build.
        click.echo(f"note: {status.release_key_problem}")
    trial = " (trial)" if status.source == "trial" else ""
    click.echo(f"plan: {status.plan.name}{trial}")
    click.echo(f"licensee: {status.licensee or '-'}")
    click.echo(f"instance ID: {status.instance_id}")
    expires = f"{status.expires_at:%Y-%m-%d %H:%M} UTC" if status.expires_at else "never"
    click.echo(f"expires: {expires}")
    if status.source == "free":
        click.echo(f"trial ended: {status.trial_ends_at:%Y-%m-%d %H:%M} UTC")
    click.echo(f"features: {', '.join(sorted(status.features)) or '-'}")
    for name, value in status.limits.items():
        click.echo(f"limit {name}: {'unlimited' if value is None else value}")
    users_limit = status.limits.get("users")
    click.echo(f"users: {report.users}" + (f" of {users_limit}" if users_limit is not None else ""))
    click.echo(f"credits this period: {report.credits_consumed} of {report.credits_allocated} used")
    click.echo(f"release key: {'none in this build' if status.release_key_problem else 'present'}")
    if status.problem is not None:
        click.echo(f"license key problem: {status.problem.message} ({status.problem.hint})")


@license_group.command("show")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the shape of GET /.api/license).")
@click.pass_context
@handle_errors
def show(ctx: click.Context, as_json: bool) -> None:
    """Show the plan in force, its limits, usage and expiry."""
    from codewell.licensing.service import LicensingService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    runtime = open_runtime(ctx)
    report = runtime.get(LicensingService).report(INTERNAL)
    if as_json:
        click.echo(json.dumps(report.as_json(), indent=2))
    else:
        _print_report(report)


@license_group.command("set")
@click.argument("key")
@click.pass_context
@handle_errors
def set_key(ctx: click.Context, key: str) -> None:
    """Install a license key (`-` reads it from standard input)."""
    from codewell.licensing.service import LicensingService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    runtime = open_runtime(ctx)
    text = sys.stdin.read() if key == "-" else key
    service = runtime.get(LicensingService)
    status = service.set_key(INTERNAL, text)
    if status.key_source == "config":
        click.echo("installed; note: site config licenseKey is set and takes precedence over this key", err=True)
    _print_report(service.report(INTERNAL))


@license_group.command("clear")
@click.pass_context
@handle_errors
def clear(ctx: click.Context) -> None:
    """Remove the installed license key (the instance runs the trial or the free plan)."""
    from codewell.licensing.service import LicensingService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    runtime = open_runtime(ctx)
    runtime.get(LicensingService).clear_key(INTERNAL)
    click.echo("license key removed")


COMMANDS: list[click.Command] = [license_group]
