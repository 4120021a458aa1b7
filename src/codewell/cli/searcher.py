"""`codewell searcher`: run a searcher replica of a cluster; `codewell searcher drain NAME`; `... list`.

A composition root like `codewell serve`: the replica's internal API gathers search's endpoints and nls's
(search/replica.py), and its job runner runs the jobs placed on it (jobs/placement.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import click

from codewell.cli.serve import _serve_http, _shut_down
from codewell.clikit import fail, handle_errors, open_runtime, settings_from_context, table_console
from codewell.core.logging import configure_logging

if TYPE_CHECKING:
    from starlette.applications import Starlette

# The internal API's prefix (search/cluster.py's INTERNAL_PREFIX), here so that `--help` imports no service.
INTERNAL_PREFIX = "/.internal"

log = logging.getLogger(__name__)

# Seconds running index jobs get to finish on SIGTERM before they are handed back.
GRACE_SECONDS = 10.0


@click.group("searcher", invoke_without_command=True)
@click.option("--host", help="Listen address of the internal API [CODEWELL_HOST].")
@click.option("--port", type=int, default=7090, show_default=True, help="Listen port of the internal API.")
@click.option("--name", help="This replica's stable name (a StatefulSet pod name) [default: the host name].")
@click.option("--advertise", help="The address the web tier reaches it at [default: http://<name>:<port>].")
@click.option("--concurrency", type=click.IntRange(1, 64), help="Job threads [default: 3 per core].")
@click.pass_context
@handle_errors
def searcher(
    ctx: click.Context,
    host: str | None,
    port: int,
    name: str | None,
    advertise: str | None,
    concurrency: int | None,
) -> None:
    """Run a searcher replica: hold, build and search its share of the repositories (CODEWELL_SEARCHERS=database).

    It answers the web tier on its own port (`/.internal/...`, with the internal credential), runs the jobs
    placed on it, and on SIGTERM stops answering, hands back its running jobs and exits.
    """
    if ctx.invoked_subcommand is not None:
        return
    # The services: imported when a replica runs, not by `codewell searcher --help`.
    from codewell.core.memory import limit_malloc_arenas  # noqa: PLC0415 - lazy command
    from codewell.core.processes import freeze_startup_heap  # noqa: PLC0415 - lazy command
    from codewell.jobs.placement import SEARCHER  # noqa: PLC0415 - lazy command (docs/architecture.md)
    from codewell.jobs.runner import JobRunner  # noqa: PLC0415 - lazy command
    from codewell.jobs.service import JobService  # noqa: PLC0415 - lazy command
    from codewell.nls.service import NlsService  # noqa: PLC0415 - lazy command
    from codewell.search.replica import replica_app  # noqa: PLC0415 - lazy command
    from codewell.search.service import SearchService  # noqa: PLC0415 - lazy command

    limit_malloc_arenas()  # before any thread: a long-lived server (core/memory.py)
    settings = settings_from_context(ctx, host=host)
    if not settings.clustered:
        fail(
            "a searcher replica needs CODEWELL_SEARCHERS=database",
            hint="set it on every process of the cluster (web, worker, searcher)",
        )
    configure_logging(settings.log_format, settings.log_level)
    replica = name or socket.gethostname()
    address = advertise or f"http://{replica}:{port}"
    runtime = open_runtime(ctx, migrate=False, host=host)
    runtime.get(SearchService).hold_locally(replica)
    jobs = runtime.get(JobService)
    runner = JobRunner(
        runtime,
        role=SEARCHER,
        kinds=jobs.placed_kinds(),
        concurrency=concurrency or runtime.job_threads,
        replica=replica,
        address=address,
    )

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        runner.start()

        async def refresh() -> None:
            # Jobs read the site config: pick up its changes as `codewell serve`'s watcher does.
            while True:
                await asyncio.sleep(1.0)
                runtime.site_config.refresh()

        task = asyncio.create_task(refresh())
        freeze_startup_heap()
        try:
            yield
        finally:
            task.cancel()
            await asyncio.to_thread(runner.stop, GRACE_SECONDS)

    app = replica_app(runtime, replica, {"/nls": runtime.get(NlsService).replica_call})
    app.router.lifespan_context = lifespan
    click.echo(f"searcher {replica} answering on {settings.host}:{port} (advertised as {address})")
    try:
        _serve_http(app, settings.host, port)
    finally:
        _shut_down(runtime)


@searcher.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.pass_context
@handle_errors
def list_replicas(ctx: click.Context, as_json: bool) -> None:
    """The live searcher replicas: address, draining, and how many repositories each holds now."""
    from rich.table import Table  # noqa: PLC0415 - lazy command (docs/architecture.md)

    from codewell.jobs.service import JobService  # noqa: PLC0415 - lazy command

    replicas = open_runtime(ctx).get(JobService).replicas(fresh=True)
    rows = [(r.name, r.address, r.draining, _held(r.address)) for r in replicas]
    if as_json:
        for name, address, draining, held in rows:
            click.echo(json.dumps({"name": name, "address": address, "draining": draining, "held": held}))
        return
    table = table_console()
    out = Table("name", "address", "draining", "repositories held")
    for name, address, draining, held in rows:
        out.add_row(name, address, "yes" if draining else "no", "?" if held is None else str(held))
    table.print(out)


@searcher.command("drain")
@click.argument("name")
@click.option("--wait/--no-wait", default=True, show_default=True, help="Wait until it holds nothing.")
@click.option("--timeout", type=float, default=3600.0, show_default=True, help="Seconds to wait at most.")
@click.option("--undo", is_flag=True, help="Stop draining: the replica takes its share back.")
@click.pass_context
@handle_errors
def drain(ctx: click.Context, name: str, wait: bool, timeout: float, undo: bool) -> None:
    """Move every repository of replica NAME to the others (it answers for them until they have), then say so."""
    from codewell.jobs.service import JobService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    service = open_runtime(ctx).get(JobService)
    if not service.set_draining(name, not undo):
        fail(f"no searcher replica named {name!r} is registered", hint="`codewell searcher list` shows them")
    if undo:
        click.echo(f"{name}: no longer draining")
        return
    click.echo(f"{name}: draining")
    if not wait:
        return
    address = next((r.address for r in service.replicas(fresh=True) if r.name == name), None)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        held = _held(address) if address else 0
        if held == 0:
            click.echo(f"{name}: drained (it holds no repository; it may be stopped)")
            return
        click.echo(f"{name}: {'?' if held is None else held} repositories still held")
        time.sleep(2.0)
    fail(f"{name} still holds repositories after {timeout:.0f} s", hint="`codewell searcher list` shows the state")


def _held(address: str) -> int | None:
    """How many repositories the replica at `address` holds (its health endpoint), or None if unreachable."""
    import requests  # noqa: PLC0415 - lazy command (docs/architecture.md)

    try:
        response = requests.get(address.rstrip("/") + INTERNAL_PREFIX + "/healthz", timeout=5.0)
        return int(response.json()["held"])
    except (requests.RequestException, ValueError, KeyError, TypeError):
        return None
