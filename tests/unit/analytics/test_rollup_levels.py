"""The per user-day, user-month and user rollups (analytics_0003): every coarser report read from them equals
the finest report summed in Python, incrementally and after a rebuild, with and without date filters."""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta

import pytest

from codewell.analytics.events import UsageEvent, UsageRecorder, record_usage
from codewell.analytics.rebuild import rebuild_rollup
from codewell.analytics.service import AnalyticsService, Granularity, ReportRequest
from codewell.runtime import Runtime

pytestmark = pytest.mark.database

FINEST = Granularity.BY_USER_DAY_CLIENT_LANGUAGE


def report(runtime: Runtime, grain: Granularity, start: date | None = None, end: date | None = None) -> str:
    service = runtime.get(AnalyticsService)
    return b"".join(service._stream(ReportRequest(grain, start, end), {})).decode()


def summed(finest: str, grain: Granularity) -> list[list[str]]:
    """The coarser report computed from the finest one: group its lines and add the counters."""
    totals: dict[tuple[str, ...], list[int]] = defaultdict(lambda: [0] * 7)
    for line in list(csv.reader(io.StringIO(finest)))[1:]:
        user, day = line[:4], line[5]
        key = {
            Granularity.BY_USER: (*user,),
            Granularity.BY_USER_MONTH: (*user, day[:7]),
            Granularity.BY_USER_DAY: (*user, day),
        }[grain]
        for i, n in enumerate(line[7:]):
            totals[key][i] += int(n)
    return [[*k, *map(str, v)] for k, v in sorted(totals.items(), key=lambda kv: (int(kv[0][0]), kv[0][1:]))]


@pytest.fixture
def spread(runtime: Runtime) -> Runtime:
    """600 events of 7 users over ~3 months, several clients and languages, recorded in several batches."""
    start = datetime(2026, 1, 20, tzinfo=UTC)
    for i in range(600):
        record_usage(
            runtime,
            UsageEvent(
                i % 7 + 1,
                ["web", "cursor/1", "claude-code/2"][i % 3],
                ["search", "mcp", "codenav", "deepsearch"][i % 4],
                tool=["keyword_search", "read_file"][i % 2],
                language=["Go", "", "C++"][i % 5 % 3],
                error="x" if i % 13 == 0 else "",
                created_at=start + timedelta(hours=i * 3.7),
            ),
        )
        if i % 150 == 149:
            runtime.get(UsageRecorder).flush()
    runtime.get(UsageRecorder).flush()
    return runtime


RANGES = [(None, None), (date(2026, 2, 10), None), (None, date(2026, 3, 3)), (date(2026, 2, 14), date(2026, 3, 16))]


@pytest.mark.parametrize("grain", [Granularity.BY_USER, Granularity.BY_USER_MONTH, Granularity.BY_USER_DAY])
@pytest.mark.parametrize(("start", "end"), RANGES)
def test_coarser_reports_are_the_finest_summed(
    spread: Runtime, grain: Granularity, start: date | None, end: date | None
) -> None:
    finest = report(spread, FINEST, start, end)
    coarse = list(csv.reader(io.StringIO(report(spread, grain, start, end))))
    assert coarse[1:] == summed(finest, grain)
    assert len(coarse) > 2


def test_rebuild_recomputes_every_level_identically(spread: Runtime) -> None:
    before = {g: report(spread, g) for g in Granularity}
    assert rebuild_rollup(spread) == 600
    assert {g: report(spread, g) for g in Granularity} == before
    # The unfiltered by_user report reads usage_user_total: it covers all 600 events.
    assert sum(int(line[4]) for line in list(csv.reader(io.StringIO(before[Granularity.BY_USER])))[1:]) == 600


def test_lines_end_with_crlf_and_grain_cells_come_first(spread: Runtime) -> None:
    text = report(spread, FINEST, date(2026, 1, 20), date(2026, 1, 20))
    lines = text.split("\r\n")
    assert lines[-1] == ""
    assert all("\n" not in line for line in lines)
    first = lines[1].split(",")
    assert first[:4] == ["1", "", "", "false"]  # no account for user 1: the ID only, not active
    assert first[4] in {"web", "cursor", "claude-code"}
    assert first[5] == "2026-01-20"
