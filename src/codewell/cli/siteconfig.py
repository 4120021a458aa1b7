"""`codewell config`: validate and show the site configuration file."""

from __future__ import annotations

from pathlib import Path

import click

from codewell.clikit import fail, handle_errors, settings_from_context
from codewell.core.errors import CodewellError


@click.group("config")
def config() -> None:
    """Site configuration commands."""


@config.command("validate")
@click.argument("path", required=False, type=click.Path(dir_okay=False))
@click.pass_context
def config_validate(ctx: click.Context, path: str | None) -> None:
    """Validate a site config file (default: the configured one); exit 1 with the problems when invalid."""
    from codewell.config.store import parse_site_config  # noqa: PLC0415 - lazy command (docs/architecture.md)

    try:
        target = Path(path) if path else settings_from_context(ctx).site_config_path
        text = target.read_text(encoding="utf-8")
        parse_site_config(text, str(target))
    except OSError as exc:
        fail(f"cannot read {target}: {exc.strerror}")
    except CodewellError as exc:
        fail(exc.message, exc.hint)
    click.echo(f"{target}: valid")


@config.command("show")
@click.pass_context
@handle_errors
def config_show(ctx: click.Context) -> None:
    """Print the effective site config, defaults included."""
    from codewell.config.store import SiteConfigStore, dump_site_config  # noqa: PLC0415 - lazy command (docs/architecture.md)

    settings = settings_from_context(ctx)
    store = SiteConfigStore.open(settings.site_config_path, create=False)
    click.echo(dump_site_config(store.current))
