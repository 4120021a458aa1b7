"""The evaluator capability: sandboxed Lua scripts over search results."""

from __future__ import annotations

from codewell.capability import Capability
from codewell.evaluator import routes
from codewell.evaluator.setup import setup
from codewell.evaluator.tools import TOOLS

CAPABILITY = Capability(name="evaluator", setup=setup, routes=routes.routes, tools=TOOLS)
