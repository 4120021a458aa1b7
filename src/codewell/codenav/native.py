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

__all__ = [
    "ENABLED",
    "CRows",
    "CScan",
    "RowWriter",
    "available",
    "longest_line",
    "pack_positions",
    "row_writer",
    "scan_c",
    "scan_c_rows",
    "unpack_positions",
]

log = logging.getLogger(__name__)
# Tests switch the scanner off to compare it with the tree-sitter path.
ENABLED = True

# (name, kind, container, line, column, end line, end column, definition line, column, end line, end column)
SymbolTuple = tuple[str, str, str, int, int, int, int, int, int, int, int]
# (symbols, occurrence rows (name, "line:col:role;..."), includes (target, line))
CScan = tuple[list[SymbolTuple], list[tuple[str, str]], list[tuple[str, int]]]
# The same as rows of the index's tables: `symbols` (file id first) and `occurrences` (name, file id, positions
# packed by pack_positions).
SymbolRow = tuple[int, str, str, str, int, int, int, int, int, int, int, int]
OccurrenceRow = tuple[str, int, bytes]
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


def row_writer(index_file: Path, scratch: Path) -> RowWriter | None:
    """A native writer into `index_file` (its tables already created) and, for the occurrence rows, into the
    `occurrences` table of `scratch` (codenav/builder.py copies them into the index in key order); None without the
    scanner (the build then inserts scan_c_rows' rows itself)."""
    if not available():
        return None
    assert _lex is not None
    writer: RowWriter = _lex.Writer(str(index_file), str(scratch))
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


# Role letters by their code in packed positions (codenav/store.py's occurrences table).
_ROLES = "drmi"


def pack_positions(text: str) -> bytes:
    """ "line:col:role;..." as the occurrences table stores it: per occurrence, the line as a zigzag varint of its
    difference from the previous occurrence's line (the first's from 0), then (column << 2 | role code) as a varint,
    role codes d 0, r 1, m 2, i 3 (about 2.5 bytes an occurrence instead of 9 as text). ValueError if malformed.

    Natively when the scanner's module is built (not behind the tests' switch: both give the same bytes)."""
    if _lex is not None:
        packed: bytes = _lex.pack_positions(text)
        return packed
    out = bytearray()
    previous = 0
    for spot in text.split(";") if text else ():
        fields = spot.split(":")
        if len(fields) != 3 or not all(f.isascii() and f.isdigit() for f in fields[:2]) or fields[2] not in _ROLES:
            raise ValueError(f"positions: not line:col:role: {spot!r}")
        line, column, role = int(fields[0]), int(fields[1]), fields[2]
        if len(role) != 1 or line >= 1 << 32 or column >= 1 << 32:
            raise ValueError(f"positions: not line:col:role: {spot!r}")
        delta = line - previous
        previous = line
        _put_varint(out, delta << 1 if delta >= 0 else (-delta << 1) - 1)
        _put_varint(out, column << 2 | _ROLES.index(role))
    return bytes(out)


def unpack_positions(packed: bytes) -> list[tuple[int, int, str]]:
    """(line, column, role) of every occurrence `pack_positions` packed, in its order (ValueError if truncated)."""
    if _lex is not None:
        spots: list[tuple[int, int, str]] = _lex.unpack_positions(packed)
        return spots
    out: list[tuple[int, int, str]] = []
    at, line = 0, 0
    while at < len(packed):
        zigzag, at = _get_varint(packed, at)
        value, at = _get_varint(packed, at)
        line += -((zigzag + 1) >> 1) if zigzag & 1 else zigzag >> 1
        out.append((line, value >> 2, _ROLES[value & 3]))
    return out


def _put_varint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)


def _get_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise ValueError("positions: truncated")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


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
