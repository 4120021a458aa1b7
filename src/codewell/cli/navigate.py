"""`codewell read`, `codewell definition` and `codewell references`: reading code by name, like the read_file,
go_to_definition and find_references tools, on this machine's data directory or on a server (`--server URL`).

Locally the command acts as the service itself (INTERNAL), as every local command does. Through a server it calls
the REST routes with the caller's token (`GET /.api/repos/{name}/-/file`, `GET /.api/codenav/definition`,
`GET /.api/codenav/references`) and prints the same text; `--json` prints the route's body, which the local command
builds the same way. Services are imported when a command runs, never by its `--help` (docs/architecture.md, "lazy
commands").
"""

from __future__ import annotations

from typing import Any

import click

from codewell.clikit import echo_json, handle_errors, open_runtime
from codewell.clikit.remote import path_segment, remote_of
from codewell.core.actors import INTERNAL

_REVISION = click.option("--revision", "-r", help="Branch, tag or commit SHA (default: the default branch).")
_JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON (the body of the REST route).")


def file_text(body: dict[str, Any]) -> str:
    """The read_file tool's text (`URL: ...`, then `<line number>: <text>`, then any notice) from the REST body of
    `GET /.api/repos/{name}/-/file`, so that a local and a remote `codewell read` print the same lines."""
    out = [f"URL: {body['url']}"]
    if body["binary"]:
        out.append(body.get("notice") or "Binary file.")
        return "\n".join(out)
    lines = body["content"].split("\n")[:-1] if body["content"] else []
    out.extend(f"{body['startLine'] + offset}: {line}" for offset, line in enumerate(lines))
    if not lines:
        out.append("(empty file)")
    if body.get("notice"):
        out.extend(["", body["notice"]])
    return "\n".join(out)


@click.command("read")
@click.argument("repo")
@click.argument("path")
@click.option("--start", "start_line", type=int, help="First line (1-based).")
@click.option("--end", "end_line", type=int, help="Last line (inclusive).")
@_REVISION
@_JSON
@click.pass_context
@handle_errors
def read(
    ctx: click.Context,
    repo: str,
    path: str,
    start_line: int | None,
    end_line: int | None,
    revision: str | None,
    as_json: bool,
) -> None:
    """Print a file (or some of its lines) like the read_file tool."""
    remote = remote_of(ctx)
    if remote is not None:
        params = {"path": path, "startLine": start_line, "endLine": end_line, "revision": revision}
        body = remote.get(f"/.api/repos/{path_segment(repo)}/-/file", {k: v for k, v in params.items() if v})
    else:
        from codewell.repos import render  # noqa: PLC0415 - lazy command (docs/architecture.md)
        from codewell.repos.service import RepoService  # noqa: PLC0415 - lazy command

        content = open_runtime(ctx).get(RepoService).read_file(INTERNAL, repo, path, start_line, end_line, revision)
        body = render.file_json(content)
    if as_json:
        echo_json(body)
    else:
        click.echo(file_text(body))


@click.command("definition")
@click.argument("repo")
@click.argument("path")
@click.argument("symbol")
@_REVISION
@_JSON
@click.pass_context
@handle_errors
def definition(ctx: click.Context, repo: str, path: str, symbol: str, revision: str | None, as_json: bool) -> None:
    """Where SYMBOL, as used in PATH of REPO, is defined (go_to_definition)."""
    remote = remote_of(ctx)
    if remote is not None:
        params = {"repo": repo, "path": path, "symbol": symbol, "revision": revision}
        body = remote.get("/.api/codenav/definition", {k: v for k, v in params.items() if v})
    else:
        from codewell.codenav import render  # noqa: PLC0415 - lazy command (docs/architecture.md)
        from codewell.codenav.service import CodeNavService  # noqa: PLC0415 - lazy command

        found = open_runtime(ctx).get(CodeNavService).go_to_definition(INTERNAL, repo, path, symbol, revision)
        body = {**render.definitions_json(found), "text": render.definitions_text(found)}
    if as_json:
        echo_json(body)
    else:
        click.echo(body["text"])


@click.command("references")
@click.argument("repo")
@click.argument("path")
@click.argument("symbol")
@_REVISION
@click.option("--limit", type=click.IntRange(1, 1000), default=None, help="Most references to show (default 10).")
@_JSON
@click.pass_context
@handle_errors
def references(
    ctx: click.Context, repo: str, path: str, symbol: str, revision: str | None, limit: int | None, as_json: bool
) -> None:
    """References to SYMBOL defined in PATH of REPO (find_references)."""
    remote = remote_of(ctx)
    if remote is not None:
        params = {"repo": repo, "path": path, "symbol": symbol, "revision": revision, "limit": limit}
        body = remote.get("/.api/codenav/references", {k: v for k, v in params.items() if v})
    else:
        from codewell.codenav import render  # noqa: PLC0415 - lazy command (docs/architecture.md)
        from codewell.codenav.service import DEFAULT_LIMIT, CodeNavService  # noqa: PLC0415 - lazy command

        service = open_runtime(ctx).get(CodeNavService)
        found = service.find_references(INTERNAL, repo, path, symbol, revision, limit or DEFAULT_LIMIT)
        body = {**render.references_json(found), "text": render.references_text(found)}
    if as_json:
        echo_json(body)
    else:
        click.echo(body["text"])
