"""Pure parts of the analytics reports: CSV cells, parameter parsing, instance names, rollup counting."""

from __future__ import annotations

import csv
import io
from datetime import date

import pytest

from codewell.analytics.rollup import clean_client, clean_language, counts_of
from codewell.analytics.service import (
    Granularity,
    csv_cell,
    instance_host,
    parse_granularity,
    parse_range,
    report_header,
)
from codewell.core.errors import InvalidInput


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ("plain", "plain"),
        ("=SUM(A1)", "'=SUM(A1)"),
        ("+1", "'+1"),
        ("-1", "'-1"),
        ("@cmd", "'@cmd"),
        ("\tx", "'\tx"),
        ("\rx", '"\'\rx"'),
        ('a,"b"', '"a,""b"""'),
        ("line\nbreak", '"line\nbreak"'),
        ("", ""),
    ],
)
def test_csv_cells_are_rfc4180_and_never_formulas(value: str, cell: str) -> None:
    assert csv_cell(value) == cell
    parsed = next(csv.reader(io.StringIO(cell + "\r\n"))) if cell else [""]
    assert parsed == [value if not value.startswith(("=", "+", "-", "@", "\t", "\r")) else "'" + value]


def test_dates_are_strict_and_ordered() -> None:
    assert parse_range(None, None) == (None, None)
    assert parse_range("2026-01-31", None) == (date(2026, 1, 31), None)
    assert parse_range("2026-01-31", "2026-01-31") == (date(2026, 1, 31), date(2026, 1, 31))
    for bad in ("2026-02-30", "2026-1-1", "20260101", "2026-01-01T00:00", " 2026-01-01"):
        with pytest.raises(InvalidInput, match="startDate"):
            parse_range(bad, None)
    with pytest.raises(InvalidInput, match=r"startDate .* is after endDate"):
        parse_range("2026-02-01", "2026-01-31")


def test_granularity_defaults_to_the_finest() -> None:
    assert parse_granularity(None) is Granularity.BY_USER_DAY_CLIENT_LANGUAGE
    assert parse_granularity("by_user_month") is Granularity.BY_USER_MONTH
    with pytest.raises(InvalidInput, match="granularity must be one of by_user, "):
        parse_granularity("BY_USER")


def test_headers_follow_the_documented_order() -> None:
    finest = report_header(Granularity.BY_USER_DAY_CLIENT_LANGUAGE)
    assert finest[:7] == (
        "Instance user ID",
        "User Email",
        "Username",
        "Active User",
        "Client Name",
        "Timestamp Date",
        "Language",
    )
    assert "Client Name" not in report_header(Granularity.BY_USER_DAY)
    assert report_header(Granularity.BY_USER_MONTH)[4] == "Timestamp Month"
    assert report_header(Granularity.BY_USER)[4] == "Events"


def test_instance_names() -> None:
    assert instance_host("HTTPS://Code.Example.com:8443/x") == ("code.example.com", 8443)
    assert instance_host("code.example.com") == ("code.example.com", None)
    for bad in ("", "https://", "a b", "code.example.com:99999"):
        with pytest.raises(InvalidInput, match="instanceURL"):
            instance_host(bad)


def test_client_and_language_cells_are_safe_by_construction() -> None:
    assert clean_client("Claude-Code/2.1.3") == "claude-code"
    assert clean_client('=HYPERLINK("x",1),evil\r\n') == "hyperlinkx1evil"
    assert clean_client("") == "unknown"
    assert clean_language("C++") == "C++"
    assert clean_language("-cmd|calc") == "cmdcalc"


def test_mcp_calls_count_as_tool_calls_and_in_their_family() -> None:
    assert counts_of("mcp", "keyword_search", "") == {
        "events": 1,
        "searches": 1,
        "codenav": 0,
        "deepsearch": 0,
        "code_finder": 0,
        "tool_calls": 1,
        "errors": 0,
    }
    assert counts_of("search", "keyword_search", "timeout")["tool_calls"] == 0
    assert counts_of("search", "", "timeout")["errors"] == 1
    assert counts_of("mcp", "read_file", "")["searches"] == 0
