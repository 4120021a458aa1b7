"""EvaluatorService: run a caller's Lua script over search results, in a sandboxed worker process.

`run(actor, script)` never lets a script affect the server: the script runs in a warm worker process
(`pool.py`) with in-Lua limits (`sandbox.py`), process limits and a kill timer. The worker has no database
or service access; its `search` and `read_file` calls come back here and run with the caller's actor, so a
script sees exactly the repositories its caller may read, under per-run limits on calls and bytes.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Self

from codewell.core.errors import CodewellError, InvalidInput
from codewell.evaluator.metrics import EVALUATION_SECONDS, EVALUATIONS, WORKERS_RECYCLED
from codewell.evaluator.pool import RunLimits, WorkerDied, WorkerPool
from codewell.evaluator.sandbox import SandboxLimits
from codewell.repos.service import RepoService
from codewell.search.query.parser import parse_query
from codewell.search.service import DEFAULT_COUNT, SearchService

if TYPE_CHECKING:
    from codewell.core.actors import Actor
    from codewell.runtime import Runtime

log = logging.getLogger(__name__)

# Outcomes after which the worker process is known to be in its initial state: every run gets a fresh
# Lua runtime, so a script error leaves nothing behind. Any limit or crash recycles the process.
CLEAN_KINDS = frozenset({"ok", "syntax_error", "runtime_error", "result_error"})

# The smallest JSON a matching line costs the script ({"line":1,"text":""} plus its share of the file).
MIN_MATCH_BYTES = 32

HINTS = {
    "syntax_error": "fix the Lua 5.4 syntax at the reported line",
    "runtime_error": "the error was raised at the reported line; pcall(f, ...) catches errors you expect",
    "stack_overflow": "recursion is too deep: rewrite the recursion as a loop",
    "instruction_limit": "the script ran too many steps: avoid unbounded loops, and narrow searches with "
    "repo:, file: or count: filters",
    "time_limit": "the script ran too long; a single string.find/match/gsub with a heavily backtracking "
    "pattern (many '.-' or '.*') on long text cannot be interrupted early: use plain find "
    "(string.find(s, word, 1, true)) or simpler patterns",
    "memory_limit": "the script used too much memory: keep counts or the first N items instead of whole "
    "results, and avoid building huge strings or tables",
    "output_limit": "print less: print summaries, or return a table instead",
    "result_limit": "return a summary (counts, the first N items) instead of everything",
    "result_error": "return only nil, booleans, numbers, strings and tables of them (no functions, cycles, "
    "or keys other than strings and numbers)",
    "call_limit": "make fewer, broader calls: one search with repo:/file: filters instead of many",
    "crashed": "the script's worker process failed; retry, and report the script if it happens again",
}


@dataclass(frozen=True, slots=True)
class EvaluatorLimits:
    """Everything one evaluation may use. Defaults suit interactive agent use."""

    max_script_bytes: int = 64 * 1024
    sandbox: SandboxLimits = field(default_factory=SandboxLimits)
    # Seconds of script execution (wall clock, host calls excluded); the kill timer adds a short grace.
    timeout: float = 3.0
    # Seconds for the whole evaluation including search and read_file calls.
    total_timeout: float = 30.0
    max_search_calls: int = 20
    max_read_file_calls: int = 100
    # JSON bytes returned by search and read_file together, over one run.
    max_call_bytes: int = 8 * 1024 * 1024
    # How long a caller waits for a free worker before getting Unavailable.
    acquire_timeout: float = 10.0
    # Limits and crashes always replace the worker process. Plain script errors (syntax, runtime, result
    # conversion; escape attempts end as runtime errors) replace it too by default (issue #10 asks for it):
    # every script gets a fresh Lua state anyway, so False is safe where respawn cost matters.
    recycle_on_script_error: bool = True

    def run_limits(self) -> RunLimits:
        return RunLimits(sandbox=self.sandbox, timeout=self.timeout, total_timeout=self.total_timeout)


@dataclass(frozen=True, slots=True)
class EvaluationError:
    """Why a script failed: `kind` (syntax_error, runtime_error, instruction_limit, ...), message, line."""

    kind: str
    message: str
    line: int | None = None
    hint: str = ""
    traceback: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "message": self.message,
            "line": self.line,
            "hint": self.hint,
            "traceback": list(self.traceback),
        }


@dataclass(frozen=True, slots=True)
class EvaluationResult:
    """A finished evaluation: the returned value (JSON data) or an error, plus captured print output."""

    value: Any
    output: str
    error: EvaluationError | None
    duration_ms: float
    search_calls: int = 0
    read_file_calls: int = 0
    instructions: int = 0
    worker_recycled: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape of the REST API and the tool's structuredContent."""
        return {
            "ok": self.ok,
            "result": self.value,
            "output": self.output,
            "error": self.error.as_dict() if self.error else None,
            "stats": {
                "durationMs": round(self.duration_ms, 1),
                "searchCalls": self.search_calls,
                "readFileCalls": self.read_file_calls,
                "instructions": self.instructions,
            },
        }


@dataclass(slots=True)
class _CallBudget:
    """Host calls of one run: counted and size-checked here, in the parent, where the limits are trusted."""

    limits: EvaluatorLimits
    search_calls: int = 0
    read_file_calls: int = 0
    bytes: int = 0

    def count(self, name: str) -> dict[str, Any] | None:
        """A limit reply if one more call to `name` is over the limit, else None (and the call is counted)."""
        if name == "search":
            self.search_calls += 1
            if self.search_calls > self.limits.max_search_calls:
                return _limit(f"the script called search more than {self.limits.max_search_calls} times")
        elif name == "read_file":
            self.read_file_calls += 1
            if self.read_file_calls > self.limits.max_read_file_calls:
                return _limit(f"the script called read_file more than {self.limits.max_read_file_calls} times")
        return None

    def remaining(self) -> int:
        return max(0, self.limits.max_call_bytes - self.bytes)

    def charge(self, value: Any) -> dict[str, Any]:
        size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
        self.bytes += size
        if self.bytes > self.limits.max_call_bytes:
            return _limit(f"search and read_file returned more than {self.limits.max_call_bytes} bytes to the script")
        return {"status": "ok", "value": value, "kind": ""}


def _limit(message: str) -> dict[str, Any]:
    return {"status": "limit", "value": message, "kind": "call_limit"}


def search_value(results: Any) -> dict[str, Any]:
    """SearchResults as the script sees them: files (repo, path, commit, language, matches) and info."""
    files = [
        {
            "repo": f.repo,
            "path": f.path,
            "commit": f.commit,
            "language": f.language,
            "matches": [{"line": m.line_number, "text": m.line} for m in f.line_matches],
        }
        for f in results.files
    ]
    info = {
        "matchCount": results.match_count,
        "limitHit": results.limit_hit,
        "timedOut": results.timed_out,
        "skipped": list(results.skipped),
    }
    return {"files": files, "info": info}


def file_value(content: Any) -> dict[str, Any]:
    """FileContent as the script sees it: content and lines (with their range), or binary = true."""
    lines = list(content.lines)
    return {
        "repo": content.repo,
        "path": content.path,
        "commit": content.commit,
        "binary": content.binary,
        "content": "\n".join(lines) + ("\n" if lines else ""),
        "lines": lines,
        "startLine": content.start_line,
        "endLine": content.start_line + len(lines) - 1 if lines else content.start_line - 1,
        "totalLines": content.total_lines,
        "truncated": content.truncated,
        "notice": content.notice or "",
    }


class EvaluatorService:
    """Runs scripts; obtain with `runtime.get(EvaluatorService)`."""

    def __init__(self, runtime: Runtime, limits: EvaluatorLimits | None = None, pool_size: int | None = None) -> None:
        self.runtime = runtime
        self.limits = limits or EvaluatorLimits()
        size = pool_size or max(1, min(4, os.cpu_count() or 1))
        sandbox = self.limits.sandbox
        self.pool = WorkerPool(
            size,
            # The interpreter's own footprint is measured by the worker; this is room for Lua's heap (capped
            # separately by max_memory) plus host data being converted.
            address_space=sandbox.max_memory * 2 + 256 * 1024 * 1024,
            # The outcome frame holds the result JSON as a string (escaping can double it) and the output
            # (control characters escape to six bytes each); a call frame holds at most two string arguments
            # (read_file's repo and path), each refused by the sandbox above max_argument bytes.
            max_frame=max(2 * sandbox.max_result + 6 * sandbox.max_output, 2 * 6 * sandbox.max_argument) + 64 * 1024,
        )

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    def warm(self) -> None:
        """Start the worker processes now rather than on first use."""
        self.pool.warm()

    def close(self) -> None:
        self.pool.close()

    def run(self, actor: Actor, script: str) -> EvaluationResult:
        """Run `script` for `actor`; script problems come back as `result.error`, never as exceptions.

        Raises InvalidInput for an empty or oversized script and Unavailable when no worker frees up in time.
        """
        self._check_script(script)
        started = time.monotonic()
        worker = self.pool.acquire(self.limits.acquire_timeout)
        budget = _CallBudget(self.limits)
        healthy = False
        try:

            def handle(name: str, args: list[Any], deadline: float) -> dict[str, Any]:
                return self._host_call(actor, budget, name, args, deadline)

            outcome = worker.run(script, self.limits.run_limits(), handle)
            kind = outcome.get("kind")
            healthy = kind == "ok" or (kind in CLEAN_KINDS and not self.limits.recycle_on_script_error)
        except WorkerDied as exc:
            outcome = self._died_outcome(exc)
        finally:
            self.pool.release(worker, healthy=healthy)
        result = self._result(outcome, budget, started, recycled=not healthy)
        self._observe(actor, result)
        return result

    @staticmethod
    def _observe(actor: Actor, result: EvaluationResult) -> None:
        outcome = result.error.kind if result.error else "ok"
        EVALUATIONS.labels(outcome).inc()
        EVALUATION_SECONDS.observe(result.duration_ms / 1000)
        if result.worker_recycled:
            WORKERS_RECYCLED.inc()
            # Who hit which limit: the trail an operator needs when one caller keeps stopping workers.
            log.info("evaluator worker recycled after %s (user %s)", outcome, actor.username or actor.kind.value)

    def _check_script(self, script: object) -> None:
        if not isinstance(script, str) or not script.strip():
            raise InvalidInput("the script is empty", hint="pass a Lua script, e.g. \"return #search('foo')\"")
        size = len(script.encode("utf-8"))
        if size > self.limits.max_script_bytes:
            raise InvalidInput(
                f"the script is {size} bytes; the limit is {self.limits.max_script_bytes}",
                hint="scripts should be short programs over search results; move data into search queries",
            )

    def _died_outcome(self, exc: WorkerDied) -> dict[str, Any]:
        seconds = self.limits.timeout
        if exc.kind == "time_limit":
            return {"kind": "time_limit", "message": f"the script exceeded the time limit of {seconds:g} seconds"}
        if exc.kind == "cpu_limit":
            cpu = self.limits.sandbox.cpu_seconds
            return {"kind": "time_limit", "message": f"the script exceeded the CPU time limit of {cpu:g} seconds"}
        log.warning("evaluator worker failed: %s", exc)
        return {"kind": "crashed", "message": "the script's worker process stopped unexpectedly"}

    def _result(
        self, outcome: dict[str, Any], budget: _CallBudget, started: float, *, recycled: bool
    ) -> EvaluationResult:
        kind = str(outcome.get("kind"))
        error = None
        value = None
        if kind == "ok":
            value = json.loads(outcome.get("result") or "null")
        else:
            error = EvaluationError(
                kind=kind,
                message=str(outcome.get("message") or kind.replace("_", " ")),
                line=outcome.get("line"),
                hint=HINTS.get(kind, ""),
                traceback=tuple(outcome.get("traceback") or ()),
            )
        return EvaluationResult(
            value=value,
            output=str(outcome.get("output") or ""),
            error=error,
            duration_ms=(time.monotonic() - started) * 1000,
            search_calls=budget.search_calls,
            read_file_calls=budget.read_file_calls,
            instructions=int(outcome.get("instructions") or 0),
            worker_recycled=recycled,
        )

    # Host calls ---------------------------------------------------------------------------------------

    def _host_call(
        self, actor: Actor, budget: _CallBudget, name: str, args: list[Any], deadline: float
    ) -> dict[str, Any]:
        """Run one search/read_file for the script with the caller's permissions; never raises."""
        try:
            over = budget.count(name)
            if over is not None:
                return over
            if name == "search" and len(args) == 1 and isinstance(args[0], str):
                return budget.charge(self._search(actor, args[0], deadline, budget))
            if name == "read_file" and len(args) == 4:
                return budget.charge(self._read_file(actor, *args))
            return {"status": "error", "value": f"{name}: not a function scripts can call", "kind": ""}
        except CodewellError as exc:
            message = f"{name}: {exc.message}" + (f" ({exc.hint})" if exc.hint else "")
            return {"status": "error", "value": message, "kind": ""}
        except Exception:
            log.exception("evaluator host call %s failed", name)
            return {"status": "error", "value": f"{name}: internal error", "kind": ""}

    def _search(self, actor: Actor, query: str, deadline: float, budget: _CallBudget) -> dict[str, Any]:
        # Never build more matches in this process than the script could still receive: a count:all over a
        # large corpus would otherwise materialize up to a million lines here before the bytes check.
        parsed = parse_query(query)
        cap = max(1, budget.remaining() // MIN_MATCH_BYTES)
        wanted = None if parsed.count_all else (parsed.count or DEFAULT_COUNT)
        count = cap if wanted is None else min(wanted, cap)
        remaining = max(0.1, deadline - time.monotonic())
        results = self.runtime.get(SearchService).search(actor, query, count=count, timeout=remaining)
        return search_value(results)

    def _read_file(self, actor: Actor, repo: Any, path: Any, start: Any, end: Any) -> dict[str, Any]:
        if not isinstance(repo, str) or not isinstance(path, str):
            raise InvalidInput("repository and path must be strings")
        start_line = int(start) if isinstance(start, int) else None
        end_line = int(end) if isinstance(end, int) else None
        content = self.runtime.get(RepoService).read_file(actor, repo, path, start_line, end_line)
        return file_value(content)
