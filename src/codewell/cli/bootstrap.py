"""First-run steps of `codewell serve`: each capability may add one (first site admin, demo repositories)."""

from __future__ import annotations

from collections.abc import Callable

from codewell.runtime import Runtime

# Each step gets the runtime and whether demo data was asked for, and returns lines to print once.
BootstrapStep = Callable[[Runtime, bool], list[str]]


def bootstrap_steps() -> list[BootstrapStep]:
    """The steps in the order they run."""
    return []


def run_bootstrap(runtime: Runtime, demo: bool) -> list[str]:
    runtime.db.instance_id()
    lines: list[str] = []
    for step in bootstrap_steps():
        lines.extend(step(runtime, demo))
    return lines
