"""Prometheus metrics of codehosts (exposed on /metrics)."""

from __future__ import annotations

from prometheus_client import Counter

# result: accepted (a sync was requested), ignored (another event, or a repository no connection registered),
# ping, unauthorized, malformed, too_large.
WEBHOOKS = Counter(
    "codewell_codehost_webhooks_total", "Code host webhooks received, by host and result.", ["host", "result"]
)
