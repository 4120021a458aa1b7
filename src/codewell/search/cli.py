"""`codewell index [REPO]` (build shards with progress) and `codewell search QUERY` (thin over SearchService).

The CLI acts as the service itself (INTERNAL): whoever can run it can read the data dir anyway. The services are
imported when a command runs, not by its `--help` (docs/architecture.md, "lazy commands").
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import click

from codewell.clikit import echo_json, fail, handle_errors, open_runtime, table_console
from codewell.clikit.remote import remote_of
from codewell.core.actors import INTERNAL

if TYPE_CHECKING:
    from rich.progress import TaskID

    from codewell.repos.service import Repo
    from codewell.search.service import SearchService

# Repositories at least this big get their own shard and progress bar; smaller ones are indexed together.
BIG_REPO_BYTES = 64 << 20


@click.command("index")
@click.argument("repo", required=False)
@click.option("--force", is_flag=True, help="Rebuild even when the index is current.")
@click.option("--workers", type=int, default=os.cpu_count() or 1, show_default=True, help="Indexing processes.")
@click.option("--status", "show_status", is_flag=True, help="Only show the index status.")
@click.option(
    "--json", "as_json", is_flag=True, help="With --status: print JSON (the shape of GET /.api/search/status)."
)
@click.pass_context
@handle_errors
def index(ctx: click.Context, repo: str | None, force: bool, workers: int, show_status: bool, as_json: bool) -> None:
    """Index REPO (or every repository) at its default and extra branches."""
    # rich's progress bars and tables too: `codewell --server URL search` never needs them (issue #32: 0.5 s).
    from rich.console import Console  # noqa: PLC0415 - lazy command (docs/architecture.md)
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: PLC0415 - lazy command

    from codewell.repos.service import RepoService  # noqa: PLC0415 - lazy command (docs/architecture.md)
    from codewell.search.service import SearchService  # noqa: PLC0415 - lazy command

    runtime = open_runtime(ctx)
    service = runtime.get(SearchService)
    if show_status:
        _print_status(service, repo, as_json=as_json)
        return
    if as_json:
        fail("--json goes with --status", "codewell index --status --json")
    repos = runtime.get(RepoService)
    targets = [repos.get(INTERNAL, repo)] if repo else repos.readable(INTERNAL)
    failed = 0
    if not repo:
        # Every repository: the small ones together, INDEX_BATCH_REPOS per shard (one bar per batch: an
        # organization has thousands), the big ones alone below with their own bars; then small shards merged.
        small = [t for t in targets if (t.size_bytes or 0) < BIG_REPO_BYTES]
        targets = [t for t in targets if (t.size_bytes or 0) >= BIG_REPO_BYTES]
        failed += _index_small(service, small, workers=workers, force=force)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[detail]}"),
        TimeElapsedColumn(),
        console=Console(),
    ) as progress:
        for target in targets:
            total = target.size_bytes or 0
            task = progress.add_task(target.name, total=total or None, detail="reading files")

            def update(docs: int, size: int, task: TaskID = task) -> None:
                progress.update(task, completed=size, detail=f"{docs} files, {size / 1e6:.0f} MB")

            try:
                status = service.index(target, workers=workers, force=force, progress=update)
            except Exception as exc:  # report every repository, then fail once
                failed += 1
                progress.update(task, detail=f"[red]failed: {exc}[/red]")
                continue
            progress.update(
                task,
                completed=total,
                detail=f"{status.documents} files, {status.content_bytes / 1e6:.0f} MB content, "
                f"{status.index_bytes / 1e6:.0f} MB index",
            )
    if not repo:
        with Console().status("merging small shards"):
            while service.merge_shards():
                pass
    if failed:
        fail(f"{failed} repositories failed to index", "see the messages above")


def _index_small(service: SearchService, repos: list[Repo], *, workers: int, force: bool) -> int:
    """Index `repos` INDEX_BATCH_REPOS to a shard, with one progress bar; returns how many failed."""
    from rich.console import Console  # noqa: PLC0415 - lazy command
    from rich.progress import (  # noqa: PLC0415 - lazy command
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from codewell.search.service import INDEX_BATCH_REPOS  # noqa: PLC0415 - lazy command

    failed = 0
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=Console()
    ) as progress:
        task = progress.add_task(f"{len(repos)} small repositories", total=len(repos))
        for lo in range(0, len(repos), INDEX_BATCH_REPOS):
            batch = repos[lo : lo + INDEX_BATCH_REPOS]
            for status in service.index_many(batch, workers=workers, force=force):
                if status.state == "failed":
                    failed += 1
                    progress.console.print(f"[red]{status.repo}: failed: {status.error}[/red]")
            progress.advance(task, len(batch))
    return failed


@click.command("search")
@click.argument("query")
@click.option("--count", type=int, help="Matching lines to collect.")
@click.option("--cursor", help="Continue a count: page that hit the output budget (the cursor it printed).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the shape of GET /.api/search): every match.")
@click.pass_context
@handle_errors
def search(ctx: click.Context, query: str, count: int | None, cursor: str | None, as_json: bool) -> None:
    """Search the indexed repositories and print results like the keyword_search tool."""
    if as_json and cursor is not None:
        fail("--cursor pages the text output; --json prints every match at once", "drop --cursor")
    remote = remote_of(ctx)
    if remote is not None:
        if cursor is not None:
            fail("--cursor pages a local search only", "through --server, --json prints every match at once")
        params: dict[str, str | int] = {"q": query} if as_json else {"q": query, "format": "text"}
        if count is not None:
            params["count"] = count
        body = remote.get("/.api/search", params)
        if as_json:
            echo_json(body)
        else:
            click.echo(body["text"])
        click.echo(f"\n{body['matchCount']} matching lines in {body['durationMs']:.1f} ms", err=True)
        return
    from codewell.search.render import read_cursor, render_results  # noqa: PLC0415 - lazy command
    from codewell.search.service import SearchService  # noqa: PLC0415 - lazy command

    skip = read_cursor(query, cursor) if cursor is not None else 0
    results = open_runtime(ctx).get(SearchService).search(INTERNAL, query, count=count)
    if as_json:
        echo_json(results.to_json())
    else:
        click.echo(render_results(results, query, skip=skip).text)
    click.echo(f"\n{results.match_count} matching lines in {results.duration_ms:.1f} ms", err=True)


def _print_status(service: SearchService, repo: str | None, *, as_json: bool) -> None:
    statuses = service.status(INTERNAL, repo)
    if as_json:
        from codewell.search.render import status_json  # noqa: PLC0415 - lazy command

        echo_json({"repositories": [status_json(s) for s in statuses]})
        return
    from rich.table import Table  # noqa: PLC0415 - lazy command

    table = Table("name", "state", "branches", "files", "content", "index", "indexed at (UTC)", "error")
    for s in statuses:
        table.add_row(
            s.repo,
            s.state,
            ", ".join(f"{b}@{c[:10]}" for b, c in s.branches.items()) or "-",
            str(s.documents),
            f"{s.content_bytes / 1e6:.1f} MB",
            f"{s.index_bytes / 1e6:.1f} MB",
            s.indexed_at.strftime("%Y-%m-%d %H:%M:%S") if s.indexed_at else "-",
            s.error or "",
        )
    table_console().print(table)
