from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from codewell.core.errors import InvalidInput
from codewell.history.dates import parse_range, parse_when

NOW = datetime(2025, 6, 15, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-05-01", datetime(2024, 5, 1, tzinfo=UTC)),
        ("2024-05-01T10:30:00Z", datetime(2024, 5, 1, 10, 30, tzinfo=UTC)),
        ("2024-05-01T12:30:00+02:00", datetime(2024, 5, 1, 10, 30, tzinfo=UTC)),
        ("2 weeks ago", NOW - timedelta(weeks=2)),
        ("1 month ago", NOW - timedelta(days=30)),
        ("a year ago", NOW - timedelta(days=365)),
        ("3 days ago", NOW - timedelta(days=3)),
        ("yesterday", datetime(2025, 6, 14, tzinfo=UTC)),
        ("now", NOW),
    ],
)
def test_accepted_forms(text: str, expected: datetime) -> None:
    assert parse_when(text, "after", now=NOW) == expected


@pytest.mark.parametrize("text", ["last tuesday", "2024-13-01", "05/01/2024", "two weeks ago", ""])
def test_unparseable_dates_name_the_parameter(text: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_when(text, "before", now=NOW)
    assert "`before`" in info.value.message
    assert info.value.hint is not None
    assert "YYYY-MM-DD" in info.value.hint


def test_reversed_range_is_rejected_naming_both_bounds() -> None:
    with pytest.raises(InvalidInput) as info:
        parse_range("2024-06-01", "2024-01-01", now=NOW)
    assert "`after`" in info.value.message
    assert "`before`" in info.value.message


def test_open_ranges() -> None:
    assert parse_range(None, None) == (None, None)
    assert parse_range("2024-01-01", None, now=NOW) == (datetime(2024, 1, 1, tzinfo=UTC), None)
