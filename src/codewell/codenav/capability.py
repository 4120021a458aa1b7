"""The codenav capability: symbols per repository revision, go_to_definition and find_references."""

from __future__ import annotations

from codewell.capability import Capability
from codewell.codenav.setup import setup
from codewell.codenav.tools import TOOLS

CAPABILITY = Capability(name="codenav", setup=setup, tools=TOOLS)
