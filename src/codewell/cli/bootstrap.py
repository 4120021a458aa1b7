"""First-run steps of `codewell serve`: each capability may declare some (first site admin, demo repositories),
and the block `codewell serve` prints once it listens (issue #32, item 4)."""

from __future__ import annotations

from codewell import __version__
from codewell.core.actors import INTERNAL
from codewell.repos.bootstrap import DEMO_NAME
from codewell.repos.service import RepoService
from codewell.runtime import Runtime

# What `repos/bootstrap.py` registers the demo with: a repository of that name the user added is theirs.
DEMO_DESCRIPTION = "this codewell checkout"


def run_bootstrap(runtime: Runtime, demo: bool) -> list[str]:
    """Run every capability's first-run steps in the declared order; return the lines to print once."""
    runtime.db.instance_id()
    lines: list[str] = []
    if demo:
        demo = _demo_still_wanted(runtime, lines)
    for capability in runtime.capabilities:
        for step in capability.bootstrap:
            lines.extend(step(runtime, demo))
    return lines


def _demo_still_wanted(runtime: Runtime, lines: list[str]) -> bool:
    """`--demo` (scripts/serve) shows codewell's own source until the instance has repositories of its own: then
    the demo is neither added nor kept, so that its files never crowd answers about the user's code (issue #32)."""
    service = runtime.get(RepoService)
    service.reconcile()  # the site config's repositories count as the user's own
    repos = service.all_repos(INTERNAL)
    own = [r for r in repos if r.name != DEMO_NAME]
    if not own:
        return True
    demo = next((r for r in repos if r.name == DEMO_NAME and r.description == DEMO_DESCRIPTION), None)
    if demo is not None:
        service.remove_repo(INTERNAL, demo.name)
        lines.append(
            f"demo: removed {DEMO_NAME} (codewell's own source) now that {len(own)} repositories of yours are"
            " registered; `codewell serve` without --demo never adds it"
        )
    return False


def startup_block(runtime: Runtime, first_run: list[str], data_dir: str) -> str:
    """The one block `codewell serve` prints once it listens: where it is, how to sign in, how to add repositories
    and how to connect an agent, with this start's first-run lines (the admin's password and token) inside."""
    site = runtime.external_url.rstrip("/")
    rule = "-" * 72
    token_given = any(line.startswith("access token:") for line in first_run)
    lines = [
        rule,
        f"codewell {__version__} serving on {site} (data: {data_dir})",
        "",
        f"Open {site}/ in a browser.",
    ]
    if first_run:
        lines += ["", "This start:", *(f"  {line}" for line in first_run)]
    if not any(line.startswith("sign in as ") for line in first_run):
        lines += [
            "",
            "Sign in: the site admin `admin` and its password were printed at the first start;",
            "  a lost password: `codewell users reset-link admin` prints a link to set a new one.",
        ]
    lines += [
        "",
        "Add repositories:",
        "  codewell repos add /path/to/a/git/repository    (or a clone URL: https://, ssh://, git@host:org/repo)",
        f"  or on {site}/site-admin/repositories; code hosts on {site}/site-admin/code-hosts",
        "",
        "Connect an agent (MCP, streamable HTTP):",
        f"  URL:   {site}/.api/mcp",
        "  token: "
        + ("the access token above" if token_given else f"create one with scope mcp on {site}/settings/tokens"),
        f"  e.g.   claude mcp add --transport http codewell {site}/.api/mcp --header 'Authorization: token <token>'",
        rule,
    ]
    return "\n".join(lines)
