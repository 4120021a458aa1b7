"""What a capability contributes to the house, declared once in `codewell/<capability>/capability.py`.

The composition roots (`codewell.app` for HTTP, `codewell.cli.main` for the command line) read the one list in
`codewell.capabilities` and nothing else: routes, pages, middleware, MCP tools, commands, first-run steps,
readiness checks and template folders all come from these entries. A new capability plugs in by writing its
`capability.py` and adding one line to that list (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import click
    from starlette.middleware import Middleware
    from starlette.routing import BaseRoute

    from codewell.core.tools import ToolSpec
    from codewell.runtime import Runtime

Setup = Callable[["Runtime"], None]
RouteFactory = Callable[["Runtime"], "Sequence[BaseRoute]"]
MiddlewareFactory = Callable[["Runtime"], "Sequence[Middleware]"]
# Whether a registered tool can be used right now (e.g. code_finder needs a configured model).
ToolAvailability = Callable[["Runtime"], bool]
# A first-run step of `codewell serve`: gets the runtime and whether demo data was asked for, returns lines to print.
BootstrapStep = Callable[["Runtime", bool], list[str]]
# A readiness check returns None when fine, or a short reason (shown by /readyz).
ReadinessCheck = Callable[["Runtime"], str | None]


@dataclass(frozen=True, slots=True)
class Capability:
    """One capability's contributions; every field is optional except the name."""

    name: str
    # Registers run-time wiring: background loops, listeners on other services, providers (idempotent, cheap).
    setup: Setup | None = None
    # JSON/CSV/protocol endpoints and server-rendered pages, in the order they are matched.
    routes: RouteFactory | None = None
    pages: RouteFactory | None = None
    # ASGI middleware, outermost first, placed inside the request-context middleware.
    middleware: MiddlewareFactory | None = None
    tools: Sequence[ToolSpec] = ()
    tool_available: Mapping[str, ToolAvailability] = field(default_factory=dict)
    commands: Sequence[click.Command] = ()
    bootstrap: Sequence[BootstrapStep] = ()
    readiness: Sequence[tuple[str, ReadinessCheck]] = ()
    # A folder of Jinja2 templates (files under a sub-folder named after the capability, to avoid clashes).
    templates: Path | None = None


def templates_of(module_file: str) -> Path:
    """The `templates/` folder beside a capability's `capability.py` (pass `__file__`)."""
    return Path(module_file).parent / "templates"
