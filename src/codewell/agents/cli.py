"""`codewell deepsearch ask|list|show|cancel|delete|share` (thin: one AgentService call, render like the tools).

Conversations belong to users: `ask` and `list` act as `--user NAME`; the other commands act as that user
when given, else as the service itself (which may read and change every conversation). `ask` answers the
question in this process (unless a job runner took it first) and waits for it (`--no-wait` leaves it to the
job runners of `codewell serve` or `codewell worker`).
"""

from __future__ import annotations

import json
import time

import click

from codewell.accounts.service import AccountService
from codewell.agents.jobs import DeepSearchJobs
from codewell.agents.render import conversation_json, render_conversation, render_link, render_list
from codewell.agents.service import AgentService
from codewell.clikit import handle_errors, open_runtime
from codewell.core.actors import INTERNAL, Actor
from codewell.runtime import Runtime


def _actor(runtime: Runtime, username: str | None) -> Actor:
    if not username:
        return INTERNAL
    accounts = runtime.get(AccountService)
    return accounts.actor_for(accounts.get_by_username(username), via="cli")


_USER = click.option("--user", "username", metavar="NAME", help="Act as this user.")


@click.group("deepsearch")
def deepsearch() -> None:
    """Deep search conversations: ask, list, show, cancel, delete, share."""


@deepsearch.command("ask")
@click.argument("question", nargs=-1, required=True)
@click.option("--user", "username", metavar="NAME", required=True, help="The user who asks (owns the conversation).")
@click.option("--in", "identifier", metavar="URL|TOKEN", help="Ask a follow-up in this conversation.")
@click.option("--no-wait", is_flag=True, help="Queue the question for the server's workers and print its link.")
@click.option("--timeout", type=click.IntRange(1, 3600), default=600, show_default=True, help="Seconds to wait.")
@click.pass_context
@handle_errors
def ask(
    ctx: click.Context, question: tuple[str, ...], username: str, identifier: str | None, no_wait: bool, timeout: int
) -> None:
    """Ask a deep search question (or a follow-up with --in) and print the answer."""
    runtime = open_runtime(ctx)
    actor = _actor(runtime, username)
    service = runtime.get(AgentService)
    text = " ".join(question)
    view = service.follow_up(actor, identifier, text) if identifier else service.deepsearch(actor, text)
    if not no_wait:
        # Answered here unless a job runner (a server, a worker) took it first; then wait for that one.
        started = time.monotonic()
        runtime.get(DeepSearchJobs).answer_now(view.conversation.questions[-1].id, timeout)
        view = service.wait(actor, view, max(0.0, timeout - (time.monotonic() - started)))
    click.echo(render_link(view) if view.conversation.is_open else render_conversation(view), nl=False)


@deepsearch.command("list")
@click.option("--user", "username", metavar="NAME", required=True, help="Whose conversations.")
@click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the shape of GET /.api/deepsearch).")
@click.pass_context
@handle_errors
def list_conversations(ctx: click.Context, username: str, limit: int, as_json: bool) -> None:
    """List a user's conversations (status, updated, read token, title)."""
    runtime = open_runtime(ctx)
    views = runtime.get(AgentService).list(_actor(runtime, username), limit)
    if as_json:
        click.echo(json.dumps({"conversations": [conversation_json(v, with_text=False) for v in views]}, indent=2))
        return
    click.echo(render_list(views), nl=False)


@deepsearch.command("show")
@click.argument("identifier")
@_USER
@click.pass_context
@handle_errors
def show(ctx: click.Context, identifier: str, username: str | None) -> None:
    """Print a conversation (URL, shared URL or token) like deepsearch_read."""
    runtime = open_runtime(ctx)
    click.echo(render_conversation(runtime.get(AgentService).read(_actor(runtime, username), identifier)), nl=False)


@deepsearch.command("cancel")
@click.argument("identifier")
@_USER
@click.pass_context
@handle_errors
def cancel(ctx: click.Context, identifier: str, username: str | None) -> None:
    """Cancel the question being answered."""
    runtime = open_runtime(ctx)
    view = runtime.get(AgentService).cancel(_actor(runtime, username), identifier)
    click.echo(f"{view.conversation.read_token}: {view.conversation.status}")


@deepsearch.command("delete")
@click.argument("identifier")
@_USER
@click.pass_context
@handle_errors
def delete(ctx: click.Context, identifier: str, username: str | None) -> None:
    """Delete a conversation."""
    runtime = open_runtime(ctx)
    runtime.get(AgentService).delete(_actor(runtime, username), identifier)
    click.echo("deleted")


@deepsearch.command("share")
@click.argument("identifier")
@click.option("--reset", is_flag=True, help="Make a new link; the old one stops working.")
@_USER
@click.pass_context
@handle_errors
def share(ctx: click.Context, identifier: str, reset: bool, username: str | None) -> None:
    """Print the conversation's shared link (needs deepSearch.sharing.enabled)."""
    runtime = open_runtime(ctx)
    service = runtime.get(AgentService)
    actor = _actor(runtime, username)
    view = service.reset_share(actor, identifier) if reset else service.share(actor, identifier)
    click.echo(view.share_url or "")
