"""The native C scanner (codenav/_lex.c), when it was built at install, and the switch that tests flip.

setup.py builds `_lex` as optional: without a C compiler the install still succeeds and C files are parsed
with tree-sitter like every other language (slower: see docs/codenav.md, "Linux corpus: build cost").
"""

from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Protocol

_lex: ModuleType | None
try:
    from codewell.codenav import _lex as _module

    _lex = _module
except ImportError:  # installed without a C compiler
    _lex = None

__all__ = ["ENABLED", "CRows", "CScan", "RowWriter", "available", "longest_line", "row_writer", "scan_c", "scan_c_rows"]

log = logging.getLogger(__name__)
# Tests switch the scanner off to compare it with the tree-sitter path.
ENABLED = True

# (name, kind, container, line, column, end line, end column, definition line, column, end line, end column)
SymbolTuple = tuple[str, str, str, int, int, int, int, int, int, int, int]
# (symbols, occurrence rows (name, "line:col:role;..."), includes (target, line))
CScan = tuple[list[SymbolTuple], list[tuple[str, str]], list[tuple[str, int]]]
# The same as rows of the index's tables: `symbols` (file id first) and `occurrences` (name, file id, positions).
SymbolRow = tuple[int, str, str, str, int, int, int, int, int, int, int, int]
OccurrenceRow = tuple[str, int, str]
CRows = tuple[list[SymbolRow], list[OccurrenceRow], list[tuple[str, int]]]


class RowWriter(Protocol):
    """_lex.Writer: scans C files straight into an index file's `symbols` and `occurrences` tables."""

    def begin(self) -> None: ...
    def commit(self) -> None: ...
    def scan(self, data: bytes | memoryview, file_id: int, /) -> int:
        """Inserts the file's `symbols` and `occurrences` rows (as scan_c_rows shapes them) and its #includes
        as `imports` rows; returns how many #includes there were."""
        ...

    def close(self) -> None: ...


def row_writer(index_file: Path) -> RowWriter | None:
    """A native writer into `index_file` (its tables already created), or None without the scanner (or with a
    `_lex` built before the writer existed: the build then inserts scan_c_rows' rows itself)."""
    if not available() or not hasattr(_lex, "Writer"):
        return None
    assert _lex is not None
    writer: RowWriter = _lex.Writer(str(index_file))
    return writer


def available() -> bool:
    """Whether C files go through the native scanner (built and not switched off)."""
    return ENABLED and _built()


def scan_c(data: bytes | memoryview) -> CScan | None:
    """Definitions, grouped identifier occurrences and #includes of a C file; None without the scanner."""
    if not available():
        return None
    assert _lex is not None
    result: CScan = _lex.scan_c(data)
    return result


def scan_c_rows(data: bytes | memoryview, file_id: int) -> CRows | None:
    """scan_c's findings as rows of the index tables for `file_id` (the index build's path); None without it.

    The occurrence rows leave out a name whose occurrences are exactly its definitions in the file, and hold an
    empty one for a defined name that never occurs (codenav/store.py's format; not scan_c's grouping).
    """
    if not available():
        return None
    assert _lex is not None
    result: CRows = _lex.scan_c(data, file_id)
    return result


def longest_line(data: bytes | memoryview, limit: int) -> int:
    """Length of the longest line of `data[:limit]` (natively when the scanner is built, which is always
    the case where it counts: not behind the tests' switch, since it finds the same as Python)."""
    if _lex is not None:
        length: int = _lex.longest_line(data, limit)
        return length
    return max(map(len, bytes(data[:limit]).split(b"\n")))


@lru_cache(maxsize=1)
def _built() -> bool:
    if _lex is None:
        log.warning("codewell.codenav._lex is not built (no C compiler at install?): C is parsed with tree-sitter")
    return _lex is not None
