"""The CLI kit: building the runtime from flags and turning service errors into one clear line; `remote` is the
client of a codewell server's REST API (`codewell --server URL`).

It imports no capability: the root command (`codewell.cli.main`) puts the function that wires the
capabilities into a runtime on the click context (`ctx.obj`), and `open_runtime` calls it.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

import click

from codewell.core.errors import CodewellError
from codewell.core.settings import Settings

if TYPE_CHECKING:
    from rich.console import Console

    from codewell.runtime import Runtime

P = ParamSpec("P")
R = TypeVar("R")


def fail(message: str, hint: str | None = None, code: int = 1) -> None:
    click.echo(f"error: {message}", err=True)
    if hint:
        click.echo(f"hint: {hint}", err=True)
    sys.exit(code)


def handle_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Report CodewellErrors as `error: ...` / `hint: ...` on stderr with exit code 1, never a traceback."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except CodewellError as exc:
            fail(exc.message, exc.hint)
            raise AssertionError("unreachable") from None

    return wrapper


# Columns a table may take when stdout is not a terminal: scripts and pagers read every value whole, so rich
# must neither cut a cell ("github.c…") nor wrap it at its default of 80 columns.
PIPED_WIDTH = 1 << 16


def table_console() -> Console:
    """The console to print a rich table on: the terminal's width on a terminal, no limit when piped."""
    # rich takes ~0.1 s to import: only a command printing a table pays it (issue #32: 0.5 s for remote commands).
    from rich.console import Console  # noqa: PLC0415 - lazy command (docs/architecture.md)

    return Console() if sys.stdout.isatty() else Console(width=PIPED_WIDTH)


def echo_json(value: object) -> None:
    """Print `value` as indented JSON, the body the REST API answers for the same thing (`--json`)."""
    click.echo(json.dumps(value, indent=2))


def settings_from_context(ctx: click.Context, **overrides: Any) -> Settings:
    root = ctx.find_root().params
    merged = {"data_dir": root.get("data_dir"), "database_url": root.get("database_url"), **overrides}
    return Settings.from_env(**merged)


def open_runtime(ctx: click.Context, *, migrate: bool = False, **overrides: Any) -> Runtime:
    """Open the runtime for a command; with migrate=True apply pending migrations, else require none."""
    if ctx.find_root().params.get("server"):
        # Only the reading commands go through a server's API; any other would act on this machine's data
        # directory while the person believes it acts on the server.
        raise CodewellError(
            f"`codewell {ctx.command_path.split(' ', 1)[-1]}` works on this machine's data directory, not --server",
            hint="drop --server (and unset CODEWELL_SERVER); through a server: search, nls, read, definition, "
            "references, history search, deepsearch ask|list|show",
        )
    # The database layer and its models: imported by a command that runs, never by its `--help`.
    from codewell.runtime import Runtime  # noqa: PLC0415

    runtime = Runtime.open(settings_from_context(ctx, **overrides))
    runtime.db.check_connection()
    if not runtime.db.schema_current():
        if not migrate:
            raise CodewellError(
                "the database schema is not current (migrations are pending)",
                hint="run `codewell db upgrade` first",
            )
        runtime.db.upgrade()
    ctx.call_on_close(runtime.close)
    wiring(ctx)(runtime)
    return runtime


Wiring = Callable[["Runtime"], None]


def wiring(ctx: click.Context) -> Wiring:
    """The capability wiring the root command put on the context."""
    wire = ctx.find_root().obj
    if not callable(wire):
        raise RuntimeError("the codewell root command did not set the capability wiring (ctx.obj)")
    return cast(Wiring, wire)
