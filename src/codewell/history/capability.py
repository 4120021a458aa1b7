"""The history capability: commit and diff search, revision comparison, contributors."""

from __future__ import annotations

from codewell.capability import Capability
from codewell.history import routes
from codewell.history.cli import history
from codewell.history.setup import setup
from codewell.history.tools import TOOLS

CAPABILITY = Capability(name="history", setup=setup, routes=routes.routes, tools=TOOLS, commands=[history])
