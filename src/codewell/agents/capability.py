"""The agents capability: code_finder and deep search (conversations answered by background workers)."""

from __future__ import annotations

from codewell.agents import pages
from codewell.agents.cli import deepsearch
from codewell.agents.jobs import worker_loop
from codewell.agents.routes import routes
from codewell.agents.tools import TOOL_AVAILABLE, TOOLS
from codewell.capability import Capability, templates_of
from codewell.runtime import Runtime


def setup(runtime: Runtime) -> None:
    """The server runs the deep search workers for its lifetime (they resume jobs a crash left behind)."""
    runtime.background.append(("agents-deepsearch", worker_loop))


CAPABILITY = Capability(
    name="agents",
    setup=setup,
    routes=routes,
    pages=pages.routes,
    tools=TOOLS,
    tool_available=TOOL_AVAILABLE,
    commands=[deepsearch],
    templates=templates_of(__file__),
)
