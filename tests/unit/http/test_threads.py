"""The request path's worker-thread hop runs the call off the loop, in the caller's context."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from codewell.http import threads

_VALUE: contextvars.ContextVar[str] = contextvars.ContextVar("value", default="unset")


def test_runs_in_another_thread_with_the_callers_context() -> None:
    def call(suffix: str) -> tuple[str, str]:
        return _VALUE.get() + suffix, threading.current_thread().name

    async def main() -> tuple[str, str]:
        _VALUE.set("request")
        return await threads.run_sync(call, "-1")

    value, name = asyncio.run(main())
    assert value == "request-1"
    assert name != threading.main_thread().name


def test_raises_what_the_call_raises() -> None:
    def fail() -> None:
        raise LookupError("nope")

    with pytest.raises(LookupError, match="nope"):
        asyncio.run(threads.run_sync(fail))
