"""The web capability: the pages people search and read code with (home, search, repository, tree, file),
the account and site-admin hubs, and the pages' static files."""

from __future__ import annotations

from codewell.capability import Capability, templates_of
from codewell.web import admin, pages, settings, static
from codewell.web.setup import setup

CAPABILITY = Capability(
    name="web",
    setup=setup,
    routes=static.routes,
    pages=lambda runtime: [*settings.routes(runtime), *admin.routes(runtime), *pages.routes(runtime)],
    templates=templates_of(__file__),
)
