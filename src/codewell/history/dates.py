"""Parsing the `after`/`before` bounds of history queries: dates, ISO timestamps and relative forms."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta

from codewell.core.errors import InvalidInput

_UNITS = {
    "second": timedelta(seconds=1),
    "minute": timedelta(minutes=1),
    "hour": timedelta(hours=1),
    "day": timedelta(days=1),
    "week": timedelta(weeks=1),
    # Calendar-free approximations, as `git log --since="1 month ago"` uses.
    "month": timedelta(days=30),
    "year": timedelta(days=365),
}
_RELATIVE = re.compile(r"^(?P<n>\d+|an?|one)\s+(?P<unit>second|minute|hour|day|week|month|year)s?\s+ago$")
_HINT = "use YYYY-MM-DD, an ISO timestamp (2024-05-01T12:00:00Z) or a relative form like `2 weeks ago`"


def parse_when(value: str, param: str, *, now: datetime | None = None) -> datetime:
    """The UTC instant `value` denotes; a bare date means its start (00:00 UTC). Raise InvalidInput naming `param`."""
    now = now or datetime.now(UTC)
    text = value.strip().lower()
    if text in {"now", "today"}:
        return now if text == "now" else datetime.combine(now.date(), time(), UTC)
    if text == "yesterday":
        return datetime.combine(now.date() - timedelta(days=1), time(), UTC)
    if match := _RELATIVE.match(text):
        raw = match["n"]
        count = 1 if raw in {"a", "an", "one"} else int(raw)
        try:
            return now - count * _UNITS[match["unit"]]
        except OverflowError:
            raise InvalidInput(f"`{param}` is too far in the past: {value!r}", hint=_HINT) from None
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            return datetime.combine(date.fromisoformat(text), time(), UTC)
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"cannot parse `{param}`: {value!r}", hint=_HINT) from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def parse_range(
    after: str | None, before: str | None, *, now: datetime | None = None
) -> tuple[datetime | None, datetime | None]:
    """Both bounds parsed; InvalidInput when `after` is later than `before`."""
    start = parse_when(after, "after", now=now) if after else None
    end = parse_when(before, "before", now=now) if before else None
    if start is not None and end is not None and start > end:
        raise InvalidInput(
            f"`after` ({after}) is later than `before` ({before})",
            hint="swap the two values: `after` is the older bound, `before` the newer",
        )
    return start, end
