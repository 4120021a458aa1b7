"""The licensing capability: plans, license keys, the trial, feature gates and metering (docs/licensing.md)."""

from __future__ import annotations

from codewell.capability import Capability, templates_of
from codewell.licensing import routes
from codewell.licensing.cli import COMMANDS
from codewell.licensing.jobs import JOB_KINDS
from codewell.licensing.setup import setup

CAPABILITY = Capability(
    name="licensing",
    setup=setup,
    routes=routes.routes,
    pages=routes.pages,
    commands=COMMANDS,
    templates=templates_of(__file__),
    jobs=JOB_KINDS,
)
