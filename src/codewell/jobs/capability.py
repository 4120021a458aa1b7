"""The jobs capability: durable background work (the queue every capability's job kinds run through)."""

from __future__ import annotations

from codewell.capability import Capability, JobKind, templates_of
from codewell.jobs import pages
from codewell.jobs.cli import jobs, worker
from codewell.jobs.handlers import prune
from codewell.jobs.setup import setup

CAPABILITY = Capability(
    name="jobs",
    setup=setup,
    pages=pages.pages,
    commands=[jobs, worker],
    templates=templates_of(__file__),
    jobs=[
        JobKind(
            "jobs.prune",
            prune,
            "delete finished jobs after a day and failed ones after 30 days",
            every=600.0,
            lease_seconds=120.0,
        )
    ],
)
