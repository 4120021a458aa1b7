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
from typing import TYPE_CHECKING, Any, Protocol

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


class JobRun(Protocol):
    """One claimed job as its handler sees it (codewell.jobs runs it; docs/architecture.md "Jobs")."""

    @property
    def id(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def resource(self) -> str: ...
    @property
    def payload(self) -> Mapping[str, Any]: ...
    @property
    def attempt(self) -> int: ...
    @property
    def priority(self) -> int:
        """The job's priority: events it emits inherit it (what a person asked for stays ahead)."""
        ...

    @property
    def cancelled(self) -> bool:
        """True once an operator cancelled the job: the handler stops at its next safe point."""
        ...

    def progress(self, done: int, total: int | None = None, message: str = "") -> None:
        """Report progress (stored on the job row, shown by `codewell jobs` and /site-admin/jobs)."""
        ...


class JobGiveUp(Exception):
    """Raised by a handler: fail the job now with this reason, without retrying it (the capability has its own
    retry schedule, e.g. a repository sync's back-off)."""


# A job's work: raises to fail the attempt (retried with back-off), returns a small JSON-able result or None.
JobHandler = Callable[["Runtime", JobRun], "Mapping[str, Any] | None"]
# Several jobs of one kind at once: returns each job's result by job id (an exception there fails that job alone);
# raising fails every one of them.
BatchHandler = Callable[["Runtime", Sequence[JobRun]], "Mapping[int, Mapping[str, Any] | Exception | None]"]


@dataclass(frozen=True, slots=True)
class JobKind:
    """A kind of background work a capability declares (docs/architecture.md "Jobs" lists every one).

    `on` names the events that enqueue it (emitted in the transaction of the change that causes them, e.g.
    `repo.synced`); `every` makes it a periodic job (one row, re-queued `every` seconds after each run).
    Jobs of kinds with the same `lock` never run at the same time for one resource (search's index and drop
    of a repository), and a queued job is superseded, not duplicated, by a newer one for the same resource.
    """

    name: str
    run: JobHandler
    description: str
    on: tuple[str, ...] = ()
    lock: str | None = None
    every: float | None = None
    # A periodic kind's row is queued with this priority (lower runs first; None: the scheduled priority, behind
    # every event's job). Search's merge needs its turn while thousands of syncs wait, or small shards pile up.
    priority: int | None = None
    max_attempts: int = 5
    lease_seconds: float = 600.0
    # The per-repository stage it is ("mirror", "search", "symbols", "nls", "history"): `codewell repos status`
    # and the repositories page show each stage's latest job.
    stage: str = ""
    # Events enqueue it only while this says so (a feature switched off in the site config enqueues nothing).
    when: Callable[[Runtime], bool] | None = None
    # Builds indexes (CPU and memory: search's merge builds up to ~1 GB): `codewell serve` leaves it to its worker
    # child processes when it has any, so that the web process stays small and answers while thousands of
    # repositories are indexed; its own job threads keep the light kinds (syncs, code-host calls, clean-ups).
    isolated: bool = False
    # Runs for minutes (a deep search answer, a SCIP indexer): a runner gives such kinds at most half of its threads,
    # so that syncs and indexing never wait behind them.
    long_running: bool = False
    # At most this many jobs of the kind at once in one runner (0: no limit). Search's index batches run one at a
    # time per process: the repositories synced while one builds all join the next batch, so a bulk registration
    # makes a few big shards instead of thousands of tiny ones (each costs open files and a merge later).
    per_runner: int = 0
    # Seconds an event's job waits before it is due, so that the jobs of many events can run together (a
    # batching kind collects the repositories synced meanwhile into one shard).
    delay: float = 0.0
    # Jobs cheaper together (many small repositories into one search shard): a runner that claims one claims up
    # to `batch` due jobs of the kind and hands them all to `run_batch` (`run` still serves a lone job).
    batch: int = 1
    run_batch: BatchHandler | None = None
    # Works on what a searcher replica holds (search shards, nls indexes, symbol tables): in a cluster
    # (CODEWELL_SEARCHERS=database) a repository's job runs on the replica that owns the repository
    # (jobs/placement.py), and a periodic one runs once on every replica, over what that replica holds.
    placed: bool = False
    # Who enqueues it besides its events (docs/architecture.md's table): "a push webhook, `codewell repos sync`".
    enqueued_by: str = ""

    @property
    def lock_name(self) -> str:
        return self.lock or self.name


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
    # Background work as durable jobs (codewell.jobs claims and runs them in `serve` or `codewell worker`).
    jobs: Sequence[JobKind] = ()


def templates_of(module_file: str) -> Path:
    """The `templates/` folder beside a capability's `capability.py` (pass `__file__`)."""
    return Path(module_file).parent / "templates"
