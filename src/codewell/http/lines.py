"""Long files on people's pages, shared by the file view (web) and blame (history): the line range an address
asks for (`?L<a>-<b>`) and the page of PAGE_LINES lines that holds it, with a pager.

A file up to PAGE_LINES lines is shown whole; a longer one PAGE_LINES lines at a time (1-5000, 5001-10000, ...):
one page's table is ~1 MB of HTML that a browser lays out in well under a second. Paged rather than virtualized:
no JavaScript needed, anchors and the browser's find work within the page.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.requests import Request

__all__ = ["PAGE_LINES", "asked_lines", "line_pages", "line_window", "start_at"]

PAGE_LINES = 5000

_LINES_SUFFIX = re.compile(r"\?L(\d+)(?:-(\d+))?$")
_LINES_QUERY = re.compile(r"^L(\d+)(?:-(\d+))?$")


def asked_lines(request: Request, path: str) -> tuple[str, tuple[int, int] | None]:
    """The file path and the highlighted range: `?L<a>-<b>` as a query, or encoded in the path (`%3FL<a>-<b>`,
    as the tools print it, which arrives decoded at the end of the path)."""
    found = _LINES_SUFFIX.search(path)
    if found is not None:
        path = path[: found.start()]
    else:
        found = _LINES_QUERY.match(request.url.query)
    if found is None:
        return path, None
    start = int(found.group(1))
    end = int(found.group(2) or start)
    return path, (min(start, end), max(start, end))


def start_at(request: Request) -> int | None:
    """`?from=N`: the first line of the page asked for (a pager's link)."""
    text = request.query_params.get("from", "")
    return int(text) if text.isdigit() and len(text) < 10 else None


def line_window(total: int, hit: tuple[int, int] | None, start: int | None) -> tuple[int, int]:
    """The lines (first, last) a page shows: the whole file up to PAGE_LINES, else the PAGE_LINES-line page
    (1-5000, 5001-10000, ...) holding the highlighted line, or `start` (`?from=N`), or the first."""
    if total <= PAGE_LINES:
        return 1, total
    wanted = hit[0] if hit is not None else (start or 1)
    wanted = min(max(wanted, 1), total)
    first = (wanted - 1) // PAGE_LINES * PAGE_LINES + 1
    return first, min(total, first + PAGE_LINES - 1)


def line_pages(base: str, total: int, window: tuple[int, int]) -> list[dict[str, Any]]:
    """The pager of a long file: each page's line range and address (`?from=N`), the shown one marked."""
    if total <= PAGE_LINES:
        return []
    return [
        {
            "first": first,
            "last": min(total, first + PAGE_LINES - 1),
            "url": f"{base}?from={first}",
            "current": first == window[0],
        }
        for first in range(1, total + 1, PAGE_LINES)
    ]
