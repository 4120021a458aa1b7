"""Recompute the daily usage rollup from the raw events, in constant memory."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from sqlalchemy import ColumnElement, String, case, delete, func, literal_column, select

from codewell.analytics.models import UsageDailyRow, UsageEventRow
from codewell.analytics.rollup import (
    COUNTERS,
    Key,
    apply_rollup,
    clean_client,
    clean_language,
    counts_of,
    rebuild_coarse,
)

if TYPE_CHECKING:
    from codewell.runtime import Runtime

BATCH = 20_000


def _day(dialect: str) -> ColumnElement[Any]:
    """The UTC day of `created_at` as YYYY-MM-DD text (SQLite stores UTC text, PostgreSQL timestamptz)."""
    if dialect == "postgresql":
        return func.to_char(literal_column("usage_events.created_at AT TIME ZONE 'UTC'"), "YYYY-MM-DD")
    return func.substr(UsageEventRow.created_at.cast(String), 1, 10)


def rebuild_rollup(runtime: Runtime) -> int:
    """Replace `usage_daily` (and its coarser sums) with the aggregation of every row of `usage_events` (one
    transaction, so reports see the old or the new rollup, never half); returns the number of events counted.

    The database groups the raw events first (by user, day, raw client and language, feature, tool and
    failure), so Python only cleans and counts groups, not events.
    """
    e = UsageEventRow
    failed = case((e.error != "", 1), else_=0)
    day = _day(runtime.db.engine.dialect.name)
    keys = (e.user_id, day, e.client, e.language, e.feature, e.tool, failed)
    stmt = select(*keys, func.count()).where(e.user_id.is_not(None)).group_by(*keys)
    total = 0
    with runtime.db.session() as session:
        session.execute(delete(UsageDailyRow))
        with runtime.db.engine.connect() as reader:
            result = reader.execution_options(stream_results=True, yield_per=BATCH).execute(stmt)
            for groups in result.partitions(BATCH):
                totals = _fold(groups)
                apply_rollup(session, totals, coarse=False)
                total += sum(v[0] for v in totals.values())
        rebuild_coarse(session)
    return total


def _fold(groups: Iterable[Any]) -> dict[Key, list[int]]:
    """Rollup increments for grouped raw events: (user, day, client, language, feature, tool, failed, n)."""
    totals: dict[Key, list[int]] = {}
    for user_id, day, client, language, feature, tool, failed, n in groups:
        key = (user_id, day, clean_client(client), clean_language(language))
        counts = counts_of(feature, tool, "x" if failed else "")
        row = totals.setdefault(key, [0] * len(COUNTERS))
        for i, name in enumerate(COUNTERS):
            row[i] += counts[name] * n
    return totals
