"""`codewell nls QUESTION`: nls_search from the command line (thin).

The service is imported when the command runs, not by its `--help` (docs/architecture.md, "lazy commands").
"""

from __future__ import annotations

import click

from codewell.clikit import echo_json, handle_errors, open_runtime
from codewell.core.actors import INTERNAL


@click.command("nls")
@click.argument("question", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the shape of GET /.api/nls/search).")
@click.pass_context
@handle_errors
def nls(ctx: click.Context, question: tuple[str, ...], as_json: bool) -> None:
    """Search code with a question in natural language (filters repo:, file:, rev:, count:)."""
    from codewell.nls.render import render  # noqa: PLC0415 - lazy command (docs/architecture.md)
    from codewell.nls.routes import results_json  # noqa: PLC0415 - lazy command
    from codewell.nls.service import NlsService  # noqa: PLC0415 - lazy command

    results = open_runtime(ctx).get(NlsService).search(INTERNAL, " ".join(question))
    if as_json:
        echo_json(results_json(results))
    else:
        click.echo(render(results))
