"""The command-line composition root: the `codewell` entry point, the foundation's commands (serve, db,
config, and `searcher`, the cluster's searcher replica) and every capability's commands.

Every command is imported only when it runs (`codewell.cli.lazy`): `codewell --help` imports click and the
settings, nothing of the web app or the capabilities. `COMMANDS` says where each command lives and its one-line
help; tests/functional/test_cli_lazy.py checks it against the commands `codewell.capabilities` declares, so the
capability list stays the one source of what exists.
"""

from __future__ import annotations

import contextlib
import resource
from typing import TYPE_CHECKING

import click

from codewell import __version__
from codewell.cli.lazy import LazyCommand, LazyGroup
from codewell.core.settings import SETTING_SPECS

if TYPE_CHECKING:
    from codewell.runtime import Runtime

_CLIENT_ENV = (
    (
        "CODEWELL_SERVER",
        "The server to run the reading commands against (--server), e.g. https://codewell.example.com.",
    ),
    ("CODEWELL_TOKEN", "The access token for --server (else the one `codewell login URL` stored)."),
)
_ENV_HELP = "\n".join(
    [*(f"  {s.env:24} {s.help}" for s in SETTING_SPECS), *(f"  {env:24} {text}" for env, text in _CLIENT_ENV)]
)

# The foundation's commands, then each capability's (in `codewell.capabilities` order).
COMMANDS: dict[str, LazyCommand] = {
    "serve": LazyCommand(
        "codewell.cli.serve:serve",
        "Initialise the data dir and database if needed, then serve HTTP (and run background jobs).",
    ),
    "db": LazyCommand("codewell.cli.database:db", "Database schema commands."),
    "config": LazyCommand("codewell.cli.siteconfig:config", "Site configuration commands."),
    "jobs": LazyCommand("codewell.jobs.cli:jobs", "Background jobs: list, stats, show, cancel, retry, workers."),
    "worker": LazyCommand(
        "codewell.jobs.cli:worker",
        "Run background jobs until SIGTERM or SIGINT (any number of workers may share one database).",
    ),
    "searcher": LazyCommand(
        "codewell.cli.searcher:searcher",
        "Run a searcher replica: hold, build and search its share of the repositories (CODEWELL_SEARCHERS=database).",
    ),
    "users": LazyCommand(
        "codewell.accounts.cli:users",
        "User accounts: create, list, set-admin, delete, reset-link, unlock, verify-email, repos.",
    ),
    "tokens": LazyCommand("codewell.accounts.cli:tokens", "Access tokens: create, list, revoke."),
    "roles": LazyCommand(
        "codewell.accounts.cli:roles",
        "Roles and permissions: list, create, rename, delete, grant, revoke, assign, unassign.",
    ),
    "audit": LazyCommand("codewell.accounts.cli:audit", "Show the security audit log, newest first."),
    "repos": LazyCommand("codewell.repos.cli:repos", "Repositories: add, list, status, remove, sync."),
    "credits": LazyCommand("codewell.analytics.cli:credits", "Credit buckets: allocate, list."),
    "analytics": LazyCommand(
        "codewell.analytics.cli:analytics", "Analytics: access tokens, reports, rollup maintenance."
    ),
    "license": LazyCommand(
        "codewell.licensing.cli:license_group",
        "The license: show the plan in force, install or remove a license key.",
    ),
    "oauth": LazyCommand("codewell.oauth.cli:oauth", "The OAuth authorization server for MCP clients."),
    "index": LazyCommand(
        "codewell.search.cli:index", "Index REPO (or every repository) at its default and extra branches."
    ),
    "search": LazyCommand(
        "codewell.search.cli:search",
        "Search the indexed repositories and print results like the keyword_search tool.",
    ),
    "history": LazyCommand("codewell.history.cli:history", "Commit index and history queries."),
    "codehosts": LazyCommand(
        "codewell.codehosts.cli:codehosts", "Code host connections: status, discovery and permission sync."
    ),
    "codeintel": LazyCommand(
        "codewell.codenav.cli:codeintel", "Precise code navigation: SCIP index uploads and auto-indexing."
    ),
    "nls": LazyCommand(
        "codewell.nls.cli:nls",
        "Search code with a question in natural language (filters repo:, file:, rev:, count:).",
    ),
    "deepsearch": LazyCommand(
        "codewell.agents.cli:deepsearch", "Deep search conversations: ask, list, show, cancel, delete, share."
    ),
    # Reading code by name, here or on a server (--server): no capability declares them, they join several.
    "read": LazyCommand("codewell.cli.navigate:read", "Print a file (or some of its lines) like the read_file tool."),
    "definition": LazyCommand(
        "codewell.cli.navigate:definition", "Where SYMBOL, as used in PATH of REPO, is defined (go_to_definition)."
    ),
    "references": LazyCommand(
        "codewell.cli.navigate:references", "References to SYMBOL defined in PATH of REPO (find_references)."
    ),
    "login": LazyCommand("codewell.cli.login:login", "Store an access token for the server at URL (for --server URL)."),
    "logout": LazyCommand("codewell.cli.login:logout", "Forget the access token stored for the server at URL."),
}


@click.group(
    cls=LazyGroup,
    lazy_commands=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110},
    epilog="Environment variables:\n\n\b\n" + _ENV_HELP,
)
@click.version_option(__version__, prog_name="codewell")
@click.option("--data-dir", type=click.Path(file_okay=False), help="Data directory [CODEWELL_DATA_DIR].")
@click.option("--database-url", help="Database URL [CODEWELL_DATABASE_URL].")
@click.option(
    "--server",
    envvar="CODEWELL_SERVER",
    metavar="URL",
    help="Run search, nls, read, definition, references, history search and deepsearch against the codewell at "
    "URL, with the token from CODEWELL_TOKEN or `codewell login URL` [CODEWELL_SERVER].",
)
@click.pass_context
def cli(ctx: click.Context, data_dir: str | None, database_url: str | None, server: str | None) -> None:
    """codewell: code search, navigation, history and an MCP tool server over your git repositories."""
    # Commands open their runtime through codewell.clikit, which wires the capabilities with this.
    ctx.obj = wire_capabilities
    _raise_open_files_limit()


def wire_capabilities(runtime: Runtime) -> None:
    """`codewell.capabilities.wire`, imported when a command opens its runtime: the capability list imports every
    capability (the web app's routes included), which `--help` and the commands that fail early never need."""
    from codewell.capabilities import wire  # noqa: PLC0415 - the whole house: imported by a command that runs

    wire(runtime)


def _raise_open_files_limit() -> None:
    """Allow as many open files as the system lets this process have: each search shard maps and holds a few
    files, and thousands of small repositories not merged yet are thousands of shards (the default soft limit
    of 1,024 stopped indexing at ~7,500 repositories in bench/scale_bench.py)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def main() -> None:
    cli(prog_name="codewell")
