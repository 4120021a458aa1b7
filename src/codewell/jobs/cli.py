"""`codewell jobs ...` (what the queue holds, cancel, retry) and `codewell worker` (a process that runs jobs).

Thin over JobService and JobRunner; the CLI acts as the service itself (INTERNAL).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from dataclasses import asdict
from datetime import datetime
from types import FrameType
from typing import TYPE_CHECKING, Any

import click

from codewell.clikit import handle_errors, open_runtime, table_console
from codewell.core.actors import INTERNAL

if TYPE_CHECKING:
    from codewell.jobs.service import Job

# jobs.models.STATES, spelled here so that `--help` need not import the database layer
# (tests/functional/test_cli_remote.py keeps the two equal).
JOB_STATES = ("queued", "running", "succeeded", "failed", "cancelled")


@click.group("jobs")
def jobs() -> None:
    """Background jobs: list, stats, show, cancel, retry, workers."""


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "-"


def _progress(job: Job) -> str:
    if job.progress_total:
        return f"{job.progress_done}/{job.progress_total} {job.progress_message}".strip()
    return job.progress_message or ("-" if job.progress_done == 0 else str(job.progress_done))


def _cut(error: str) -> str:
    """An error as the table shows it: its first 80 characters on a terminal, whole when piped (scripts, grep)."""
    return error[:80] if sys.stdout.isatty() else error


def _json_default(value: object) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)


@jobs.command("list")
@click.option("--state", type=click.Choice(JOB_STATES), help="Only jobs in this state.")
@click.option("--kind", help="Only jobs of this kind (e.g. search.index).")
@click.option("--resource", help="Only jobs of this resource (e.g. repo:12).")
@click.option("--limit", default=50, show_default=True, type=int)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.pass_context
@handle_errors
def list_(
    ctx: click.Context, state: str | None, kind: str | None, resource: str | None, limit: int, as_json: bool
) -> None:
    """Jobs, newest first."""
    from codewell.jobs.service import JobService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    found = (
        open_runtime(ctx).get(JobService).list_jobs(INTERNAL, state=state, kind=kind, resource=resource, limit=limit)
    )
    if as_json:
        for job in found:
            click.echo(json.dumps(asdict(job), default=_json_default))
        return
    from rich.table import Table  # noqa: PLC0415 - rich only for a table (docs/architecture.md)

    table = Table("id", "kind", "resource", "state", "prio", "attempts", "cause", "created (UTC)", "progress", "error")
    for job in found:
        table.add_row(
            str(job.id),
            job.kind,
            job.resource,
            job.state + (" (cancel asked)" if job.cancel_requested and job.state == "running" else ""),
            str(job.priority),
            f"{job.attempts}/{job.max_attempts}",
            job.cause,
            _when(job.created_at),
            _progress(job),
            _cut(job.last_error or ""),
        )
    table_console().print(table)


@jobs.command("stats")
@click.option("--json", "as_json", is_flag=True, help="One JSON array of every kind's counts.")
@click.pass_context
@handle_errors
def stats(ctx: click.Context, as_json: bool) -> None:
    """Queue depth per kind: queued, running, failed, and how long the oldest due job has waited."""
    from codewell.jobs.service import JobService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    found = open_runtime(ctx).get(JobService).stats(INTERNAL)
    if as_json:
        click.echo(json.dumps([asdict(s) for s in found]))
        return
    from rich.table import Table  # noqa: PLC0415 - rich only for a table (docs/architecture.md)

    table = Table("kind", "queued", "running", "failed", "oldest waiting")
    for s in found:
        waited = f"{s.oldest_queued_seconds:.0f} s" if s.oldest_queued_seconds is not None else "-"
        table.add_row(s.kind, str(s.queued), str(s.running), str(s.failed), waited)
    table_console().print(table)


@jobs.command("show")
@click.argument("job_id", type=int)
@click.option("--json", "as_json", is_flag=True, help="One JSON object (the fields of `jobs list --json`).")
@click.pass_context
@handle_errors
def show(ctx: click.Context, job_id: int, as_json: bool) -> None:
    """Everything about one job, its error and result included."""
    from codewell.jobs.service import JobService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    job = open_runtime(ctx).get(JobService).get(INTERNAL, job_id)
    if as_json:
        click.echo(json.dumps(asdict(job), default=_json_default))
        return
    for key, value in asdict(job).items():
        shown: Any = json.dumps(value) if isinstance(value, dict) else value
        click.echo(f"{key}: {_when(shown) if isinstance(shown, datetime) else shown}")


@jobs.command("cancel")
@click.argument("job_id", type=int)
@click.pass_context
@handle_errors
def cancel(ctx: click.Context, job_id: int) -> None:
    """Cancel a queued job, or ask a running one to stop."""
    from codewell.jobs.service import JobService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    job = open_runtime(ctx).get(JobService).cancel(INTERNAL, job_id)
    click.echo(f"job {job.id} {'cancelled' if job.state == 'cancelled' else 'asked to stop'}")


@jobs.command("retry")
@click.argument("job_id", type=int)
@click.pass_context
@handle_errors
def retry(ctx: click.Context, job_id: int) -> None:
    """Queue a failed or cancelled job again, ahead of scheduled work."""
    from codewell.jobs.service import JobService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    job = open_runtime(ctx).get(JobService).retry(INTERNAL, job_id)
    click.echo(f"job {job.id} queued")


@jobs.command("workers")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.pass_context
@handle_errors
def workers(ctx: click.Context, as_json: bool) -> None:
    """Processes that run jobs, with their last heartbeat."""
    from codewell.jobs.service import JobService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    found = open_runtime(ctx).get(JobService).workers(INTERNAL)
    if as_json:
        for worker_ in found:
            click.echo(json.dumps(asdict(worker_), default=_json_default))
        return
    from rich.table import Table  # noqa: PLC0415 - rich only for a table (docs/architecture.md)

    table = Table("owner", "role", "kinds", "threads", "started (UTC)", "heartbeat (UTC)", "alive")
    for w in found:
        table.add_row(
            w.owner,
            w.role,
            w.kinds,
            str(w.concurrency),
            _when(w.started_at),
            _when(w.heartbeat_at),
            "yes" if w.alive else "no",
        )
    table_console().print(table)


@click.command("worker")
@click.option("--kinds", help="Comma-separated job kinds to run (default: every kind).")
@click.option(
    "--concurrency",
    type=click.IntRange(1, 64),
    help="Worker threads [default: 3 per core: jobs wait on git, disk and the database].",
)
@click.option(
    "--grace",
    default=30.0,
    show_default=True,
    type=float,
    help="Seconds to let running jobs finish on SIGTERM (the process exits at most ~5 s later).",
)
@click.pass_context
@handle_errors
def worker(ctx: click.Context, kinds: str | None, concurrency: int | None, grace: float) -> None:
    """Run background jobs until SIGTERM or SIGINT (any number of workers may share one database).

    On SIGTERM it claims nothing more, lets running jobs finish for `--grace` seconds (those still running are
    handed back: their leases run out and any worker takes them over), stops its process pools and exits.
    """
    from codewell.core.memory import limit_malloc_arenas  # noqa: PLC0415 - lazy command
    from codewell.core.processes import stop_pools  # noqa: PLC0415 - lazy command (docs/architecture.md)
    from codewell.jobs.runner import JobRunner  # noqa: PLC0415 - lazy command (docs/architecture.md)

    limit_malloc_arenas()  # before any thread: a long-lived server (core/memory.py)
    runtime = open_runtime(ctx)
    selected = frozenset(k.strip() for k in kinds.split(",") if k.strip()) if kinds else None
    runner = JobRunner(runtime, role="worker", kinds=selected, concurrency=concurrency or runtime.job_threads)
    # The handler only flips a flag: a lock taken in a handler (threading.Event.set) deadlocks when a second signal
    # (the kernel's parent-death SIGTERM right after the server's own) interrupts the main thread while it holds
    # that lock, in `wait` or in the first handler. Seen: a worker child stuck for minutes after its server died,
    # holding the job it was running.
    stopping: list[bool] = []

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stopping.append(True)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server = _server_pid()
    runner.start()
    click.echo(f"worker {runner.owner} running {', '.join(sorted(selected)) if selected else 'every job kind'}")
    ticks = 0
    while not stopping:
        time.sleep(0.1)
        ticks += 1
        if ticks % 10:
            continue
        if server is not None and os.getppid() != server:
            # The parent-death signal never came: the server died before this process asked for it.
            click.echo("stopping: the server that started this worker is gone")
            break
        # Jobs read the site config: pick up its changes as `codewell serve`'s watcher does.
        runtime.site_config.refresh()
    click.echo("stopping: letting running jobs finish")
    runner.stop(grace)
    # Then its process pools (search's, codenav's, those of index builds still running past the grace; all
    # together), then the services: no process of this worker outlives it.
    stop_pools()
    runtime.close()


def _server_pid() -> int | None:
    """The `codewell serve` that started this worker as its child (jobs/children.py), if one did."""
    value = os.environ.get("CODEWELL_WORKER_OF", "")
    return int(value) if value.isdigit() else None
