"""The repos capability: mirrors of git repositories, their visibility, contents and sync."""

from __future__ import annotations

from codewell.capability import Capability
from codewell.repos import routes
from codewell.repos.bootstrap import demo_repos_step
from codewell.repos.cli import repos
from codewell.repos.jobs import JOB_KINDS
from codewell.repos.setup import setup
from codewell.repos.tools import TOOLS

CAPABILITY = Capability(
    name="repos",
    setup=setup,
    routes=routes.routes,
    tools=TOOLS,
    commands=[repos],
    bootstrap=[demo_repos_step],
    jobs=JOB_KINDS,
)
