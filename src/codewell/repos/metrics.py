"""Prometheus metrics of repository mirroring (exposed on /metrics)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from codewell.repos.git import LIMITER

SYNCS = Counter("codewell_repo_syncs_total", "Repository syncs (clone or fetch) by result.", ["result"])
SYNC_SECONDS = Histogram(
    "codewell_repo_sync_duration_seconds",
    "Wall time of repository syncs.",
    buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800),
)
GIT_PROCESSES = Gauge("codewell_git_processes", "git subprocesses running now.")
GIT_PROCESSES.set_function(lambda: LIMITER.active)
