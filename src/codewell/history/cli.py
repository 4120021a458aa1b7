"""`codewell history ...`: (re)index commit history and run commit searches from the shell."""

from __future__ import annotations

import json

import click

from codewell.clikit import handle_errors, open_runtime
from codewell.core.actors import INTERNAL
from codewell.history import render
from codewell.history.service import HistoryService
from codewell.repos.service import RepoService


@click.group("history")
def history() -> None:
    """Commit index and history queries."""


@history.command("reindex")
@click.argument("names", nargs=-1)
@click.pass_context
@handle_errors
def reindex(ctx: click.Context, names: tuple[str, ...]) -> None:
    """Index the new commits of the given repositories (default: every cloned repository)."""
    runtime = open_runtime(ctx)
    service = runtime.get(HistoryService)
    repos = [runtime.get(RepoService).get(INTERNAL, n) for n in names] or [
        r for r in runtime.get(RepoService).readable(INTERNAL) if r.sync_state == "ready"
    ]
    for repo in repos:
        stats = service.index_repo(repo)
        click.echo(f"{repo.name}: {stats.new_commits} new commits, {stats.refs_updated} refs ({stats.seconds:.2f}s)")


@history.command("search")
@click.option("--repo", "repos", multiple=True, required=True, help="Repository name or /regex/ (repeatable).")
@click.option("--message", "messages", multiple=True, help="Message substring (repeatable, ORed).")
@click.option("--author", "authors", multiple=True, help="Author name or e-mail substring (repeatable, ORed).")
@click.option("--after", help="YYYY-MM-DD, ISO timestamp or `2 weeks ago`.")
@click.option("--before", help="YYYY-MM-DD, ISO timestamp or `2 weeks ago`.")
@click.option("--count", type=int, default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the shape of GET /.api/history/commits).")
@click.pass_context
@handle_errors
def search(
    ctx: click.Context,
    repos: tuple[str, ...],
    messages: tuple[str, ...],
    authors: tuple[str, ...],
    after: str | None,
    before: str | None,
    count: int,
    as_json: bool,
) -> None:
    """Search commits (as the internal actor: every repository)."""
    runtime = open_runtime(ctx)
    result = runtime.get(HistoryService).commit_search(
        INTERNAL,
        list(repos),
        message_terms=list(messages),
        authors=list(authors),
        after=after,
        before=before,
        count=count,
    )
    if as_json:
        # The REST route's arguments by their API names, for the answer's `query` field.
        args: dict[str, list[str] | str | None] = {
            "repos": list(repos),
            "messageTerms": list(messages),
            "authors": list(authors),
            "after": after,
            "before": before,
        }
        query = render.query_text(args, render.COMMIT_QUERY)
        click.echo(json.dumps(render.commits_json(result, runtime.external_url, query), indent=2))
        return
    for name in result.unknown_repos:
        suggestion = result.suggestions.get(name)
        click.echo(f"not found: {name}" + (f" (did you mean {suggestion}?)" if suggestion else ""), err=True)
    for c in result.commits:
        click.echo(f"{c.repo}@{c.sha[:12]} {c.committed_at:%Y-%m-%d} {c.author_name}: {c.subject}")
