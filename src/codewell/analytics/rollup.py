"""The daily usage rollup (`usage_daily`): how events are counted, and the portable upserts that keep it.

Every event of a known user adds 1 to `events` of its (user, UTC day, client, language) row, plus 1 to each
counter family it belongs to. An MCP tool call counts as a tool call *and* in the family of its tool (a
`keyword_search` call is also a search), so "Searches" covers every client, as issue #9 asks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Table, delete, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from codewell.analytics.models import UsageDailyRow, UsageUserDayRow, UsageUserMonthRow, UsageUserTotalRow

if TYPE_CHECKING:
    from codewell.analytics.events import UsageEvent

FEATURE_MCP = "mcp"
FEATURE_SEARCH = "search"
FEATURE_CODENAV = "codenav"
FEATURE_DEEPSEARCH = "deepsearch"
FEATURE_CODE_FINDER = "code_finder"

# Counter column → (features counted directly, MCP tool names counted too).
COUNTER_FAMILIES: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "searches": (
        frozenset({FEATURE_SEARCH}),
        frozenset({"keyword_search", "nls_search", "commit_search", "diff_search"}),
    ),
    "codenav": (frozenset({FEATURE_CODENAV}), frozenset({"go_to_definition", "find_references"})),
    "deepsearch": (frozenset({FEATURE_DEEPSEARCH}), frozenset({"deepsearch"})),
    "code_finder": (frozenset({FEATURE_CODE_FINDER}), frozenset({"code_finder"})),
    "tool_calls": (frozenset({FEATURE_MCP}), frozenset()),
}
COUNTERS: tuple[str, ...] = ("events", *COUNTER_FAMILIES, "errors")
Key = tuple[int, str, str, str]

# Characters kept in client and language cells: no CSV delimiter, quote or line break can appear, so the
# reports can put them into a line as they are (issue #9: RFC 4180 and formula-injection safety).
_UNSAFE = re.compile(r"[^A-Za-z0-9 #+._-]+")
_FORMULA_START = "=+-@ "


def clean_client(client: str) -> str:
    """The client's name without its version, lower-cased and CSV-safe: "Claude-Code/2.1.3" → "claude-code"."""
    name = client.split("/", 1)[0].strip().lower()
    return _UNSAFE.sub("", name).lstrip(_FORMULA_START)[:100] or "unknown"


def clean_language(language: str) -> str:
    """The language name restricted to CSV-safe characters, never starting like a formula ("C++" stays)."""
    return _UNSAFE.sub("", language).strip().lstrip(_FORMULA_START)[:50]


def counts_of(feature: str, tool: str, error: str) -> dict[str, int]:
    """The counters one event adds to its rollup row."""
    counts = dict.fromkeys(COUNTERS, 0)
    counts["events"] = 1
    for name, (features, tools) in COUNTER_FAMILIES.items():
        if feature in features or (feature == FEATURE_MCP and tool in tools):
            counts[name] = 1
    counts["errors"] = 1 if error else 0
    return counts


def aggregate(events: Iterable[UsageEvent]) -> dict[Key, list[int]]:
    """Rollup increments for a batch of events (anonymous events are not attributed to anyone: skipped)."""
    totals: dict[Key, list[int]] = {}
    for event in events:
        if event.user_id is None:
            continue
        key = (
            event.user_id,
            event.created_at.strftime("%Y-%m-%d"),
            clean_client(event.client),
            clean_language(event.language),
        )
        counts = counts_of(event.feature, event.tool, event.error)
        row = totals.get(key)
        if row is None:
            totals[key] = [counts[name] for name in COUNTERS]
        else:
            for i, name in enumerate(COUNTERS):
                row[i] += counts[name]
    return totals


def upsert_increments(
    session: Session, table: Table, rows: Sequence[Mapping[str, Any]], counters: Iterable[str]
) -> None:
    """INSERT each row, or add its `counters` to the existing row with the same primary key, atomically.

    Both engines support `INSERT ... ON CONFLICT DO UPDATE`; concurrent writers (several processes) cannot
    lose an increment because the conflict resolution happens inside the database.
    """
    if not rows:
        return
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        pg_stmt = pg_insert(table)
        excluded = pg_stmt.excluded
        keys = [c.name for c in table.primary_key.columns]
        pg_stmt = pg_stmt.on_conflict_do_update(
            index_elements=keys, set_={name: table.c[name] + excluded[name] for name in counters}
        )
        session.execute(pg_stmt, list(rows))
        return
    lite_stmt = sqlite_insert(table)
    excluded_lite = lite_stmt.excluded
    keys = [c.name for c in table.primary_key.columns]
    lite_stmt = lite_stmt.on_conflict_do_update(
        index_elements=keys, set_={name: table.c[name] + excluded_lite[name] for name in counters}
    )
    session.execute(lite_stmt, list(rows))


def apply_rollup(session: Session, totals: Mapping[Key, Sequence[int]], *, coarse: bool = True) -> None:
    """Add aggregated increments to `usage_daily` and (with `coarse`) to its per user-day, user-month and
    user sums, all in the caller's transaction, so every report sees the same events. Rows go in key order so
    that two processes flushing overlapping days lock them in the same order (no deadlock on PostgreSQL)."""
    rows = [
        {"user_id": k[0], "day": k[1], "client": k[2], "language": k[3], **dict(zip(COUNTERS, v, strict=True))}
        for k, v in sorted(totals.items())
    ]
    upsert_increments(session, UsageDailyRow.__table__, rows, COUNTERS)  # type: ignore[arg-type]
    if not coarse:
        return
    days: dict[tuple[int, str], list[int]] = {}
    months: dict[tuple[int, str], list[int]] = {}
    users: dict[int, list[int]] = {}
    for (user_id, day, _client, _language), counts in totals.items():
        for row in (
            days.setdefault((user_id, day), [0] * len(COUNTERS)),
            months.setdefault((user_id, day[:7]), [0] * len(COUNTERS)),
            users.setdefault(user_id, [0] * len(COUNTERS)),
        ):
            for i, n in enumerate(counts):
                row[i] += n
    for table, names, sums in (
        (UsageUserDayRow.__table__, ("user_id", "day"), days),
        (UsageUserMonthRow.__table__, ("user_id", "month"), months),
    ):
        upsert_increments(
            session,
            table,  # type: ignore[arg-type]
            [
                {**dict(zip(names, k, strict=True)), **dict(zip(COUNTERS, v, strict=True))}
                for k, v in sorted(sums.items())
            ],
            COUNTERS,
        )
    upsert_increments(
        session,
        UsageUserTotalRow.__table__,  # type: ignore[arg-type]
        [{"user_id": k, **dict(zip(COUNTERS, v, strict=True))} for k, v in sorted(users.items())],
        COUNTERS,
    )


def rebuild_coarse(session: Session) -> None:
    """Recompute the per user-day, user-month and user sums from `usage_daily` inside the database (seconds
    for millions of rows, instead of a round trip per group), in the caller's transaction."""
    for model in (UsageUserTotalRow, UsageUserMonthRow, UsageUserDayRow):
        session.execute(delete(model))
    sums = ", ".join(f"sum({name})" for name in COUNTERS)
    names = ", ".join(COUNTERS)
    for sql in (
        f"INSERT INTO usage_user_day (user_id, day, {names}) "
        f"SELECT user_id, day, {sums} FROM usage_daily GROUP BY user_id, day",
        f"INSERT INTO usage_user_month (user_id, month, {names}) "
        f"SELECT user_id, substr(day, 1, 7), {sums} FROM usage_user_day GROUP BY user_id, substr(day, 1, 7)",
        f"INSERT INTO usage_user_total (user_id, {names}) "
        f"SELECT user_id, {sums} FROM usage_user_month GROUP BY user_id",
    ):
        session.execute(text(sql))
