"""The nls capability: natural-language search (BM25 over code chunks) beside the trigram shard."""

from __future__ import annotations

from codewell.capability import Capability
from codewell.nls.cli import nls
from codewell.nls.routes import routes
from codewell.nls.setup import setup
from codewell.nls.tools import TOOLS

CAPABILITY = Capability(name="nls", setup=setup, routes=routes, tools=TOOLS, commands=[nls])
