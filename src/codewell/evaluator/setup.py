"""Wiring of the evaluator capability: start the warm worker processes when the server starts."""

from __future__ import annotations

import asyncio
import logging

from codewell.evaluator.service import EvaluatorService
from codewell.runtime import Runtime

log = logging.getLogger(__name__)


async def warm_workers(runtime: Runtime) -> None:
    """Start the evaluator's worker pool in the background, so the first script costs no process start."""
    try:
        await asyncio.to_thread(runtime.get(EvaluatorService).warm)
    except Exception:
        # Not fatal: workers are started on first use too, and that reports its own error to the caller.
        log.exception("could not start the evaluator workers")


def setup(runtime: Runtime) -> None:
    """Register the pool warm-up as a background task of `codewell serve` (idempotent per runtime)."""
    if any(name == "evaluator-warm" for name, _ in runtime.background):
        return
    runtime.background.append(("evaluator-warm", warm_workers))
