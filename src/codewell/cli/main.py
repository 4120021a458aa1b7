"""The command-line composition root: the `codewell` entry point, the foundation's commands (serve, db,
config) and every capability's commands, read from `codewell.capabilities`."""

from __future__ import annotations

import contextlib
import logging
import resource
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType

import click
import uvicorn
from starlette.applications import Starlette

from codewell import __version__
from codewell.app import create_app
from codewell.capabilities import CAPABILITIES, wire
from codewell.cli.bootstrap import run_bootstrap
from codewell.clikit import fail, handle_errors, open_runtime, settings_from_context
from codewell.config.store import SiteConfigStore, dump_site_config, parse_site_config
from codewell.core.errors import CodewellError
from codewell.core.logging import configure_logging
from codewell.core.processes import stop_pools
from codewell.core.settings import SETTING_SPECS
from codewell.db import Database
from codewell.runtime import Runtime, ensure_data_dir

log = logging.getLogger(__name__)

# Seconds uvicorn waits for open requests on SIGTERM before it cancels them (docs/architecture.md, "Stopping").
REQUESTS_GRACE_SECONDS = 10
_ENV_HELP = "\n".join(f"  {s.env:24} {s.help}" for s in SETTING_SPECS)


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110},
    epilog="Environment variables:\n\n\b\n" + _ENV_HELP,
)
@click.version_option(__version__, prog_name="codewell")
@click.option("--data-dir", type=click.Path(file_okay=False), help="Data directory [CODEWELL_DATA_DIR].")
@click.option("--database-url", help="Database URL [CODEWELL_DATABASE_URL].")
@click.pass_context
def cli(ctx: click.Context, data_dir: str | None, database_url: str | None) -> None:
    """codewell: code search, navigation, history and an MCP tool server over your git repositories."""
    # Commands open their runtime through codewell.clikit, which wires the capabilities with this.
    ctx.obj = wire
    _raise_open_files_limit()


def _raise_open_files_limit() -> None:
    """Allow as many open files as the system lets this process have: each search shard maps and holds a few
    files, and thousands of small repositories not merged yet are thousands of shards (the default soft limit
    of 1,024 stopped indexing at ~7,500 repositories in bench/scale_bench.py)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


@cli.command()
@click.option("--host", help="Listen address [CODEWELL_HOST, default 127.0.0.1].")
@click.option("--port", type=int, help="Listen port [CODEWELL_PORT, default 7080].")
@click.option("--log-format", type=click.Choice(["text", "json"]), help="Log format [CODEWELL_LOG_FORMAT].")
@click.option("--demo/--no-demo", default=False, help="Register demo repositories on first run.")
@click.option(
    "--migrate/--no-migrate",
    default=True,
    show_default=True,
    help="Apply pending database migrations before serving.",
)
@click.option(
    "--jobs/--no-jobs",
    default=True,
    show_default=True,
    help="Run background jobs (syncs, indexing); --no-jobs makes a web replica beside `codewell worker` processes.",
)
@click.option(
    "--job-threads",
    type=click.IntRange(1, 64),
    help="Threads running jobs in this process [default: 3 per core: jobs wait on git, disk and the database].",
)
@click.option(
    "--job-processes",
    type=click.IntRange(0, 64),
    help="`codewell worker` child processes running the index builds beside this one [default: one per core].",
)
@click.pass_context
@handle_errors
def serve(
    ctx: click.Context,
    host: str | None,
    port: int | None,
    log_format: str | None,
    demo: bool,
    migrate: bool,
    jobs: bool,
    job_threads: int | None,
    job_processes: int | None,
) -> None:
    """Initialise the data dir and database if needed, then serve HTTP (and run background jobs)."""
    settings = settings_from_context(ctx, host=host, port=port, log_format=log_format)
    configure_logging(settings.log_format, settings.log_level)
    runtime = open_runtime(ctx, migrate=migrate, host=host, port=port, log_format=log_format)
    runtime.run_jobs = jobs
    if job_threads is not None:
        runtime.job_threads = job_threads
    if job_processes is not None:
        runtime.job_processes = job_processes
    for line in run_bootstrap(runtime, demo):
        click.echo(line)
    click.echo(f"codewell {__version__} serving on {runtime.external_url} (data: {settings.data_dir})")
    app = create_app(runtime)
    try:
        _serve_http(app, settings.host, settings.port)
    finally:
        _shut_down(runtime)


def _serve_http(app: Starlette, host: str, port: int) -> None:
    """Serve until SIGTERM or SIGINT; uvicorn then stops gracefully (open requests, then the app's lifespan:
    background loops and job runners)."""

    def noted(_signum: int, _frame: FrameType | None) -> None:
        """The signal uvicorn raises again after its graceful stop: already handled."""

    # After its graceful stop uvicorn raises the signal again under the handlers it found. Python's defaults
    # would end the process there and then, before `_shut_down` (process pools left running, re-parented to
    # PID 1); a handler that only takes note lets the shutdown finish. A second signal while it runs gets the
    # defaults back: SIGTERM ends the process at once, SIGINT raises KeyboardInterrupt.
    in_main_thread = threading.current_thread() is threading.main_thread()  # signals are the main thread's
    previous = {sig: signal.signal(sig, noted) for sig in (signal.SIGTERM, signal.SIGINT)} if in_main_thread else {}
    try:
        uvicorn.run(
            app,
            host=host,
            port=port,
            log_config=None,
            timeout_graceful_shutdown=REQUESTS_GRACE_SECONDS,
        )
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _shut_down(runtime: Runtime) -> None:
    """Stop every process pool of this process (together), then close the services and the database."""
    started = time.monotonic()
    stop_pools()
    runtime.close()
    log.info("stopped", extra={"seconds": round(time.monotonic() - started, 3)})


@cli.group()
def db() -> None:
    """Database schema commands."""


@db.command("upgrade")
@click.pass_context
@handle_errors
def db_upgrade(ctx: click.Context) -> None:
    """Apply pending migrations."""
    settings = settings_from_context(ctx)
    ensure_data_dir(settings.data_dir)
    database = Database(settings.database_url)
    database.check_connection()
    before = database.migration_state()
    database.upgrade()
    after = database.migration_state()
    if before.current == after.current:
        click.echo("database schema is already current")
    else:
        click.echo(f"database schema upgraded to {', '.join(sorted(after.current))}")


@db.command("status")
@click.pass_context
@handle_errors
def db_status(ctx: click.Context) -> None:
    """Show applied and pending migrations; exit 3 when migrations are pending."""
    settings = settings_from_context(ctx)
    database = Database(settings.database_url)
    database.check_connection()
    state = database.migration_state()
    click.echo(f"applied: {', '.join(sorted(state.current)) or '(none)'}")
    click.echo(f"latest:  {', '.join(sorted(state.heads))}")
    if state.pending:
        click.echo("migrations are pending: run `codewell db upgrade`")
        sys.exit(3)


@cli.group()
def config() -> None:
    """Site configuration commands."""


@config.command("validate")
@click.argument("path", required=False, type=click.Path(dir_okay=False))
@click.pass_context
def config_validate(ctx: click.Context, path: str | None) -> None:
    """Validate a site config file (default: the configured one); exit 1 with the problems when invalid."""
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
    settings = settings_from_context(ctx)
    store = SiteConfigStore.open(settings.site_config_path, create=False)
    click.echo(dump_site_config(store.current))


def register_capability_commands(group: click.Group) -> None:
    """Each capability's commands, in the declared order."""
    for capability in CAPABILITIES:
        for command in capability.commands:
            group.add_command(command)


register_capability_commands(cli)


def main() -> None:
    cli(prog_name="codewell")
