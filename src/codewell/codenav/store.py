"""The symbol index of one repository revision: an SQLite file built once (codenav/builder.py), then only read.

Layout: `<data dir>/codenav/<repo id>/<commit>.sqlite`. Tables: `files` (every blob path of the commit, its
language, package and why it was skipped), `symbols` (definitions), `occurrences` (per file and name, the
positions (line, column, role) packed into a blob by `native.pack_positions`, ~2.5 bytes each — one row per
(file, name) keeps the table a few times smaller than one row per occurrence; a table without rowid keyed on the
whole row, name first, so a name's rows are one range and no index repeats the names), `imports` and `gomods`
(module path of each go.mod). Lookups by name and by file are indexed, so a query reads only the rows it needs
and never parses a file.

A (file, name) whose occurrences are exactly the file's definitions of that name (`#define X 1` and no other
`X` in the file: most names of generated headers) has no `occurrences` row: `Indexed.occurrences` reads those
positions from `symbols`. A name the file defines but never names as an identifier has a row with empty
positions, so that the reader does not make one up. (Format 4; format 3 stored the positions as text
`line:column:role` joined by `;`, 9 bytes an occurrence and over a quarter of the Linux tree's index, in a rowid
table with an index on the name; format 2 stored every row. An index of another format is not opened, and the
next indexing rebuilds it.)
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from codewell.codenav.extract import DEFINITION, Symbol
from codewell.codenav.native import unpack_positions

__all__ = ["FORMAT", "FileRow", "ImportRow", "Indexed", "OpenIndexes", "SymbolRow", "open_index"]

FORMAT = 4


# SQL condition on `symbols s`: not a local (a parameter or variable whose container is a function or method of
# the same file). Search ranks and lists what a file defines for others; locals would make every line that
# binds a name look like a definition.
_NOT_LOCAL = (
    "NOT (s.kind = 'variable' AND s.container != '' AND EXISTS (SELECT 1 FROM symbols o WHERE o.file_id = "
    "s.file_id AND o.kind IN ('function', 'method') AND s.container = "
    "CASE WHEN o.container = '' THEN o.name ELSE o.container || '.' || o.name END))"
)


@dataclass(frozen=True, slots=True)
class SymbolRow:
    path: str
    language: str
    symbol: Symbol


@dataclass(frozen=True, slots=True)
class FileRow:
    id: int
    path: str
    language: str
    queries: str
    package: str
    skipped: str


@dataclass(frozen=True, slots=True)
class ImportRow:
    file_id: int
    path: str
    module: str
    name: str
    alias: str
    line: int


# definition_spans remembers at most this many paths per open handle (OpenIndexes keeps the handles).
_SPANS_MEMO = 4096
_UNKNOWN: list[tuple[int, int, int]] = []


class Indexed:
    """Read access to one revision's index (one SQLite connection; cheap to open, use and close)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        self._files: dict[int, FileRow] | None = None
        self._spans: dict[str, list[tuple[int, int, int]] | None] = {}

    def close(self) -> None:
        self.db.close()

    def meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def file(self, path: str) -> FileRow | None:
        row = self.db.execute(
            "SELECT id, path, language, queries, package, skipped FROM files WHERE path = ?", (path,)
        ).fetchone()
        return None if row is None else FileRow(*row)

    def file_by_id(self, file_id: int) -> FileRow:
        row = self.db.execute(
            "SELECT id, path, language, queries, package, skipped FROM files WHERE id = ?", (file_id,)
        ).fetchone()
        return FileRow(*row)

    def is_directory(self, path: str) -> bool:
        prefix = path.rstrip("/") + "/"
        row = self.db.execute(
            "SELECT 1 FROM files WHERE path >= ? AND path < ? LIMIT 1", (prefix, prefix[:-1] + "0")
        ).fetchone()
        return row is not None

    def paths_like(self, suffixes: Iterable[str]) -> list[str]:
        """Paths equal to or ending in `/<suffix>` for any of `suffixes`, shortest first.

        Looked up by the indexed file name (`base`), then filtered: no scan of the files table.
        """
        found: set[str] = set()
        for suffix in suffixes:
            rows = self.db.execute("SELECT path FROM files WHERE base = ?", (suffix.rpartition("/")[2],))
            tail = f"/{suffix}"
            found.update(p for (p,) in rows if p == suffix or p.endswith(tail))
        return sorted(found, key=lambda p: (p.count("/"), len(p), p))

    def exists(self, path: str) -> bool:
        return self.db.execute("SELECT 1 FROM files WHERE path = ?", (path,)).fetchone() is not None

    def files_in_dir(self, directory: str, queries: str) -> list[str]:
        prefix = f"{directory}/" if directory else ""
        rows = self.db.execute(
            "SELECT path FROM files WHERE queries = ? AND path LIKE ? ESCAPE '\\'",
            (queries, prefix.replace("%", "\\%").replace("_", "\\_") + "%"),
        )
        return [p for (p,) in rows if "/" not in p[len(prefix) :]]

    def files_in_package(self, package: str, queries: str) -> list[str]:
        rows = self.db.execute("SELECT path FROM files WHERE package = ? AND queries = ?", (package, queries))
        return [p for (p,) in rows]

    def symbols_named(self, name: str, paths: Iterable[str] | None = None) -> list[SymbolRow]:
        sql = (
            "SELECT f.path, f.language, s.name, s.kind, s.container, s.line, s.col, s.end_line, s.end_col, "
            "s.def_line, s.def_col, s.def_end_line, s.def_end_col FROM symbols s JOIN files f ON f.id = s.file_id "
            "WHERE s.name = ?"
        )
        rows = self.db.execute(sql, (name,)).fetchall()
        wanted = None if paths is None else set(paths)
        return [SymbolRow(row[0], row[1], Symbol(*row[2:])) for row in rows if wanted is None or row[0] in wanted]

    def symbol_names(self) -> list[str]:
        """Every distinct defined name of the revision."""
        return [name for (name,) in self.db.execute("SELECT DISTINCT name FROM symbols")]

    def defined_among(self, names: Iterable[str]) -> set[str]:
        """Which of `names` the revision defines (in batches: SQLite bounds the parameters of one statement)."""
        wanted = list(dict.fromkeys(names))
        found: set[str] = set()
        for lo in range(0, len(wanted), 500):
            batch = wanted[lo : lo + 500]
            marks = ",".join("?" * len(batch))
            found.update(
                n for (n,) in self.db.execute(f"SELECT DISTINCT name FROM symbols WHERE name IN ({marks})", batch)
            )
        return found

    def outer_symbols_named(self, name: str) -> list[SymbolRow]:
        """The definitions of `name` that are not locals of a function (see _NOT_LOCAL)."""
        sql = (
            "SELECT f.path, f.language, s.name, s.kind, s.container, s.line, s.col, s.end_line, s.end_col, "
            "s.def_line, s.def_col, s.def_end_line, s.def_end_col FROM symbols s JOIN files f ON f.id = s.file_id "
            f"WHERE s.name = ? AND {_NOT_LOCAL} ORDER BY f.path, s.line"
        )
        return [SymbolRow(row[0], row[1], Symbol(*row[2:])) for row in self.db.execute(sql, (name,))]

    def definition_spans(self, paths: Iterable[str]) -> dict[str, list[tuple[int, int, int]]]:
        """Path → (line, start column, end column) of every defined name but locals, for the parsed `paths`.

        Columns as stored (1-based, end exclusive). A parsed file without definitions maps to an empty list, so
        "defines nothing" stays distinct from "not parsed".
        """
        # Per handle, the answer of each path is kept: the index never changes under an open handle, and search's
        # ranking asks again for the same files (a common word's first page) on every query.
        memo = self._spans
        out: dict[str, list[tuple[int, int, int]]] = {}
        wanted = []
        for path in dict.fromkeys(paths):
            known = memo.get(path, _UNKNOWN)
            if known is _UNKNOWN:
                wanted.append(path)
            elif known is not None:
                out[path] = known
        fresh: dict[str, list[tuple[int, int, int]]] = {}
        # SQLite allows at most 32766 parameters per statement; pages of 500 stay far below it.
        for i in range(0, len(wanted), 500):
            page = wanted[i : i + 500]
            marks = ",".join("?" * len(page))
            for (path,) in self.db.execute(
                f"SELECT path FROM files WHERE queries != '' AND skipped = '' AND path IN ({marks})",
                page,
            ):
                fresh[path] = []
            rows = self.db.execute(
                "SELECT f.path, s.line, s.col, s.end_col FROM symbols s JOIN files f ON f.id = s.file_id "
                f"WHERE s.line = s.end_line AND f.path IN ({marks}) AND {_NOT_LOCAL}",
                page,
            )
            for path, line, col, end_col in rows:
                fresh.setdefault(path, []).append((line, col, end_col))
        if len(memo) + len(wanted) <= _SPANS_MEMO:
            for path in wanted:
                memo[path] = fresh.get(path)
        out.update(fresh)
        return out

    def definition_blocks(self, kinds: Iterable[str]) -> dict[str, list[tuple[int, int, str]]]:
        """Path → (first line, last line, qualified name) of every definition of one of `kinds`, whole revision.

        The definition's extent (`def_line`..`def_end_line`), the name prefixed with its container and a dot when
        it has one; per path in `symbols_in`'s order (line, column; then row order). One query for the revision:
        nls chunks every file by its definitions, and a query per path cost more than the chunking itself.
        """
        wanted = sorted(set(kinds))
        marks = ",".join("?" * len(wanted))
        rows = self.db.execute(
            "SELECT s.file_id, s.def_line, s.def_end_line, "
            "CASE WHEN s.container != '' THEN s.container || '.' || s.name ELSE s.name END "
            f"FROM symbols s WHERE s.kind IN ({marks}) ORDER BY s.file_id, s.line, s.col, s.rowid",
            wanted,
        )
        by_id: dict[int, list[tuple[int, int, str]]] = {}
        for file_id, first, last, name in rows:
            spans = by_id.get(file_id)
            if spans is None:
                spans = by_id[file_id] = []
            spans.append((first, last, name))
        paths = dict(self.db.execute("SELECT id, path FROM files"))
        return {paths[file_id]: spans for file_id, spans in by_id.items()}

    def symbols_in(self, path: str, name: str | None = None) -> list[Symbol]:
        """The definitions in `path` (only those of `name` when given), in line and column order.

        Ask with `name` when only one name matters: a generated header defines tens of thousands of names, and
        making a Symbol of each cost a find_references on it seconds (the filter in SQL costs under a millisecond).
        """
        sql = (
            "SELECT s.name, s.kind, s.container, s.line, s.col, s.end_line, s.end_col, s.def_line, s.def_col, "
            "s.def_end_line, s.def_end_col FROM symbols s JOIN files f ON f.id = s.file_id WHERE f.path = ? "
        )
        if name is None:
            rows = self.db.execute(sql + "ORDER BY s.line, s.col", (path,))
        else:
            rows = self.db.execute(sql + "AND s.name = ? ORDER BY s.line, s.col", (path, name))
        return [Symbol(*row) for row in rows]

    def imports_of(self, path: str) -> list[ImportRow]:
        rows = self.db.execute(
            "SELECT i.file_id, f.path, i.module, i.name, i.alias, i.line FROM imports i JOIN files f ON f.id = "
            "i.file_id WHERE f.path = ? ORDER BY i.line",
            (path,),
        )
        return [ImportRow(*row) for row in rows]

    def imports_mentioning(self, fragment: str) -> list[ImportRow]:
        """Imports whose module or imported name contains `fragment` (a cheap filter before exact resolution)."""
        like = "%" + fragment.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = self.db.execute(
            "SELECT i.file_id, f.path, i.module, i.name, i.alias, i.line FROM imports i JOIN files f ON f.id = "
            "i.file_id WHERE i.module LIKE ? ESCAPE '\\' OR i.name LIKE ? ESCAPE '\\'",
            (like, like),
        )
        return [ImportRow(*row) for row in rows]

    def paths_naming(self, name: str) -> set[str]:
        """The paths `occurrences(name)` has keys for, without reading a position (C's visibility needs no more)."""
        rows = self.db.execute(
            "SELECT f.path, length(o.positions) = 0 FROM occurrences o JOIN files f ON f.id = o.file_id "
            "WHERE o.name = ?",
            (name,),
        )
        stored: set[str] = set()
        out: set[str] = set()
        for path, empty in rows:
            stored.add(path)
            if not empty:
                out.add(path)
        definitions = self.db.execute(
            "SELECT f.path FROM symbols s JOIN files f ON f.id = s.file_id WHERE s.name = ?", (name,)
        )
        out.update(path for (path,) in definitions if path not in stored)
        return out

    def occurrences(self, name: str) -> dict[str, list[tuple[int, int, str]]]:
        """Path → (line, column, role) of every identifier `name` in the revision.

        A file without a row for `name` that defines it: its occurrences are its definitions (module docstring).
        """
        rows = self.db.execute(
            "SELECT f.path, o.positions FROM occurrences o JOIN files f ON f.id = o.file_id WHERE o.name = ?",
            (name,),
        )
        out: dict[str, list[tuple[int, int, str]]] = {}
        stored: set[str] = set()
        for path, positions in rows:
            stored.add(path)
            if not positions:
                continue  # defined there, never named
            out.setdefault(path, []).extend(unpack_positions(positions))
        definitions = self.db.execute(
            "SELECT f.path, s.line, s.col FROM symbols s JOIN files f ON f.id = s.file_id WHERE s.name = ? "
            "ORDER BY s.file_id, s.line, s.col",
            (name,),
        )
        for path, line, column in definitions:
            if path not in stored:
                out.setdefault(path, []).append((line, column, DEFINITION))
        return out

    def go_modules(self) -> list[tuple[str, str]]:
        return [(d, m) for d, m in self.db.execute("SELECT dir, module FROM gomods") if m]

    def names_in(self, path: str) -> list[str]:
        return sorted({s.name for s in self.symbols_in(path)})


def open_index(path: Path) -> Indexed | None:
    """The index at `path`, or None when it is missing or written in another format."""
    if not path.exists():
        return None
    indexed = Indexed(path)
    try:
        if indexed.meta("format") != str(FORMAT):
            indexed.close()
            return None
    except sqlite3.DatabaseError:
        indexed.close()
        return None
    return indexed


class OpenIndexes:
    """Read handles of recently used indexes, kept open between requests.

    A search ranks its first page with the symbol tables of every repository it shows (tens of them): opening
    each index anew (connect, format check) cost more than the lookups. A handle is reused while its file is the
    same (inode and mtime: an index is replaced whole by `os.replace`, never changed in place); one thread at a
    time uses a handle (an sqlite3 connection is not safe to share concurrently); an evicted handle closes when
    its last user lets go of it.
    """

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._handles: OrderedDict[Path, tuple[tuple[int, int], Indexed, threading.Lock]] = OrderedDict()
        self._lock = threading.Lock()

    @contextmanager
    def use(self, path: Path) -> Iterator[Indexed | None]:
        """The index at `path` for the duration of the block (None when missing or of another format)."""
        try:
            found = path.stat()
        except FileNotFoundError:
            yield None
            return
        identity = (found.st_ino, found.st_mtime_ns)
        with self._lock:
            entry = self._handles.get(path)
            if entry is not None and entry[0] == identity:
                self._handles.move_to_end(path)
            else:
                entry = None
        if entry is None:
            index = open_index(path)
            if index is None:
                yield None
                return
            entry = (identity, index, threading.Lock())
            with self._lock:
                self._handles[path] = entry
                self._handles.move_to_end(path)
                while len(self._handles) > self.size:
                    self._handles.popitem(last=False)
        _identity, index, lock = entry
        with lock:
            yield index

    def clear(self) -> None:
        with self._lock:
            self._handles.clear()
