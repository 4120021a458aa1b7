"""The jobs capability's own job: keeping the table small."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from codewell.capability import JobRun
from codewell.jobs.service import JobService

if TYPE_CHECKING:
    from codewell.runtime import Runtime

KEEP_FINISHED = timedelta(days=1)
KEEP_FAILED = timedelta(days=30)


def prune(runtime: Runtime, _job: JobRun) -> Mapping[str, Any]:
    removed = runtime.get(JobService).prune(keep_finished=KEEP_FINISHED, keep_failed=KEEP_FAILED)
    return {"removed": removed}
