"""Wiring of the jobs capability: the job runner as a background task of `codewell serve`, queue metrics."""

from __future__ import annotations

import asyncio

from codewell.jobs import metrics
from codewell.jobs.children import WorkerChildren
from codewell.jobs.runner import JobRunner
from codewell.jobs.service import JobService
from codewell.runtime import Runtime


async def run_jobs(runtime: Runtime) -> None:
    """Background task of `codewell serve`: run every job kind in this process's threads and in its worker
    child processes (unless `--no-jobs`)."""
    if not runtime.run_jobs:
        return
    kinds = None
    if runtime.job_processes > 0:
        # The worker processes take the memory-hungry kinds: the web process stays small.
        kinds = frozenset(k.name for k in runtime.get(JobService).kinds.values() if not k.isolated)
    runner = JobRunner(runtime, role="serve", kinds=kinds, concurrency=runtime.job_threads)
    children = WorkerChildren(runtime, runtime.job_processes, runtime.job_threads)
    await asyncio.to_thread(runner.start)
    await asyncio.to_thread(children.start)
    try:
        while True:
            await asyncio.sleep(3600)
    finally:
        # Together: the children finish their running jobs while this process's threads finish theirs.
        children.terminate()
        await asyncio.to_thread(runner.stop)
        await asyncio.to_thread(children.stop)


def setup(runtime: Runtime) -> None:
    metrics.QUEUE.use(runtime.get(JobService).queue_stats)
    if not any(name == "jobs" for name, _ in runtime.background):
        runtime.background.append(("jobs", run_jobs))
