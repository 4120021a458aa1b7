"""`codewell repos ...`: register, list, inspect, remove and sync repositories (thin over RepoService).

The CLI acts as the service itself (INTERNAL): whoever can run it can read the data dir anyway. The services are
imported when a command runs, not by its `--help` (docs/architecture.md, "lazy commands").
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from codewell.clikit import echo_json, fail, handle_errors, open_runtime, table_console
from codewell.core.actors import INTERNAL

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from codewell.repos.service import RepoService, SyncOutcome


@click.group("repos")
def repos() -> None:
    """Repositories: add, list, status, remove, sync."""


def _sync_with_progress(service: RepoService, names: list[str]) -> list[SyncOutcome]:
    """Sync `names` one after another, with a progress bar per clone (git's own phases and percentages)."""
    # rich only when a command draws: the web app imports this module for its command table (docs/architecture.md).
    from rich.console import Console  # noqa: PLC0415 - lazy command
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: PLC0415 - lazy command

    outcomes = []
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[phase]}"),
        TimeElapsedColumn(),
        console=Console(),
        transient=False,
    ) as progress:
        for name in names:
            task = progress.add_task(name, total=100, phase="starting")
            outcome = service.sync_repo(INTERNAL, name, on_progress=_updater(progress, task))
            status = "done" if outcome.ok else "[red]failed[/red]"
            progress.update(task, completed=100, phase=status)
            outcomes.append(outcome)
    return outcomes


def _updater(progress: Progress, task: TaskID) -> Callable[[str, int], None]:
    def update(phase: str, percent: int) -> None:
        progress.update(task, completed=percent, phase=phase.lower())

    return update


def _report(outcomes: list[SyncOutcome]) -> None:
    failed = [o for o in outcomes if not o.ok]
    for outcome in failed:
        click.echo(f"error: {outcome.repo.name}: {outcome.error}", err=True)
    if failed:
        fail(f"{len(failed)} of {len(outcomes)} repositories failed to sync", "see `codewell repos status`")


@repos.command("add")
@click.argument("url")
@click.option("--name", help="Repository name (default: host/path of the URL, local/<dir> for a path).")
@click.option(
    "--private/--public",
    default=None,
    help="Only site admins and granted users read it / every signed-in user does (default: repos.defaultVisibility).",
)
@click.option("--branch", "branches", multiple=True, help="Branch to index beyond the default (repeatable).")
@click.option("--credentials-env", help="Environment variable with `user:token` (or a token) for https.")
@click.option("--sync/--no-sync", default=True, show_default=True, help="Clone it now.")
@click.pass_context
@handle_errors
def add(
    ctx: click.Context,
    url: str,
    name: str | None,
    private: bool | None,
    branches: tuple[str, ...],
    credentials_env: str | None,
    sync: bool,
) -> None:
    """Register a repository by clone URL (https, ssh, file) or local path, and clone it."""
    from codewell.repos.service import RepoService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    service = open_runtime(ctx).get(RepoService)
    repo = service.add_repo(
        INTERNAL, url, name=name, private=private, branches=branches, credentials_env=credentials_env, verify=True
    )
    click.echo(f"added {repo.name}")
    if sync:
        _report(_sync_with_progress(service, [repo.name]))


@repos.command("list")
@click.option("--query", default="", help="Substring of names.")
@click.option("--limit", default=1000, show_default=True, type=int)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the shape of GET /.api/repos).")
@click.pass_context
@handle_errors
def list_(ctx: click.Context, query: str, limit: int, as_json: bool) -> None:
    """List repository names."""
    from codewell.repos.render import repo_json  # noqa: PLC0415 - lazy command
    from codewell.repos.service import RepoService  # noqa: PLC0415 - lazy command

    page = open_runtime(ctx).get(RepoService).list_repos(INTERNAL, query, limit)
    if as_json:
        echo_json({"repos": [repo_json(r) for r in page.repos], "hasMoreResults": page.has_more})
        return
    for repo in page.repos:
        click.echo(repo.name)
    if page.has_more:
        click.echo(f"(more than {limit}; use --limit)")


@repos.command("status")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per repository (every column, by name).")
@click.pass_context
@handle_errors
def status(ctx: click.Context, name: str | None, as_json: bool) -> None:
    """Sync state, last fetch, size, every stage's latest job (mirror, search, symbols, nls, history) and the last
    error of every repository (or of NAME)."""
    from codewell.jobs.service import JobService  # noqa: PLC0415 - lazy command
    from codewell.repos.service import RepoService, repo_resource  # noqa: PLC0415 - lazy command

    runtime = open_runtime(ctx)
    service = runtime.get(RepoService)
    repos_ = [service.get(INTERNAL, name)] if name else service.all_repos(INTERNAL)
    # Columns other capabilities add (search: "index"); repos does not know them.
    extra = service.status_columns(name)
    # Every stage's latest job (mirror, search, symbols, nls, history), in one query.
    jobs = runtime.get(JobService)
    stage_names = list(dict.fromkeys(jobs.stage_kinds().values()))
    stages = jobs.stages([repo_resource(repo.id) for repo in repos_])
    if as_json:
        for repo in repos_:
            record = {
                "name": repo.name,
                "state": repo.sync_state,
                "default_branch": repo.default_branch,
                "last_fetched_at": repo.last_fetched_at.isoformat() if repo.last_fetched_at else None,
                "size_bytes": repo.size_bytes,
                **{label: values.get(repo.name) for label, values in extra.items()},
                "stages": stages.get(repo_resource(repo.id), {}),
                "last_error": repo.last_error,
            }
            click.echo(json.dumps(record))
        return
    from rich.table import Table  # noqa: PLC0415 - lazy command

    table = Table("name", "state", "default branch", "last fetched (UTC)", "size", *extra, *stage_names, "last error")
    for repo in repos_:
        done = stages.get(repo_resource(repo.id), {})
        fetched = repo.last_fetched_at.strftime("%Y-%m-%d %H:%M:%S") if repo.last_fetched_at else "-"
        size = f"{repo.size_bytes / 1e6:.1f} MB" if repo.size_bytes is not None else "-"
        table.add_row(
            repo.name,
            repo.sync_state,
            repo.default_branch or "-",
            fetched,
            size,
            *(values.get(repo.name, "-") for values in extra.values()),
            *(done.get(stage, "-") for stage in stage_names),
            repo.last_error or "",
        )
    table_console().print(table)
    for error in service.source_errors:
        click.echo(f"source error: {error}", err=True)


@repos.command("remove")
@click.argument("name")
@click.pass_context
@handle_errors
def remove(ctx: click.Context, name: str) -> None:
    """Unregister NAME and delete its mirror and index."""
    from codewell.repos.service import RepoService  # noqa: PLC0415 - lazy command

    open_runtime(ctx).get(RepoService).remove_repo(INTERNAL, name)
    click.echo(f"removed {name}")


@repos.command("sync")
@click.argument("name", required=False)
@click.pass_context
@handle_errors
def sync_(ctx: click.Context, name: str | None) -> None:
    """Reconcile the site config, then clone or fetch NAME (default: every repository) now."""
    from codewell.repos.service import RepoService  # noqa: PLC0415 - lazy command

    service = open_runtime(ctx).get(RepoService)
    report = service.reconcile()
    for error in report.errors:
        click.echo(f"source error: {error}", err=True)
    names = [service.get(INTERNAL, name).name] if name else [r.name for r in service.all_repos(INTERNAL)]
    _report(_sync_with_progress(service, names))
    click.echo(f"synced {len(names)} repositories")
