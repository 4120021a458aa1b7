"""First-run steps of `codewell serve`: each capability may add one (first site admin, demo repositories)."""

from __future__ import annotations

from collections.abc import Callable

from codewell.runtime import Runtime

# Each step gets the runtime and whether demo data was asked for, and returns lines to print once.
BootstrapStep = Callable[[Runtime, bool], list[str]]


def bootstrap_steps() -> list[BootstrapStep]:
    """The steps in the order they run."""
    from codewell.accounts.bootstrap import first_admin_step
    from codewell.repos.bootstrap import demo_repos_step

    return [first_admin_step, demo_repos_step]


def run_bootstrap(runtime: Runtime, demo: bool) -> list[str]:
    runtime.db.instance_id()
    lines: list[str] = []
    for step in bootstrap_steps():
        lines.extend(step(runtime, demo))
    return lines
