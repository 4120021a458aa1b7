"""The analytics capability: usage events and reports, the user registry, credit buckets, analytics tokens."""

from __future__ import annotations

from codewell.analytics import pages, routes
from codewell.analytics.cli import COMMANDS
from codewell.analytics.setup import setup
from codewell.capability import Capability, templates_of

CAPABILITY = Capability(
    name="analytics",
    setup=setup,
    routes=routes.routes,
    pages=pages.routes,
    commands=COMMANDS,
    templates=templates_of(__file__),
)
