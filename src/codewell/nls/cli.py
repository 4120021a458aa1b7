"""`codewell nls QUESTION`: nls_search from the command line (thin)."""

from __future__ import annotations

import click

from codewell.clikit import handle_errors, open_runtime
from codewell.core.actors import INTERNAL
from codewell.nls.render import render
from codewell.nls.service import NlsService


@click.command("nls")
@click.argument("question", nargs=-1, required=True)
@click.pass_context
@handle_errors
def nls(ctx: click.Context, question: tuple[str, ...]) -> None:
    """Search code with a question in natural language (filters repo:, file:, rev:, count:)."""
    runtime = open_runtime(ctx)
    click.echo(render(runtime.get(NlsService).search(INTERNAL, " ".join(question))))
