"""First-run steps of `codewell serve`: each capability may declare some (first site admin, demo repositories)."""

from __future__ import annotations

from codewell.runtime import Runtime


def run_bootstrap(runtime: Runtime, demo: bool) -> list[str]:
    """Run every capability's first-run steps in the declared order; return the lines to print once."""
    runtime.db.instance_id()
    lines: list[str] = []
    for capability in runtime.capabilities:
        for step in capability.bootstrap:
            lines.extend(step(runtime, demo))
    return lines
