"""`codewell codeintel ...`: upload SCIP indexes for precise code navigation, and list them."""

from __future__ import annotations

from pathlib import Path

import click

from codewell.clikit import fail, handle_errors, open_runtime
from codewell.codenav.precise import PreciseService
from codewell.codenav.scip import MAX_INDEX_BYTES
from codewell.core.actors import INTERNAL


@click.group("codeintel")
def codeintel() -> None:
    """Precise code navigation: SCIP index uploads."""


@codeintel.command("upload")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--repo", required=True, help="Repository name, e.g. github.com/acme/app.")
@click.option("--commit", required=True, help="The commit the index was built from (a SHA, branch or tag).")
@click.pass_context
@handle_errors
def upload(ctx: click.Context, file: Path, repo: str, commit: str) -> None:
    """Store FILE (an index.scip) for COMMIT of REPO, replacing an earlier upload of that commit."""
    size = file.stat().st_size
    if size > MAX_INDEX_BYTES:
        fail(f"{file} is {size >> 20} MB, over the {MAX_INDEX_BYTES >> 20} MB limit of one SCIP upload")
    runtime = open_runtime(ctx)
    summary = runtime.get(PreciseService).upload(INTERNAL, repo, commit, file.read_bytes())
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
@click.argument("repo")
@click.pass_context
@handle_errors
def list_uploads(ctx: click.Context, repo: str) -> None:
    """The SCIP uploads of REPO, newest first."""
    runtime = open_runtime(ctx)
    for commit, tool, uploaded_at, documents in runtime.get(PreciseService).uploads(INTERNAL, repo):
        click.echo(f"{commit}  {uploaded_at:%Y-%m-%d %H:%M}  {documents} documents  {tool}")
