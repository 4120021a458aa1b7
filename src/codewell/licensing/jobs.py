"""Licensing's background work as jobs (codewell.jobs): allocating the credits of the key in force.

One periodic row (`licensing.allocate_credits`, every 10 minutes) runs in whichever process claims it
(`codewell serve` without `--no-jobs`, or `codewell worker`), so a new month and a key set in site config get
their buckets without waiting for a metered call. Running it twice, or in two processes at once, allocates
nothing more: `LicensingService.allocate_credits` claims each (month, feature) in `license_credit_allocations`
with one conditional write before it allocates.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from codewell.capability import JobKind, JobRun
from codewell.licensing.service import LicensingService

if TYPE_CHECKING:
    from codewell.runtime import Runtime

ALLOCATION_INTERVAL = 600.0


def allocate_credits(runtime: Runtime, _job: JobRun) -> Mapping[str, Any]:
    made = runtime.get(LicensingService).allocate_credits()
    return {"allocated": {bucket.feature: bucket.amount for bucket in made}} if made else {}


JOB_KINDS: list[JobKind] = [
    JobKind(
        "licensing.allocate_credits",
        allocate_credits,
        "allocate this month's credits of the license key in force (idempotent)",
        every=ALLOCATION_INTERVAL,
        lease_seconds=120.0,
    )
]
