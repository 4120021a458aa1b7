"""`codewell codeintel ...`: upload SCIP indexes for precise code navigation, list them, run auto-indexing."""

from __future__ import annotations

import json
from pathlib import Path

import click

from codewell.clikit import fail, handle_errors, open_runtime
from codewell.core.actors import INTERNAL


@click.group("codeintel")
def codeintel() -> None:
    """Precise code navigation: SCIP index uploads and auto-indexing."""


@codeintel.command("upload")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--repo", required=True, help="Repository name, e.g. github.com/acme/app.")
@click.option("--commit", required=True, help="The commit the index was built from (a SHA, branch or tag).")
@click.pass_context
@handle_errors
def upload(ctx: click.Context, file: Path, repo: str, commit: str) -> None:
    """Store FILE (an index.scip) for COMMIT of REPO, replacing an earlier upload of that commit."""
    from codewell.codenav.precise import PreciseService, format_size  # noqa: PLC0415 - lazy command (docs/architecture.md)

    runtime = open_runtime(ctx)
    precise = runtime.get(PreciseService)
    size, limit = file.stat().st_size, precise.max_bytes
    if size > limit:  # before reading the file into memory
        fail(
            f"{file} is {format_size(size)}, over the {format_size(limit)} limit of one SCIP upload",
            hint="raise the site config option codeIntel.maxUploadBytes, or index a smaller part of the repository",
        )
    summary = precise.upload(INTERNAL, repo, commit, file.read_bytes())
    verb = "replaced" if summary.replaced else "stored"
    click.echo(
        f"{summary.repo}@{summary.commit}: {verb} {summary.documents} documents, {summary.occurrences} occurrences "
        f"({summary.tool}, {summary.seconds:.2f}s)"
    )
    if summary.missing_files:
        shown = ", ".join(summary.missing_files[:5])
        click.echo(f"warning: {len(summary.missing_files)} documents are not files of the commit: {shown}", err=True)
    if summary.skipped_occurrences:
        click.echo(f"warning: {summary.skipped_occurrences} malformed occurrences left out", err=True)


@codeintel.command("list")
@click.argument("repo", required=False)
@click.option("--repo", "repo_option", help="Repository name (or give it as the argument).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: the uploads and the auto-indexing failures.")
@click.pass_context
@handle_errors
def list_uploads(ctx: click.Context, repo: str | None, repo_option: str | None, as_json: bool) -> None:
    """The SCIP uploads of REPO, newest first (uploaded or auto-indexed), and its failed auto-indexing jobs."""
    from codewell.codenav.autoindex import AutoIndexService  # noqa: PLC0415 - lazy command (docs/architecture.md)
    from codewell.codenav.precise import AUTO, PreciseService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    name = repo_option or repo
    if not name:
        fail("a repository is required", hint="codewell codeintel list --repo github.com/acme/app")
        return
    runtime = open_runtime(ctx)
    uploads = runtime.get(PreciseService).uploads(INTERNAL, name)
    failures = runtime.get(AutoIndexService).failures(INTERNAL, name)
    if as_json:
        # No REST route lists uploads: the fields by the API's naming (camelCase, ISO times).
        body = {
            "uploads": [
                {
                    "commit": u.commit,
                    "tool": u.tool,
                    "uploadedAt": u.uploaded_at.isoformat(),
                    "documents": u.documents,
                    "source": u.source,
                }
                for u in uploads
            ],
            "autoIndexFailures": [
                {
                    "commit": f.commit,
                    "indexers": f.indexers,
                    "exitCode": f.exit_code,
                    "reason": f.reason,
                    "stderrTail": f.stderr_tail,
                    "failedAt": f.failed_at.isoformat(),
                }
                for f in failures
            ],
        }
        click.echo(json.dumps(body, indent=2))
        return
    for info in uploads:
        how = "auto-indexed" if info.source == AUTO else "uploaded"
        click.echo(f"{info.commit}  {info.uploaded_at:%Y-%m-%d %H:%M}  {how}  {info.documents} documents  {info.tool}")
    if failures:
        click.echo("auto-indexing failures (the last one of each commit):")
    for failure in failures:
        code = "none" if failure.exit_code is None else str(failure.exit_code)
        click.echo(f"{failure.commit}  {failure.failed_at:%Y-%m-%d %H:%M}  exit {code}  {failure.reason}")
        for line in failure.stderr_tail.splitlines():
            click.echo(f"    | {line}")


@codeintel.command("autoindex")
@click.option("--repo", required=True, help="Repository name, e.g. github.com/acme/app.")
@click.option("--commit", default=None, help="A SHA, branch or tag (default: the default branch).")
@click.pass_context
@handle_errors
def autoindex(ctx: click.Context, repo: str, commit: str | None) -> None:
    """Run one auto-indexing job now with the configured SCIP indexers, and store its index (replacing one)."""
    from codewell.codenav.autoindex import AutoIndexService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    runtime = open_runtime(ctx)
    result = runtime.get(AutoIndexService).run(INTERNAL, repo, commit)
    if result.summary is not None:
        summary = result.summary
        verb = "replaced" if summary.replaced else "stored"
        click.echo(
            f"{summary.repo}@{summary.commit}: auto-indexed ({', '.join(result.languages)}), {verb} "
            f"{summary.documents} documents, {summary.occurrences} occurrences ({summary.tool}, {result.seconds:.1f}s)"
        )
        return
    if not result.languages:
        click.echo(f"{result.repo}@{result.commit}: {result.reason}")
        return
    for line in result.stderr_tail.splitlines():
        click.echo(f"    | {line}", err=True)
    fail(
        f"{result.repo}@{result.commit}: {result.reason}; nothing was stored",
        hint="the indexer's last output lines are above; `codewell codeintel list --repo NAME` keeps them",
    )
