"""The history capability: commit and diff search, revision comparison, contributors, and their pages."""

from __future__ import annotations

from codewell.capability import Capability, templates_of
from codewell.history import pages, routes
from codewell.history.cli import history
from codewell.history.jobs import JOB_KINDS
from codewell.history.tools import TOOLS

CAPABILITY = Capability(
    name="history",
    routes=routes.routes,
    pages=pages.routes,
    tools=TOOLS,
    commands=[history],
    templates=templates_of(__file__),
    jobs=JOB_KINDS,
)
