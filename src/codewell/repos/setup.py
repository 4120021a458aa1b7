"""Wiring of the repos capability into a runtime: a site config change enqueues a reconcile of `repositories`.

Syncs, the schedule and reconciles are jobs (`repos/jobs.py`), run by `codewell serve` or `codewell worker`.
"""

from __future__ import annotations

from codewell.config import SiteConfig
from codewell.jobs.service import SITE, JobService
from codewell.runtime import Runtime


def setup(runtime: Runtime) -> None:
    """Reconcile `repositories` (as a job, in whichever process runs it) whenever the site config changes."""
    jobs = runtime.get(JobService)

    def config_changed(_config: SiteConfig) -> None:
        jobs.emit("config.changed", SITE)

    runtime.site_config.on_change(config_changed)
