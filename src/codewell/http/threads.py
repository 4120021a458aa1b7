"""The request path's worker-thread hop: a blocking call (a database read, a tool) run off the event loop.

anyio's `to_thread.run_sync` (what Starlette's `run_in_threadpool` calls) costs ~50 µs of the event loop's CPU
per hop (its capacity limiter, cancel scopes, the sniffio and RunVar lookups, a checkpoint); this one is
asyncio's executor hand-off with the caller's context (~20 µs). The event loop's thread is what a loaded server
runs out of first: every request's middleware, routing and response run there, under the GIL. The pool has
anyio's default bound (40 threads). Unlike anyio's, a cancelled caller does not wait for the call to finish
(the thread completes it and its result is dropped): use it for calls that may run on unobserved, not for work
whose cancellation the caller must wait out.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar, TypeVarTuple

__all__ = ["MAX_THREADS", "run_sync"]

MAX_THREADS = 40
_POOL = ThreadPoolExecutor(max_workers=MAX_THREADS, thread_name_prefix="request")

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


async def run_sync(fn: Callable[[*Ts], T], *args: *Ts) -> T:
    """`fn(*args)` in a worker thread, in a copy of the caller's context (its authorization scope, request ID)."""
    context = contextvars.copy_context()

    # The pool's future wrapped directly: `loop.run_in_executor` first asks inspect whether `fn` is a coroutine
    # function, which cost as much as the rest of the hand-off.
    def call() -> T:
        return context.run(fn, *args)

    return await asyncio.wrap_future(_POOL.submit(call))
