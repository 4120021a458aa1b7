"""The agents capability: code_finder and deep search (conversations answered by jobs: agents/jobs.py)."""

from __future__ import annotations

from codewell.agents import pages
from codewell.agents.cli import deepsearch
from codewell.agents.jobs import JOB_KINDS
from codewell.agents.routes import routes
from codewell.agents.tools import TOOL_AVAILABLE, TOOLS
from codewell.capability import Capability, templates_of

CAPABILITY = Capability(
    name="agents",
    routes=routes,
    pages=pages.routes,
    tools=TOOLS,
    tool_available=TOOL_AVAILABLE,
    commands=[deepsearch],
    templates=templates_of(__file__),
    jobs=JOB_KINDS,
)
