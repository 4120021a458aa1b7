"""Types of the native C scanner in _lex.c (see that file for what it finds and why)."""

from typing import Any, overload

@overload
def scan_c(
    data: bytes, /
) -> tuple[
    list[tuple[str, str, str, int, int, int, int, int, int, int, int]],
    list[tuple[str, str]],
    list[tuple[str, int]],
]: ...
@overload
def scan_c(
    data: bytes, file_id: int, /
) -> tuple[list[tuple[Any, ...]], list[tuple[str, int, str]], list[tuple[str, int]]]: ...
def longest_line(data: bytes, limit: int, /) -> int: ...
