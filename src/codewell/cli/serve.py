"""`codewell serve`: the HTTP server and the background jobs of one process, stopped gracefully on a signal."""

from __future__ import annotations

import logging
import signal
import socket
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING

import click

from codewell.clikit import handle_errors, open_runtime, settings_from_context
from codewell.core.logging import configure_logging
from codewell.core.processes import stop_pools

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from codewell.runtime import Runtime

log = logging.getLogger(__name__)

# Seconds uvicorn waits for open requests on SIGTERM before it cancels them (docs/architecture.md, "Stopping").
REQUESTS_GRACE_SECONDS = 10


@click.command("serve")
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
@click.option(
    "--web-processes",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Processes answering HTTP on the one port (SO_REUSEPORT): this one (migrations, jobs) and N-1 web "
    "replicas that end with it. One process runs Python on one core at a time: 2 on 2 cores nearly doubles MCP "
    'calls/s (docs/deployment.md, "Web processes").',
)
@click.option("--web-process-of", type=int, hidden=True, help="Internal: serve as a web replica of this pid.")
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
    web_processes: int,
    web_process_of: int | None,
) -> None:
    """Initialise the data dir and database if needed, then serve HTTP (and run background jobs)."""
    # The web app and the first-run steps: imported when the command runs, not by `codewell serve --help`.
    from codewell.app import create_app  # noqa: PLC0415 - lazy command (docs/architecture.md)
    from codewell.cli.bootstrap import run_bootstrap, startup_block  # noqa: PLC0415 - lazy command
    from codewell.core.memory import limit_malloc_arenas  # noqa: PLC0415 - lazy command

    settings = settings_from_context(ctx, host=host, port=port, log_format=log_format)
    configure_logging(settings.log_format, settings.log_level)
    if web_process_of is not None:
        _serve_replica(ctx, web_process_of, settings.host, settings.port, host=host, port=port, log_format=log_format)
        return
    limit_malloc_arenas()  # before any thread: a long-lived server (core/memory.py)
    runtime = open_runtime(ctx, migrate=migrate, host=host, port=port, log_format=log_format)
    runtime.run_jobs = jobs
    if job_threads is not None:
        runtime.job_threads = job_threads
    if job_processes is not None:
        runtime.job_processes = job_processes
    block = startup_block(runtime, run_bootstrap(runtime, demo), str(settings.data_dir))
    app = create_app(runtime)
    if web_processes == 1:
        try:
            # The block comes once the server listens: after the start-up log lines, not lost among them.
            _serve_http(app, settings.host, settings.port, on_started=lambda: click.echo(block))
        finally:
            _shut_down(runtime)
        return
    _serve_with_replicas(runtime, app, web_processes - 1, on_started=lambda: click.echo(block))


def _serve_with_replicas(runtime: Runtime, app: Starlette, count: int, on_started: Callable[[], None]) -> None:
    """Serve HTTP here beside `count` web replica processes on the same port (cli/web_processes.py); exit with
    the first failure among them."""
    from codewell.cli.web_processes import WebReplicas, bind_shared  # noqa: PLC0415 - lazy command

    settings = runtime.settings
    try:
        sock = bind_shared(settings.host, settings.port)
    except OSError as exc:
        _shut_down(runtime)
        raise click.ClickException(f"cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}") from exc
    port = int(sock.getsockname()[1])
    replicas = WebReplicas(
        count,
        settings.host,
        port,
        settings.log_format,
        {"CODEWELL_DATA_DIR": str(settings.data_dir), "CODEWELL_DATABASE_URL": settings.database_url},
    )
    status = 0
    try:
        _serve_http(
            app,
            settings.host,
            port,
            on_started=on_started,
            sockets=[sock],
            on_signal=replicas.terminate,
            before_run=lambda stop: replicas.start(on_failure=stop),
        )
    finally:
        status = replicas.stop()
        sock.close()
        _shut_down(runtime)
    if status:
        raise SystemExit(status)


def _serve_replica(
    ctx: click.Context, parent_pid: int, bind_host: str, bind_port: int, **overrides: str | int | None
) -> None:
    """A web replica started by `--web-processes`: no migrations, first-run steps nor jobs; its own socket on
    the first process's port; ends with that process."""
    from codewell.cli.web_processes import bind_shared, watch_parent  # noqa: PLC0415 - lazy command
    from codewell.core.memory import limit_malloc_arenas  # noqa: PLC0415 - lazy command

    watch_parent(parent_pid)
    limit_malloc_arenas()
    try:  # first: a replica that cannot listen fails at once, and the first process stops the server
        sock = bind_shared(bind_host, bind_port)
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {bind_host}:{bind_port}: {exc.strerror or exc}") from exc
    from codewell.app import create_app  # noqa: PLC0415 - lazy command (docs/architecture.md)

    runtime = open_runtime(ctx, migrate=False, **overrides)
    runtime.run_jobs = False
    app = create_app(runtime)
    try:
        _serve_http(app, bind_host, bind_port, sockets=[sock])
    finally:
        sock.close()
        _shut_down(runtime)


def _serve_http(
    app: Starlette,
    host: str,
    port: int,
    on_started: Callable[[], None] = lambda: None,
    *,
    sockets: list[socket.socket] | None = None,
    on_signal: Callable[[], None] = lambda: None,
    before_run: Callable[[Callable[[], None]], None] = lambda _stop: None,
) -> None:
    """Serve until SIGTERM or SIGINT; uvicorn then stops gracefully (open requests, then the app's lifespan:
    background loops and job runners). `on_started` runs once the socket listens; `sockets`, when given, are
    listened on instead of binding (host, port); `on_signal` runs in the signal handler (the replicas start
    draining at once); `before_run` gets a function that stops the server."""

    def noted(_signum: int, _frame: FrameType | None) -> None:
        """The signal uvicorn raises again after its graceful stop: already handled."""

    # After its graceful stop uvicorn raises the signal again under the handlers it found. Python's defaults
    # would end the process there and then, before `_shut_down` (process pools left running, re-parented to
    # PID 1); a handler that only takes note lets the shutdown finish. A second signal while it runs gets the
    # defaults back: SIGTERM ends the process at once, SIGINT raises KeyboardInterrupt.
    import uvicorn  # noqa: PLC0415 - lazy command (docs/architecture.md)

    in_main_thread = threading.current_thread() is threading.main_thread()  # signals are the main thread's
    previous = {sig: signal.signal(sig, noted) for sig in (signal.SIGTERM, signal.SIGINT)} if in_main_thread else {}

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            on_signal()
            super().handle_exit(sig, frame)

    server = Server(
        uvicorn.Config(app, host=host, port=port, log_config=None, timeout_graceful_shutdown=REQUESTS_GRACE_SECONDS)
    )
    done = threading.Event()

    def announce() -> None:
        while not server.started and not done.wait(0.05):
            pass
        if server.started:
            on_started()

    announcer = threading.Thread(target=announce, name="serve-announce", daemon=True)
    announcer.start()
    try:
        before_run(lambda: setattr(server, "should_exit", True))
        server.run(sockets)
    finally:
        done.set()
        announcer.join(5)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not server.started:
        raise SystemExit(3)  # as uvicorn.run: the socket could not be bound or the app's start-up failed


def _shut_down(runtime: Runtime) -> None:
    """Stop every process pool of this process (together), then close the services and the database."""
    started = time.monotonic()
    stop_pools()
    runtime.close()
    log.info("stopped", extra={"seconds": round(time.monotonic() - started, 3)})
