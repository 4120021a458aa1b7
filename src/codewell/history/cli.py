"""`codewell history ...`: (re)index commit history and run commit searches from the shell.

`history search` also runs against a server (`codewell --server URL`, `GET /.api/history/commits`). The services
are imported when a command runs, not by its `--help` (docs/architecture.md, "lazy commands").
"""

from __future__ import annotations

from typing import Any

import click

from codewell.clikit import echo_json, handle_errors, open_runtime
from codewell.clikit.remote import remote_of
from codewell.core.actors import INTERNAL


@click.group("history")
def history() -> None:
    """Commit index and history queries."""


@history.command("reindex")
@click.argument("names", nargs=-1)
@click.pass_context
@handle_errors
def reindex(ctx: click.Context, names: tuple[str, ...]) -> None:
    """Index the new commits of the given repositories (default: every cloned repository)."""
    from codewell.history.service import HistoryService  # noqa: PLC0415 - lazy command (docs/architecture.md)
    from codewell.repos.service import RepoService  # noqa: PLC0415 - lazy command

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
    """Search commits (as the internal actor: every repository; through --server, as the token's user)."""
    # The REST route's arguments by their API names (also the answer's `query` field).
    args: dict[str, list[str] | str | None] = {
        "repos": list(repos),
        "messageTerms": list(messages),
        "authors": list(authors),
        "after": after,
        "before": before,
    }
    remote = remote_of(ctx)
    suggestions: dict[str, str] = {}
    if remote is not None:
        params = [(k, v) for k, values in args.items() for v in (values if isinstance(values, list) else [values])]
        body = remote.get("/.api/history/commits", [*[(k, v) for k, v in params if v], ("count", count)])
    else:
        from codewell.history import render  # noqa: PLC0415 - lazy command (docs/architecture.md)
        from codewell.history.service import HistoryService  # noqa: PLC0415 - lazy command

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
        body = render.commits_json(result, runtime.external_url, render.query_text(args, render.COMMIT_QUERY))
        suggestions = result.suggestions
    if as_json:
        echo_json(body)
        return
    _print_commits(body, suggestions)


def _print_commits(body: dict[str, Any], suggestions: dict[str, str]) -> None:
    """One line per commit from the REST body (local or remote alike); unknown repositories on stderr."""
    for name in body["unknownRepos"]:
        suggestion = suggestions.get(name)
        click.echo(f"not found: {name}" + (f" (did you mean {suggestion}?)" if suggestion else ""), err=True)
    for c in body["commits"]:
        click.echo(f"{c['repository']}@{c['commit'][:12]} {c['date'][:10]} {c['authorName']}: {c['title']}")
