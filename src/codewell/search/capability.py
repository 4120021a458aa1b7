"""The search capability: trigram shards, the query language, keyword search."""

from __future__ import annotations

from codewell.capability import Capability
from codewell.search import routes
from codewell.search.cli import index, search
from codewell.search.jobs import JOB_KINDS
from codewell.search.setup import setup
from codewell.search.tools import TOOLS

CAPABILITY = Capability(
    name="search", setup=setup, routes=routes.routes, tools=TOOLS, commands=[index, search], jobs=JOB_KINDS
)
