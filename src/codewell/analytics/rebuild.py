"""Recompute the daily usage rollup from the raw events, in constant memory."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import delete, select

from codewell.analytics.events import UsageEvent
from codewell.analytics.models import UsageDailyRow, UsageEventRow
from codewell.analytics.rollup import aggregate, apply_rollup

if TYPE_CHECKING:
    from codewell.runtime import Runtime

BATCH = 20_000


def rebuild_rollup(runtime: Runtime) -> int:
    """Replace `usage_daily` with the aggregation of every row of `usage_events` (one transaction, so
    reports see the old or the new rollup, never half); returns the number of events read."""
    columns = (
        UsageEventRow.user_id,
        UsageEventRow.client,
        UsageEventRow.feature,
        UsageEventRow.tool,
        UsageEventRow.error,
        UsageEventRow.language,
        UsageEventRow.created_at,
    )
    total = 0
    with runtime.db.session() as session:
        session.execute(delete(UsageDailyRow))
        with runtime.db.engine.connect() as reader:
            stmt = select(*columns).where(UsageEventRow.user_id.is_not(None)).order_by(UsageEventRow.id)
            result = reader.execution_options(stream_results=True, yield_per=BATCH).execute(stmt)
            for rows in result.partitions(BATCH):
                events = [
                    UsageEvent(user_id=u, client=c, feature=f, tool=t, error=e, language=lang, created_at=at)
                    for u, c, f, t, e, lang, at in rows
                ]
                apply_rollup(session, aggregate(events))
                total += len(events)
    return total
