"""The capabilities of the house, listed once, from the bottom of the dependency order to the top.

`codewell.app` (HTTP) and `codewell.cli.main` (command line) read this list and nothing else; each entry
is declared in its capability's `capability.py` (see `codewell.capability.Capability`). Setup runs in this
order, so a capability's setup may rely on the ones listed before it. A new capability: write its
`capability.py`, add one line here (docs/architecture.md).
"""

from __future__ import annotations

from codewell.accounts.capability import CAPABILITY as ACCOUNTS
from codewell.agents.capability import CAPABILITY as AGENTS
from codewell.analytics.capability import CAPABILITY as ANALYTICS
from codewell.auth.capability import CAPABILITY as AUTH
from codewell.capability import Capability
from codewell.codehosts.capability import CAPABILITY as CODEHOSTS
from codewell.codenav.capability import CAPABILITY as CODENAV
from codewell.evaluator.capability import CAPABILITY as EVALUATOR
from codewell.history.capability import CAPABILITY as HISTORY
from codewell.jobs.capability import CAPABILITY as JOBS
from codewell.licensing.capability import CAPABILITY as LICENSING
from codewell.mcp.capability import CAPABILITY as MCP
from codewell.nls.capability import CAPABILITY as NLS
from codewell.oauth.capability import CAPABILITY as OAUTH
from codewell.repos.capability import CAPABILITY as REPOS
from codewell.runtime import Runtime
from codewell.search.capability import CAPABILITY as SEARCH
from codewell.web.capability import CAPABILITY as WEB

CAPABILITIES: tuple[Capability, ...] = (
    JOBS,
    ACCOUNTS,
    REPOS,
    AUTH,
    ANALYTICS,
    LICENSING,
    OAUTH,
    SEARCH,
    HISTORY,
    CODEHOSTS,
    CODENAV,
    NLS,
    EVALUATOR,
    AGENTS,
    MCP,
    WEB,
)


def wire(runtime: Runtime) -> None:
    """Hand the runtime the capability list and run every setup once (idempotent per runtime)."""
    if runtime.capabilities_ready:
        return
    runtime.capabilities = CAPABILITIES
    for capability in CAPABILITIES:
        if capability.setup is not None:
            capability.setup(runtime)
    runtime.capabilities_ready = True
