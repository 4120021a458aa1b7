"""Wiring each capability into a runtime, in one readable list (composition root for non-HTTP parts).

A capability's `setup(runtime)` registers what it contributes at run time: background loops
(`runtime.background`), listeners on other capabilities' services (e.g. "repository synced"), readiness
checks. It must be idempotent and cheap: it runs for every `codewell` command and every app.
"""

from __future__ import annotations

from collections.abc import Callable

from codewell.analytics.setup import setup as analytics_setup
from codewell.auth.providers.setup import setup as auth_providers_setup
from codewell.evaluator.setup import setup as evaluator_setup
from codewell.history.setup import setup as history_setup
from codewell.oauth.setup import setup as oauth_setup
from codewell.repos.setup import setup as repos_setup
from codewell.runtime import Runtime
from codewell.search.setup import setup as search_setup

Setup = Callable[[Runtime], None]


def setup_functions() -> list[Setup]:
    """Every capability's setup, in dependency order."""
    return [
        repos_setup,
        search_setup,
        history_setup,
        oauth_setup,
        evaluator_setup,
        auth_providers_setup,
        analytics_setup,
    ]


def setup_all(runtime: Runtime) -> None:
    if runtime.capabilities_ready:
        return
    for setup in setup_functions():
        setup(runtime)
    runtime.capabilities_ready = True
