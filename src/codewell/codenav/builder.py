"""Builds the symbol index of one repository revision (the SQLite file codenav/store.py reads).

The commit's blobs (from the search shard just built when there is one, else from git) are extracted by
codenav/extract.py, in a process pool for big revisions, and written once; the file is moved into place whole
(`os.replace`), so a reader never sees a half-built index. The layout is described in codenav/store.py.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import json5
import pygit2
from pygit2.enums import FileMode

from codewell.codenav import native
from codewell.codenav.extract import DEFINITION, MAX_FILE_BYTES, FileSymbols, extract, grammar_by_suffix
from codewell.codenav.store import FORMAT
from codewell.repos.git import walk_blobs

if TYPE_CHECKING:
    from codewell.search.service import RevisionFiles

__all__ = ["BuildStats", "build_index", "extract_batch"]

# Files per task sent to a worker: big enough to amortize pickling, small enough to balance the workers.
_BATCH_BYTES = 512 * 1024
# Below this much source a revision is parsed in the calling process (starting workers costs ~1 s).
_POOL_MIN_BYTES = 4 << 20
# Batches handed to the pool and not yet written: enough to keep the workers busy, few enough to bound memory.
_BATCHES_AHEAD = 8
# Where a file's bytes are read: a blob of the mirror, or a document of the search shard (`RevisionFiles`).
_Source = pygit2.Oid | int
# A file's bytes: from git, or a view of the shard's mapping (the native scanner reads it in place).
_Data = bytes | memoryview

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE files (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, language TEXT NOT NULL,
    queries TEXT NOT NULL, package TEXT NOT NULL, skipped TEXT NOT NULL, size INTEGER NOT NULL,
    base TEXT NOT NULL);
CREATE TABLE symbols (file_id INTEGER NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL, container TEXT NOT NULL,
    line INTEGER, col INTEGER, end_line INTEGER, end_col INTEGER,
    def_line INTEGER, def_col INTEGER, def_end_line INTEGER, def_end_col INTEGER);
CREATE TABLE imports (file_id INTEGER NOT NULL, module TEXT NOT NULL, name TEXT NOT NULL, alias TEXT NOT NULL,
    line INTEGER NOT NULL);
CREATE TABLE gomods (dir TEXT NOT NULL, module TEXT NOT NULL);
"""
# The occurrence rows as extracted, in a scratch file beside the index (attached as `scratch`), in no useful order.
_SCRATCH = """
PRAGMA scratch.journal_mode=OFF;
PRAGMA scratch.synchronous=OFF;
CREATE TABLE scratch.occurrences (name TEXT NOT NULL, file_id INTEGER NOT NULL, positions BLOB NOT NULL);
"""
# The index's occurrences: a table without rowid whose key is the whole row, so looking a name up reads its rows
# in one range and there is no separate index repeating every name (it was 152 of the Linux tree's 1,119 MB). They
# are copied there from the scratch file in key order (SQLite's sorter): a b-tree filled in order has its pages full
# (inserted as extracted, its pages would be left about two-thirds full). Reading the rows in order through an
# index of the scratch rows instead cost more (24 against 20 CPU s on the Linux tree, under load). The key holds the
# positions: one file can hold two rows of the same name (two spellings whose invalid UTF-8 decodes alike), never
# two identical ones.
_OCCURRENCES = """
CREATE TABLE main.occurrences (name TEXT NOT NULL, file_id INTEGER NOT NULL, positions BLOB NOT NULL,
    PRIMARY KEY (name, file_id, positions)) WITHOUT ROWID;
INSERT OR IGNORE INTO main.occurrences SELECT name, file_id, positions FROM scratch.occurrences ORDER BY name, file_id;
"""
# Created once every row is in (a sort, cheaper than keeping them up to date insert by insert).
_INDEXES = """
CREATE INDEX symbols_name ON symbols (name);
CREATE INDEX symbols_file ON symbols (file_id);
CREATE INDEX imports_file ON imports (file_id);
CREATE INDEX files_package ON files (package);
CREATE INDEX files_base ON files (base);
"""


@dataclass(frozen=True, slots=True)
class BuildStats:
    files: int
    parsed: int
    parsed_bytes: int
    skipped: list[tuple[str, str]]
    seconds: float


def extract_batch(batch: list[tuple[str, _Data]]) -> list[FileSymbols]:
    """Worker entry point: extract every file of a batch."""
    return [extract(path, data) for path, data in batch]


def _batches(items: Iterable[tuple[str, _Data]]) -> Iterator[list[tuple[str, _Data]]]:
    batch: list[tuple[str, _Data]] = []
    size = 0
    for item in items:
        batch.append(item)
        size += len(item[1])
        if size >= _BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _go_module(data: bytes) -> str:
    for line in data.decode("utf-8", "replace").splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "module":
            return words[1].strip('"')
    return ""


def _tsconfig_paths(data: bytes) -> str:
    """`compilerOptions.baseUrl` and `.paths` of a tsconfig.json (JSON with comments), as JSON; "{}" if unreadable."""
    try:
        options = json5.loads(data.decode("utf-8", "replace")).get("compilerOptions", {})
    except (ValueError, AttributeError):
        return "{}"
    if not isinstance(options, dict):
        return "{}"
    return json.dumps({"baseUrl": options.get("baseUrl", ""), "paths": options.get("paths", {})})


def build_index(
    target: Path,
    mirror: Path,
    commit: str,
    meta: dict[str, str],
    pool: ProcessPoolExecutor | None,
    files: RevisionFiles | None = None,
) -> BuildStats:
    """Extract every supported file of `commit` and write the index to `target` atomically.

    `files`: the commit's files as the search shard just built holds them (`SearchService.revision_files`).
    Their bytes are read from that mapping instead of inflated from git again; git still serves the few files
    the shard keeps no bytes of that codenav parses (search's "binary" means a NUL anywhere, codenav's only in
    the first 8 KB). Without `files` (a revision search did not index) everything comes from git.

    Memory stays bounded on big trees: blobs are read as their batch is handed to the extractor, at most a
    few batches are in flight in the pool, and each batch's rows are written to SQLite as it comes back (only
    a few fields per file are kept until the `files` table is written at the end).
    """
    started = time.monotonic()
    repo = pygit2.Repository(str(mirror))
    tree = repo[commit].peel(pygit2.Tree)
    paths: list[str] = []
    wanted: list[tuple[str, _Source, int, bool]] = []  # path, where its bytes are, size, is C
    gomods: list[tuple[str, str]] = []
    too_big: list[FileSymbols] = []
    for path, source, size in _tree_files(repo, tree, files):
        paths.append(path)
        if path == "go.mod" or path.endswith("/go.mod"):
            gomods.append((path.rpartition("/")[0], _go_module(bytes(_data(repo, files, source)))))
        if path == "tsconfig.json":
            meta = {**meta, "tsconfig": _tsconfig_paths(bytes(_data(repo, files, source)))}
        grammar = grammar_by_suffix(path)
        if grammar is None:
            continue
        if size > MAX_FILE_BYTES:
            # Not even read: recorded as skipped like any other file extraction refuses.
            skipped = f"over {MAX_FILE_BYTES >> 20} MB"
            too_big.append(FileSymbols(path, grammar.label, grammar.queries, skipped=skipped, size=size))
            continue
        wanted.append((path, source, size, grammar.queries == "c"))
    ids = {path: file_id for file_id, path in enumerate(sorted(paths), start=1)}
    # C goes through the native scanner (tens of MB per second): cheaper here than pickled to a worker and back.
    # The tree-sitter languages go to the pool when there is enough of them to pay for the workers.
    fast = native.available()
    here = [(path, source) for path, source, _, is_c in wanted if fast and is_c]
    elsewhere = [(path, source) for path, source, _, is_c in wanted if not (fast and is_c)]
    slow_bytes = sum(size for _, _, size, is_c in wanted if not (fast and is_c))
    if pool is None or slow_bytes < _POOL_MIN_BYTES:
        here, elsewhere = here + elsewhere, []
    writer = _Writer(target, ids)
    try:
        writer.add(too_big)
        # bytes for the pool: a view of the mapping does not pickle.
        farmed = _Farmed(pool, _batches(_read(repo, files, elsewhere, copy=True))) if pool is not None else None
        for batch in _batches(_read(repo, files, here)):
            writer.extract(batch)
            if farmed is not None:
                for chunk in farmed.ready():
                    writer.add(chunk)
        if farmed is not None:
            for chunk in farmed.rest():
                writer.add(chunk)
        writer.finish(gomods, {**meta, "commit": commit, "format": str(FORMAT)})
    finally:
        writer.close()
    return BuildStats(len(paths), writer.parsed, writer.parsed_bytes, writer.skipped, time.monotonic() - started)


def _tree_files(
    repo: pygit2.Repository, tree: pygit2.Tree, files: RevisionFiles | None
) -> Iterator[tuple[str, _Source, int]]:
    """(path, where its bytes are, size in git) of every blob of the commit but symlinks (as search walks it)."""
    if files is None:
        for path, oid, mode in walk_blobs(repo, tree):
            if mode == FileMode.LINK:
                continue
            yield path, oid, repo.odb.read_header(oid)[1]
        return
    for doc in files.docs:
        path, size = files.path(doc), files.size(doc)
        if files.skipped(doc) and size <= MAX_FILE_BYTES:
            # No bytes in the shard but small enough to parse (a NUL past codenav's binary test): from git.
            yield path, tree[path].id, size
        else:
            yield path, doc, size


def _data(repo: pygit2.Repository, files: RevisionFiles | None, source: _Source) -> _Data:
    if isinstance(source, int):
        assert files is not None
        return files.data(source)  # a view of the shard's mapping, no copy
    return _blob_data(repo, source)


def _read(
    repo: pygit2.Repository, files: RevisionFiles | None, wanted: list[tuple[str, _Source]], *, copy: bool = False
) -> Iterator[tuple[str, _Data]]:
    """(path, content) of `wanted`, each read when the consumer gets to it (shard bytes as a view unless `copy`)."""
    for path, source in wanted:
        data = _data(repo, files, source)
        yield path, bytes(data) if copy else data


def _blob_data(repo: pygit2.Repository, oid: pygit2.Oid) -> bytes:
    # Straight from the object database: half the CPU of `repo[oid].data` (no Blob object, no object cache).
    kind, data = repo.odb.read(oid)
    assert kind == pygit2.enums.ObjectType.BLOB
    return data


class _Farmed:
    """Batches extracted in the pool, in order, with at most _BATCHES_AHEAD submitted and not yet taken.

    `Executor.map` would submit every batch at once, holding every blob of the tree in memory.
    """

    def __init__(self, pool: ProcessPoolExecutor, batches: Iterator[list[tuple[str, _Data]]]) -> None:
        self.pool = pool
        self.batches = batches
        self.pending: deque[Future[list[FileSymbols]]] = deque()
        self._top_up()

    def _top_up(self) -> None:
        while len(self.pending) < _BATCHES_AHEAD:
            batch = next(self.batches, None)
            if batch is None:
                return
            self.pending.append(self.pool.submit(extract_batch, batch))

    def ready(self) -> Iterator[list[FileSymbols]]:
        """The results finished by now (the workers keep going meanwhile)."""
        while self.pending and self.pending[0].done():
            yield self.pending.popleft().result()
            self._top_up()

    def rest(self) -> Iterator[list[FileSymbols]]:
        while self.pending:
            yield self.pending.popleft().result()
            self._top_up()


class _Writer:
    """Writes one index file: extraction results batch by batch, then the files table and indexes."""

    def __init__(self, target: Path, ids: dict[str, int]) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        self.target = target
        self.tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        self.tmp.unlink(missing_ok=True)
        self.scratch = target.with_name(f"{target.name}.{os.getpid()}.occurrences.tmp")
        self.scratch.unlink(missing_ok=True)
        self.ids = ids
        # path -> (language, queries, package, skipped, size): what the files table needs at the end
        self.files: dict[str, tuple[str, str, str, str, int]] = {}
        self.parsed = 0
        self.parsed_bytes = 0
        self.skipped: list[tuple[str, str]] = []
        self.done = False
        self.db = sqlite3.connect(self.tmp)
        self.db.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;" + _SCHEMA)
        self.db.execute("ATTACH ? AS scratch", (str(self.scratch),))
        self.db.executescript(_SCRATCH)
        # The native scanner's own connection: it inserts C files' rows without making Python objects of them.
        # The two connections take turns, each committing before the other writes.
        self.native = native.row_writer(self.tmp, self.scratch)

    def extract(self, batch: list[tuple[str, _Data]]) -> None:
        """Extract `batch` in this process and write it (C rows straight from the scanner, in one transaction)."""
        sink = self.native
        if sink is not None:
            sink.begin()
        results = [extract(path, data, file_id=self.ids[path], sink=sink) for path, data in batch]
        if sink is not None:
            sink.commit()
        self.add(results)

    def add(self, results: list[FileSymbols]) -> None:
        ids = self.ids
        for r in results:
            self.files[r.path] = (r.language, r.queries, r.package, r.skipped, r.size)
            if r.skipped:
                self.skipped.append((r.path, r.skipped))
            else:
                self.parsed += 1
                self.parsed_bytes += r.size
        # Rows the native C scanner built ready for the tables: inserted as they are.
        ready: list[native.SymbolRow] = []
        ready_occurrences: list[native.OccurrenceRow] = []
        for r in results:
            if r.symbol_rows is not None:
                ready.extend(r.symbol_rows)
            if r.occurrence_rows is not None:
                ready_occurrences.extend(r.occurrence_rows)
        self.db.executemany("INSERT INTO symbols VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", ready)
        self.db.executemany("INSERT INTO scratch.occurrences VALUES (?, ?, ?)", ready_occurrences)
        self.db.executemany(
            "INSERT INTO symbols VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                (
                    ids[r.path],
                    s.name,
                    s.kind,
                    s.container,
                    s.line,
                    s.column,
                    s.end_line,
                    s.end_column,
                    s.def_line,
                    s.def_column,
                    s.def_end_line,
                    s.def_end_column,
                )
                for r in results
                for s in r.symbols
            ),
        )
        self.db.executemany("INSERT INTO scratch.occurrences VALUES (?, ?, ?)", _occurrence_rows(results, ids))
        self.db.executemany(
            "INSERT INTO imports VALUES (?, ?, ?, ?, ?)",
            ((ids[r.path], i.module, i.name, i.alias, i.line) for r in results for i in r.imports),
        )
        self.db.commit()  # the native writer's turn may come next

    def finish(self, gomods: list[tuple[str, str]], meta: dict[str, str]) -> None:
        """The files table, go.mod modules, meta and the indexes; then the file replaces `target`."""
        if self.native is not None:
            self.native.close()
        rows = []
        for path, file_id in self.ids.items():
            language, queries, package, skipped, size = self.files.get(path, ("", "", "", "", 0))
            rows.append((file_id, path, language, queries, package, skipped, size, path.rpartition("/")[2]))
        rows.sort()
        self.db.executemany("INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
        self.db.executemany("INSERT INTO gomods VALUES (?, ?)", gomods)
        self.db.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
        self.db.executescript(_INDEXES + _OCCURRENCES)
        self.db.commit()
        self.db.execute("DETACH scratch")
        self.db.close()
        self.scratch.unlink()
        os.replace(self.tmp, self.target)
        self.done = True

    def close(self) -> None:
        """Drops the half-written files when `finish` did not run (an extraction failed)."""
        if not self.done:
            if self.native is not None:
                self.native.close()
            self.db.close()
            self.tmp.unlink(missing_ok=True)
            self.scratch.unlink(missing_ok=True)


def _occurrence_rows(results: list[FileSymbols], ids: dict[str, int]) -> Iterator[tuple[str, int, bytes]]:
    """The occurrences table's rows of tree-sitter results (the native scanner builds its own the same way):
    none for a name whose occurrences are exactly its definitions in the file; an empty one for a
    defined name that never occurs (see the module docstring)."""
    for r in results:
        if r.occurrence_rows is not None:
            continue  # inserted as they are (_Writer.add)
        grouped: dict[str, list[tuple[int, int, str]]] = {}
        for o in r.occurrences:
            grouped.setdefault(o.name, []).append((o.line, o.column, o.role))
        defined: dict[str, list[tuple[int, int, str]]] = {}
        for s in r.symbols:
            defined.setdefault(s.name, []).append((s.line, s.column, DEFINITION))
        file_id = ids[r.path]
        for name, spots in grouped.items():
            # The order of the positions means nothing (tree-sitter's captures do not come in file order).
            if name in defined and sorted(spots) == sorted(defined[name]):
                continue
            yield (
                name,
                file_id,
                native.pack_positions(";".join(f"{line}:{column}:{role}" for line, column, role in spots)),
            )
        for name in defined:
            if name not in grouped:
                yield name, file_id, b""
