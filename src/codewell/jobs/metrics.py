"""Prometheus metrics of the job queue (exposed on /metrics): counters of this process, and queue depth read
from the database when /metrics is scraped (so every web replica reports the same, shared queue)."""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from prometheus_client import REGISTRY, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

ENQUEUED = Counter(
    "codewell_jobs_enqueued_total", "Jobs enqueued (or superseding a queued one) by this process.", ["kind"]
)
CLAIMED = Counter("codewell_jobs_claimed_total", "Jobs claimed by this process.", ["kind"])
FINISHED = Counter(
    "codewell_jobs_finished_total", "Job attempts finished by this process, by outcome.", ["kind", "outcome"]
)
DURATION = Histogram(
    "codewell_job_duration_seconds",
    "Wall time of job attempts in this process.",
    ["kind"],
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120, 600, 3600),
)


class QueueCollector(Collector):
    """Queue depth per kind and state, and the age of the oldest due job, read at scrape time."""

    def __init__(self) -> None:
        self._source: Callable[[], Sequence[Any]] | None = None

    def use(self, source: Callable[[], Sequence[Any]]) -> None:
        """Read stats through `source` (the bound `JobService.queue_stats` of the newest runtime, held weakly)."""
        method = weakref.WeakMethod(source)

        def read() -> Sequence[Any]:
            bound = method()
            return bound() if bound is not None else []

        self._source = read

    def collect(self) -> Iterator[GaugeMetricFamily]:
        jobs = GaugeMetricFamily("codewell_jobs", "Jobs in the queue by kind and state.", labels=["kind", "state"])
        oldest = GaugeMetricFamily(
            "codewell_jobs_oldest_queued_seconds", "Age of the oldest due queued job, by kind.", labels=["kind"]
        )
        stats: Sequence[Any] = []
        if self._source is not None:
            try:
                stats = self._source()
            except Exception:  # a scrape must not fail because the database is briefly unreachable
                log.exception("reading job queue metrics failed")
        for s in stats:
            jobs.add_metric([s.kind, "queued"], s.queued)
            jobs.add_metric([s.kind, "running"], s.running)
            jobs.add_metric([s.kind, "failed"], s.failed)
            oldest.add_metric([s.kind], s.oldest_queued_seconds or 0.0)
        yield jobs
        yield oldest


QUEUE = QueueCollector()
REGISTRY.register(QUEUE)
