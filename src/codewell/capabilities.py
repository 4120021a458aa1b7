"""Wiring each capability into a runtime, in one readable list (composition root for non-HTTP parts).

A capability's `setup(runtime)` registers what it contributes at run time: background loops
(`runtime.background`), listeners on other capabilities' services (e.g. "repository synced"), readiness
checks. It must be idempotent and cheap: it runs for every `codewell` command and every app.
"""

from __future__ import annotations

from collections.abc import Callable

from codewell.runtime import Runtime

Setup = Callable[[Runtime], None]


def setup_functions() -> list[Setup]:
    """Every capability's setup, in dependency order."""
    return []


def setup_all(runtime: Runtime) -> None:
    if runtime.capabilities_ready:
        return
    for setup in setup_functions():
        setup(runtime)
    runtime.capabilities_ready = True
