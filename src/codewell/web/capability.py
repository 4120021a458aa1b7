"""The web capability: the pages people search and read code with (home, search, repository, tree, file)."""

from __future__ import annotations

from codewell.capability import Capability, templates_of
from codewell.web import pages

CAPABILITY = Capability(name="web", pages=pages.routes, templates=templates_of(__file__))
