"""`codewell deepsearch ask|list|show|cancel|delete|share` (thin: one AgentService call, render like the tools).

Conversations belong to users: `ask` and `list` act as `--user NAME`; the other commands act as that user
when given, else as the service itself (which may read and change every conversation). `ask` answers the
question in this process (unless a job runner took it first) and waits for it (`--no-wait` leaves it to the
job runners of `codewell serve` or `codewell worker`).

Through a server (`codewell --server URL`), `ask`, `list` and `show` act as the token's user over
`/.api/deepsearch`: the server's job runners answer, the command polls until the answer is written. The services
are imported when a command runs, not by its `--help` (docs/architecture.md, "lazy commands").
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import click

from codewell.clikit import echo_json, fail, handle_errors, open_runtime
from codewell.clikit.remote import Remote, path_segment, remote_of
from codewell.core.actors import INTERNAL, Actor

if TYPE_CHECKING:
    from codewell.runtime import Runtime

# A question's states while it is being answered (agents.models.OPEN_STATES, by the API's names).
OPEN_STATES = ("pending", "processing")
# How often a remote `ask` re-reads the conversation while the server answers it.
POLL_SECONDS = 1.0


def _actor(runtime: Runtime, username: str | None) -> Actor:
    from codewell.accounts.service import AccountService  # noqa: PLC0415 - lazy command (docs/architecture.md)

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
@click.option(
    "--user", "username", metavar="NAME", help="The user who asks (owns the conversation); not with --server."
)
@click.option("--in", "identifier", metavar="URL|TOKEN", help="Ask a follow-up in this conversation.")
@click.option("--no-wait", is_flag=True, help="Queue the question for the server's workers and print its link.")
@click.option("--timeout", type=click.IntRange(1, 3600), default=600, show_default=True, help="Seconds to wait.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the shape of GET /.api/deepsearch/{token}).")
@click.pass_context
@handle_errors
def ask(
    ctx: click.Context,
    question: tuple[str, ...],
    username: str | None,
    identifier: str | None,
    no_wait: bool,
    timeout: int,
    as_json: bool,
) -> None:
    """Ask a deep search question (or a follow-up with --in) and print the answer."""
    text = " ".join(question)
    remote = remote_of(ctx)
    if remote is not None:
        if username:
            fail("--user picks a local user; through --server the token's user asks", "drop --user")
        _ask_remote(remote, text, identifier, no_wait=no_wait, timeout=timeout, as_json=as_json)
        return
    if not username:
        fail("--user is required: the user who asks owns the conversation", "codewell deepsearch ask --user NAME ...")
    from codewell.agents.jobs import DeepSearchJobs  # noqa: PLC0415 - lazy command (docs/architecture.md)
    from codewell.agents.render import conversation_json, render_conversation, render_link  # noqa: PLC0415
    from codewell.agents.service import AgentService  # noqa: PLC0415 - lazy command

    runtime = open_runtime(ctx)
    actor = _actor(runtime, username)
    service = runtime.get(AgentService)
    view = service.follow_up(actor, identifier, text) if identifier else service.deepsearch(actor, text)
    if not no_wait:
        # Answered here unless a job runner (a server, a worker) took it first; then wait for that one.
        started = time.monotonic()
        runtime.get(DeepSearchJobs).answer_now(view.conversation.questions[-1].id, timeout)
        view = service.wait(actor, view, max(0.0, timeout - (time.monotonic() - started)))
    if as_json:
        echo_json(conversation_json(view))
        return
    click.echo(render_link(view) if view.conversation.is_open else render_conversation(view), nl=False)


def _ask_remote(
    remote: Remote, text: str, identifier: str | None, *, no_wait: bool, timeout: int, as_json: bool
) -> None:
    """POST the question, then read the conversation every POLL_SECONDS until the server's workers answered."""
    if identifier:
        body = remote.post(f"/.api/deepsearch/{path_segment(_token_of(identifier))}/questions", {"question": text})
    else:
        body = remote.post("/.api/deepsearch", {"question": text})
    token = str(body["readToken"])
    deadline = time.monotonic() + timeout
    while not no_wait and body["status"] in OPEN_STATES and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
        body = remote.get(f"/.api/deepsearch/{path_segment(token)}")
    if as_json:
        echo_json(body)
    elif body["status"] in OPEN_STATES:
        click.echo(
            f"Link: {body['url']}\n\nThe deep search is {body['status']}. "
            f"`codewell --server {remote.url} deepsearch show {token}` prints it once answered."
        )
    else:
        click.echo(body["text"], nl=False)


def _token_of(identifier: str) -> str:
    """The read token in a conversation's URL (`.../deepsearch/<token>`), or the token itself."""
    return identifier.rstrip("/").rsplit("/", 1)[-1]


@deepsearch.command("list")
@click.option("--user", "username", metavar="NAME", help="Whose conversations (required locally; not with --server).")
@click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the shape of GET /.api/deepsearch).")
@click.pass_context
@handle_errors
def list_conversations(ctx: click.Context, username: str | None, limit: int, as_json: bool) -> None:
    """List a user's conversations (status, updated, read token, title)."""
    remote = remote_of(ctx)
    if remote is not None:
        if username:
            fail("--user picks a local user; through --server the token's user's conversations are listed")
        body = remote.get("/.api/deepsearch", {"limit": limit})
        if as_json:
            echo_json(body)
            return
        # render_list's lines, from the REST body.
        rows = [
            f"{c['status']:<10} {c['updatedAt'][:19]}Z  {c['readToken']}  {c['title']}" for c in body["conversations"]
        ]
        click.echo("\n".join(rows) if rows else "No deep search conversations.")
        return
    if not username:
        fail("--user is required: whose conversations", "codewell deepsearch list --user NAME")
    from codewell.agents.render import conversation_json, render_list  # noqa: PLC0415 - lazy command
    from codewell.agents.service import AgentService  # noqa: PLC0415 - lazy command

    runtime = open_runtime(ctx)
    views = runtime.get(AgentService).list(_actor(runtime, username), limit)
    if as_json:
        echo_json({"conversations": [conversation_json(v, with_text=False) for v in views]})
        return
    click.echo(render_list(views), nl=False)


@deepsearch.command("show")
@click.argument("identifier")
@_USER
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the shape of GET /.api/deepsearch/{token}).")
@click.pass_context
@handle_errors
def show(ctx: click.Context, identifier: str, username: str | None, as_json: bool) -> None:
    """Print a conversation (URL, shared URL or token) like deepsearch_read."""
    remote = remote_of(ctx)
    if remote is not None:
        if username:
            fail("--user picks a local user; through --server the token's user reads", "drop --user")
        body: dict[str, Any] = remote.get(f"/.api/deepsearch/{path_segment(_token_of(identifier))}")
    else:
        from codewell.agents.render import conversation_json  # noqa: PLC0415 - lazy command
        from codewell.agents.service import AgentService  # noqa: PLC0415 - lazy command

        runtime = open_runtime(ctx)
        body = conversation_json(runtime.get(AgentService).read(_actor(runtime, username), identifier))
    # The body's `text` is render_conversation of the same view: deepsearch_read's text.
    if as_json:
        echo_json(body)
    else:
        click.echo(body["text"], nl=False)


@deepsearch.command("cancel")
@click.argument("identifier")
@_USER
@click.pass_context
@handle_errors
def cancel(ctx: click.Context, identifier: str, username: str | None) -> None:
    """Cancel the question being answered."""
    from codewell.agents.service import AgentService  # noqa: PLC0415 - lazy command

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
    from codewell.agents.service import AgentService  # noqa: PLC0415 - lazy command

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
    from codewell.agents.service import AgentService  # noqa: PLC0415 - lazy command

    runtime = open_runtime(ctx)
    service = runtime.get(AgentService)
    actor = _actor(runtime, username)
    view = service.reset_share(actor, identifier) if reset else service.share(actor, identifier)
    click.echo(view.share_url or "")
