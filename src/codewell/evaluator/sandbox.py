"""The Lua environment of one evaluation: a fresh lupa runtime, the whitelisted globals, in-process limits.

This module runs inside the worker child process (see `worker.py`) and imports nothing but the standard
library and lupa: the child never gets database or service access. Host functions (`search`, `read_file`)
are answered by a `Host` callback, which the worker implements by asking the parent over a pipe.

Limits enforced here (instructions, memory, CPU time, output and result size) stop ordinary scripts with a
clear error. They cannot interrupt a single long C call (a pathological `string.find` pattern): the worker
process's RLIMIT_CPU/RLIMIT_AS and the parent's kill timer cover that.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lupa.lua54 as lupa

LUA_SOURCE = (Path(__file__).parent / "sandbox.lua").read_text(encoding="utf-8")

# Host(name, args) -> (status, value, kind): status "ok" returns `value` (JSON-like data) to the script,
# "error" raises `value` (a message) as a Lua error the script may catch, "limit" stops the script with
# the error kind `kind` and message `value`.
HostReply = tuple[str, Any, str]
Host = Callable[[str, list[Any]], HostReply]


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """Per-script limits enforced inside the Lua runtime."""

    max_instructions: int = 100_000_000
    max_memory: int = 64 * 1024 * 1024
    cpu_seconds: float = 3.0
    max_output: int = 64 * 1024
    max_result: int = 256 * 1024
    max_depth: int = 64
    # Bytes of one string argument to search/read_file (a query is at most 16,384 characters anyway).
    max_argument: int = 64 * 1024
    # The hook runs every `hook_every` VM instructions: small enough to stop loops promptly, large enough
    # that counting costs little.
    hook_every: int = 1000

    def as_dict(self) -> dict[str, float]:
        return {
            "max_instructions": self.max_instructions,
            "max_memory": self.max_memory,
            "cpu_seconds": self.cpu_seconds,
            "max_output": self.max_output,
            "max_result": self.max_result,
            "max_depth": self.max_depth,
            "max_argument": self.max_argument,
            "hook_every": self.hook_every,
        }


@dataclass(frozen=True, slots=True)
class SandboxOutcome:
    """What a script did: kind "ok" with `result` (JSON text), or an error kind with message and line."""

    kind: str
    message: str | None = None
    line: int | None = None
    traceback: list[str] = field(default_factory=list)
    result: str | None = None
    output: str = ""
    instructions: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "message": self.message,
            "line": self.line,
            "traceback": self.traceback,
            "result": self.result,
            "output": self.output,
            "instructions": self.instructions,
        }


def _deny_attributes(obj: object, name: object, is_setting: bool) -> str:
    # No Python object is ever handed to a script, but if one leaked it would expose nothing.
    raise AttributeError("access to Python objects is not allowed")


def new_runtime(max_memory: int) -> Any:
    """A Lua 5.4 runtime with no Python bridge: no python.eval, no builtins, no attribute access."""
    runtime = lupa.LuaRuntime(
        max_memory=max_memory,
        register_eval=False,
        register_builtins=False,
        unpack_returned_tuples=True,
        attribute_filter=_deny_attributes,
    )
    runtime.execute("python = nil")
    return runtime


def _to_lua(lua: Any, value: Any) -> Any:
    if isinstance(value, dict | list | tuple):
        return lua.table_from(value, recursive=True)
    return value


def run_script(source: str, limits: SandboxLimits, host: Host) -> SandboxOutcome:
    """Run `source` in a fresh runtime; never raises for anything the script does."""
    lua = new_runtime(limits.max_memory)

    def bridge(name: str, *args: Any) -> HostReply:
        # Called from Lua: must never raise, or the Python exception object would reach the script.
        try:
            status, value, kind = host(name, list(args))
            return status, _to_lua(lua, value) if status == "ok" else value, kind
        except lupa.LuaMemoryError:
            return "limit", f"the script exceeded the memory limit of {limits.max_memory} bytes", "memory_limit"
        except Exception:
            return "error", f"{name}: internal error", ""

    try:
        run = lua.execute(LUA_SOURCE, name="=sandbox", mode="t")
        report = run(source, bridge, lua.table_from(limits.as_dict()))
    except lupa.LuaMemoryError:
        return SandboxOutcome(
            kind="memory_limit", message=f"the script exceeded the memory limit of {limits.max_memory} bytes"
        )
    return SandboxOutcome(
        kind=str(report["kind"]),
        message=None if report["message"] is None else str(report["message"]),
        line=None if report["line"] is None else int(report["line"]),
        traceback=[str(frame) for frame in report["traceback"].values()],
        result=None if report["result"] is None else str(report["result"]),
        output=str(report["output"]),
        instructions=int(report["instructions"]),
    )
