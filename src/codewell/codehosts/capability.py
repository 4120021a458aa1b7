"""The codehosts capability: code host connections, repositories and permissions from them (docs/codehosts.md)."""

from __future__ import annotations

from codewell.capability import Capability, templates_of
from codewell.codehosts import pages, routes
from codewell.codehosts.cli import codehosts
from codewell.codehosts.jobs import JOB_KINDS
from codewell.codehosts.setup import setup

CAPABILITY = Capability(
    name="codehosts",
    setup=setup,
    routes=routes.routes,
    pages=pages.pages,
    commands=[codehosts],
    templates=templates_of(__file__),
    jobs=JOB_KINDS,
)
