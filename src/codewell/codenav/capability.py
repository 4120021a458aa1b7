"""The codenav capability: symbols per repository revision, go_to_definition and find_references."""

from __future__ import annotations

from codewell.capability import Capability
from codewell.codenav import routes
from codewell.codenav.cli import codeintel
from codewell.codenav.jobs import JOB_KINDS
from codewell.codenav.setup import setup
from codewell.codenav.tools import TOOLS

CAPABILITY = Capability(
    name="codenav", setup=setup, routes=routes.routes, tools=TOOLS, commands=[codeintel], jobs=JOB_KINDS
)
