"""Types of the native kernels in _scan.c (see that file for what they do and why)."""

from typing import Any

def find_lines(
    content: Any, needle: bytes, case_sensitive: bool, runs: list[tuple[int, int]], budget: int, /
) -> list[int]: ...
def map_lines(
    offsets: list[int], starts: Any, doc_page0: Any, nl_pages: Any, nl_low: Any, page_shift: int, /
) -> list[tuple[int, int]]: ...
def find_hits(
    content: Any,
    needle: bytes,
    case_sensitive: bool,
    runs: Any,
    budget: int,
    starts: Any,
    doc_page0: Any,
    nl_pages: Any,
    nl_low: Any,
    page_shift: int,
    /,
) -> tuple[bytes, bytes, bytes]: ...
def line_bounds(
    content: Any,
    needle: bytes,
    case_sensitive: bool,
    runs: Any,
    budget: int,
    follow: bytes = ...,
    min_follow: int = ...,
    /,
) -> bytes: ...
def posting_keep(postings: Any, start: int, end: int, raw: bool, units: list[int], /) -> list[int]: ...
def line_texts(content: Any, offsets: list[int], /) -> list[str]: ...
