"""Prometheus metrics of the evaluator (exposed on /metrics)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

EVALUATIONS = Counter(
    "codewell_evaluator_runs_total", "Evaluator scripts run, by outcome (ok or the error kind).", ["outcome"]
)
EVALUATION_SECONDS = Histogram(
    "codewell_evaluator_run_duration_seconds",
    "Wall time of evaluator scripts, host calls included.",
    buckets=(0.005, 0.02, 0.1, 0.5, 1, 2.5, 5, 10, 30),
)
WORKERS_RECYCLED = Counter(
    "codewell_evaluator_workers_recycled_total", "Evaluator worker processes replaced after a limit or crash."
)
