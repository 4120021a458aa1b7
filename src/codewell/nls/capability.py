"""The nls capability: natural-language search (BM25 over code chunks) beside the trigram shard."""

from __future__ import annotations

from codewell.capability import Capability
from codewell.nls.cli import nls
from codewell.nls.jobs import JOB_KINDS
from codewell.nls.routes import routes
from codewell.nls.tools import TOOLS

CAPABILITY = Capability(name="nls", routes=routes, tools=TOOLS, commands=[nls], jobs=JOB_KINDS)
