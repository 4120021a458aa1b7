"""`codewell nls QUESTION`: nls_search from the command line (thin).

With `--server URL` it asks that server's `GET /.api/nls/search`. The service is imported when the command
runs, not by its `--help` (docs/architecture.md, "lazy commands").
"""

from __future__ import annotations

import click

from codewell.clikit import echo_json, handle_errors, open_runtime
from codewell.clikit.remote import remote_of
from codewell.core.actors import INTERNAL


@click.command("nls")
@click.argument("question", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the shape of GET /.api/nls/search).")
@click.pass_context
@handle_errors
def nls(ctx: click.Context, question: tuple[str, ...], as_json: bool) -> None:
    """Search code with a question in natural language (filters repo:, file:, rev:, count:)."""
    remote = remote_of(ctx)
    if remote is not None:
        body = remote.get("/.api/nls/search", {"q": " ".join(question)})
    else:
        from codewell.nls.routes import results_json  # noqa: PLC0415 - lazy command (docs/architecture.md)
        from codewell.nls.service import NlsService  # noqa: PLC0415 - lazy command

        body = results_json(open_runtime(ctx).get(NlsService).search(INTERNAL, " ".join(question)))
    # The body's `text` is nls.render.render of the same results: what the command has always printed.
    if as_json:
        echo_json(body)
    else:
        click.echo(body["text"])
