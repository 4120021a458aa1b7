"""Build one immutable shard (a directory of flat files) from a stream of documents.

Layout (see docs/design.md): `content.bin` (every document's bytes, each ending in a newline, read through
mmap), `starts.npy` (document offsets), the line tables `line_base.npy` + `nl_low.npy` + `nl_pages.npy` +
`doc_page0.npy` (per-document newline offsets as 16-bit values within 64 KiB pages, so a match offset maps to
a line with one searchsorted), the unit table `unit_starts.npy` + `doc_unit0.npy` (each document cut into
line-aligned units of about UNIT_BYTES), `tri_keys.npy`/`tri_offs.npy`/`tri_raw.npy` + `postings.bin`
(case-folded trigram → units), `docs.json` (paths, languages, skip reasons) and `meta.json` (branch
membership). The shard is written to `<dir>.tmp` and renamed into place only when complete.

Postings name units rather than documents so that a selective query scans only the ~12 KiB stretches of a
big file that hold all of its trigrams. Units end at line ends, and no match crosses a line (the regexes run
with `never_nl`), so every match lies inside one unit and a unit's trigrams are exact for it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pyroaring import BitMap

from codewell.core.processes import process_pool, stop_pool
from codewell.search.index import native
from codewell.search.index.bitmaps import bitmap_of
from codewell.search.index.languages import language_of

__all__ = ["FORMAT_VERSION", "MAX_FILE_SIZE", "PAGE_SHIFT", "UNIT_BYTES", "SourceDoc", "build_shard", "skip_reason"]

# 3: compound shards (the documents of one or many repositories, `repos` in meta.json).
FORMAT_VERSION = 3
# Documents longer than this are cut into line-aligned units of about this size for the postings
# (measured on the Linux corpus: 12 KiB units grow the postings 1.46x and cut a filtered query's scan 7.8x).
UNIT_BYTES = 12 << 10
# Newline offsets are stored as their low 16 bits; each 64 KiB page of a document records its first line.
PAGE_SHIFT = 16
# Files above this size are usually generated or data; like Zoekt we index their path only (#4).
MAX_FILE_SIZE = 1 << 20
# Trigram keys are grouped into this many partitions so the final sort never holds every key at once.
_PARTITIONS = 256
_PART_SHIFT = 16  # the first byte of the trigram chooses the partition (keeps keys globally sorted)
# Posting lists with at most this many units are stored as raw uint32 arrays (cheaper than a bitmap).
_RAW_MAX = 8
_BATCH_BYTES = 8 << 20
_BATCH_UNITS = 256
# Content is handed to trigram extraction in chunks of this size while later documents are still read.
_CHUNK_BYTES = 48 << 20
# At most this many units per chunk: a unit's rank within its chunk then fits the 16 low bits of the uint32
# keys of the partition files (their 16 high bits are the trigram's, less the first byte that the file names).
_CHUNK_UNITS = 1 << 16
# Partitions merged per pool task: small enough to balance the uneven partitions over the workers.
_MERGE_GROUP = 8


@dataclass(frozen=True, slots=True)
class SourceDoc:
    """One file version to index; `data` is None when the file is skipped (path-only)."""

    path: str
    data: bytes | None
    size: int
    branches: frozenset[str]
    skipped: str = ""  # "", "binary", "too large"
    # The repository's position in the shard's `repos` (a compound shard holds several, each a contiguous run).
    slot: int = 0


def skip_reason(data: bytes, size: int) -> str:
    """Why a blob is indexed by path only ("" when its content is indexed)."""
    if size > MAX_FILE_SIZE:
        return "too large"
    if b"\0" in data:
        return "binary"
    return ""


@dataclass
class _Docs:
    paths: list[str] = field(default_factory=list)
    languages: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    # Per repository slot: branch → its documents, and the slot's first document.
    branches: list[dict[str, list[int]]] = field(default_factory=list)
    firsts: list[int] = field(default_factory=list)


def build_shard(
    target: Path,
    meta: dict[str, Any],
    docs: Iterable[SourceDoc],
    *,
    workers: int = 1,
    progress: Callable[[int, int], None] | None = None,
    unit_bytes: int = UNIT_BYTES,
    page_shift: int = PAGE_SHIFT,
) -> Path:
    """Write a complete shard to `target` atomically (build in `target.tmp`, then rename); return `target`.

    `meta["repos"]` lists the repositories the shard holds (id, name, default_branch, branches → commits,
    anything else is kept), one per `SourceDoc.slot`; the documents of each come as one run, in slot order.
    Without it the shard holds one repository described by meta's `repo_id`, `repo`, `default_branch` and
    `branches`. `progress(docs_done, bytes_done)` is called while reading documents. `unit_bytes` and
    `page_shift` (at most 16) are recorded in meta.json; tests make them tiny to exercise unit and page
    boundaries.
    """
    if not 1 <= page_shift <= PAGE_SHIFT:
        raise ValueError(f"page_shift must be within 1..{PAGE_SHIFT}")
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        with _Trigrams(tmp, workers) as trigrams:
            # Trigram extraction of each written chunk runs in the pool while later documents are read.
            info = _write_content(tmp, docs, progress, trigrams.submit, _Tables(unit_bytes, page_shift))
            trigrams.wait()
            _write_postings(tmp, trigrams)
        repos = _repo_entries(meta, info)
        (tmp / "docs.json").write_text(
            json.dumps({"paths": info.paths, "languages": info.languages, "skipped": info.skipped, "sizes": info.sizes})
        )
        full_meta = {
            **{k: v for k, v in meta.items() if k != "repos"},
            "repos": repos,
            "format": FORMAT_VERSION,
            "unit_bytes": unit_bytes,
            "page_shift": page_shift,
            "docs": len(info.paths),
            "content_bytes": (tmp / "content.bin").stat().st_size,
        }
        (tmp / "meta.json").write_text(json.dumps(full_meta))
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _serialize_ids(ids: list[int]) -> str:
    return BitMap(ids).serialize().hex()


def _repo_entries(meta: dict[str, Any], info: _Docs) -> list[dict[str, Any]]:
    """meta.json's `repos`: each repository's facts, its document run [lo, hi) and its branches' documents."""
    given: list[dict[str, Any]] = meta.get("repos") or [
        {
            "id": meta.get("repo_id"),
            "name": meta.get("repo", ""),
            "default_branch": meta.get("default_branch"),
            "branches": meta.get("branches", {}),
        }
    ]
    if len(info.firsts) > len(given):
        raise ValueError(f"documents name repository slot {len(info.firsts) - 1}, meta lists {len(given)}")
    total = len(info.paths)
    entries = []
    for slot, repo in enumerate(given):
        lo = info.firsts[slot] if slot < len(info.firsts) else total
        hi = info.firsts[slot + 1] if slot + 1 < len(info.firsts) else total
        branches = info.branches[slot] if slot < len(info.branches) else {}
        # Every indexed branch (one without documents is an empty tree) and every branch the documents name.
        names = [*repo.get("branches", {}), *(b for b in branches if b not in repo.get("branches", {}))]
        docs = {name: _serialize_ids(branches.get(name, [])) for name in names}
        entries.append({**repo, "docs": [lo, hi], "branch_docs": docs})
    return entries


def _write_content(
    out: Path,
    docs: Iterable[SourceDoc],
    progress: Callable[[int, int], None] | None,
    on_chunk: Callable[[int, np.ndarray, bool], None],
    tables: _Tables,
) -> _Docs:
    """Write content.bin, the line and unit tables; hand every ~_CHUNK_BYTES of written units to `on_chunk`.

    `on_chunk(first_unit, starts, final)` gets the absolute content offsets of units first_unit.. (one
    more than the units) once their bytes are flushed to the file.
    """
    info = _Docs()
    chunk_lo = 0
    with open(out / "content.bin", "wb") as content:
        for doc in docs:
            doc_id = len(info.paths)
            if doc.slot != len(info.firsts) - 1:
                if doc.slot < len(info.firsts):
                    raise ValueError(f"documents of repository slot {doc.slot} must come as one run, in slot order")
                # Slots without documents (an empty repository) start and end here.
                info.firsts.extend([doc_id] * (doc.slot + 1 - len(info.firsts)))
                info.branches.extend({} for _ in range(doc.slot + 1 - len(info.branches)))
            info.paths.append(doc.path)
            info.languages.append(language_of(doc.path))
            info.skipped.append(doc.skipped)
            info.sizes.append(doc.size)
            for branch in doc.branches:
                info.branches[doc.slot].setdefault(branch, []).append(doc_id)
            data = doc.data if not doc.skipped and doc.data is not None else b""
            if data and not data.endswith(b"\n"):
                # Every document ends in a newline so no match (and no trigram we query) spans two files.
                data += b"\n"
            if data:
                content.write(data)
            tables.add(data)
            if chunk_lo < len(tables.unit_starts) and tables.offset - tables.unit_starts[chunk_lo] >= _CHUNK_BYTES:
                content.flush()
                on_chunk(chunk_lo, np.asarray([*tables.unit_starts[chunk_lo:], tables.offset], dtype=np.int64), False)
                chunk_lo = len(tables.unit_starts)
            if progress is not None and doc_id % 256 == 0:
                progress(doc_id + 1, tables.offset)
        content.flush()
        if chunk_lo < len(tables.unit_starts):
            on_chunk(chunk_lo, np.asarray([*tables.unit_starts[chunk_lo:], tables.offset], dtype=np.int64), True)
    if progress is not None:
        progress(len(info.paths), tables.offset)
    tables.save(out)
    return info


@dataclass
class _Tables:
    """Document, line and unit tables, grown one document at a time (see the module docstring)."""

    unit_bytes: int
    page_shift: int
    offset: int = 0
    lines: int = 0
    starts: list[int] = field(default_factory=lambda: [0])
    line_base: list[int] = field(default_factory=lambda: [0])
    unit_starts: list[int] = field(default_factory=list)
    doc_unit0: list[int] = field(default_factory=lambda: [0])
    nl_pages: list[int] = field(default_factory=list)
    doc_page0: list[int] = field(default_factory=lambda: [0])
    nl_low: list[np.ndarray] = field(default_factory=list)

    def add(self, data: bytes) -> None:
        kernels = native.kernels()
        if data and kernels is not None:
            low, page_lines, cuts, newlines = kernels.doc_lines(data, self.unit_bytes, self.page_shift)
            self.nl_low.append(np.frombuffer(low, dtype=np.uint16))
            self.nl_pages.extend((self.lines + np.frombuffer(page_lines, dtype=np.int64)).tolist())
            self.unit_starts.extend((self.offset + np.frombuffer(cuts, dtype=np.int64)).tolist())
            self.lines += newlines
            self.offset += len(data)
        elif data:
            nl = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
            self.nl_low.append((nl & ((1 << self.page_shift) - 1)).astype(np.uint16))
            pages = np.arange(((len(data) - 1) >> self.page_shift) + 1, dtype=np.int64) << self.page_shift
            self.nl_pages.extend((self.lines + np.searchsorted(nl, pages, side="left")).tolist())
            self.unit_starts.extend((self.offset + _unit_cuts(nl, len(data), self.unit_bytes)).tolist())
            self.lines += len(nl)
            self.offset += len(data)
        self.starts.append(self.offset)
        self.line_base.append(self.lines)
        self.doc_unit0.append(len(self.unit_starts))
        self.doc_page0.append(len(self.nl_pages))

    def save(self, out: Path) -> None:
        np.save(out / "starts.npy", np.asarray(self.starts, dtype=np.uint64))
        np.save(out / "line_base.npy", np.asarray(self.line_base, dtype=np.uint64))
        np.save(out / "unit_starts.npy", np.asarray([*self.unit_starts, self.offset], dtype=np.uint64))
        np.save(out / "doc_unit0.npy", np.asarray(self.doc_unit0, dtype=np.uint32))
        np.save(out / "nl_pages.npy", np.asarray([*self.nl_pages, self.lines], dtype=np.uint64))
        np.save(out / "doc_page0.npy", np.asarray(self.doc_page0, dtype=np.uint32))
        low = np.concatenate(self.nl_low) if self.nl_low else np.zeros(0, dtype=np.uint16)
        np.save(out / "nl_low.npy", low)


def _unit_cuts(nl: np.ndarray, size: int, unit_bytes: int) -> np.ndarray:
    """Relative start offsets of a document's units: it is cut after the first newline past every unit_bytes."""
    if size <= unit_bytes:
        return np.zeros(1, dtype=np.int64)
    ends = nl[np.searchsorted(nl, np.arange(unit_bytes - 1, size, unit_bytes), side="left")] + 1
    ends = np.unique(ends[ends < size])
    return np.concatenate([np.zeros(1, dtype=np.int64), ends.astype(np.int64)])


class _Trigrams:
    """Trigram keys of written content chunks, computed in worker processes (or inline for small repos).

    Each chunk writes its own partition files `c<n>.p<partition>` under `parts_dir`; the pool is only
    started once a repository proves big enough (a chunk is handed over before the last document).
    """

    def __init__(self, out: Path, workers: int) -> None:
        self.out = out
        self.workers = workers
        self.parts_dir = Path(tempfile.mkdtemp(prefix="parts-", dir=out))
        self.pool: ProcessPoolExecutor | None = None
        self.futures: list[Any] = []
        self.chunks = 0

    def __enter__(self) -> _Trigrams:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            stop_pool(self.pool)
        shutil.rmtree(self.parts_dir, ignore_errors=True)

    def submit(self, unit_lo: int, starts: np.ndarray, final: bool) -> None:
        if self.pool is None and self.workers > 1 and not final:
            self.pool = process_pool(self.workers)
        content = str(self.out / "content.bin")
        # Pieces of at most _CHUNK_UNITS units (a document of many short lines can add more at once).
        for lo in range(0, len(starts) - 1, _CHUNK_UNITS):
            piece = starts[lo : lo + _CHUNK_UNITS + 1]
            # The name carries the piece's first unit id: the merge adds it to the keys' unit ranks.
            prefix = str(self.parts_dir / f"c{self.chunks:05}u{unit_lo + lo}")
            self.chunks += 1
            if self.pool is None:
                trigram_keys(content, piece, prefix)
            else:
                self.futures.append(self.pool.submit(trigram_keys, content, piece, prefix))

    def wait(self) -> None:
        for future in self.futures:
            future.result()


def _write_postings(out: Path, trigrams: _Trigrams) -> None:
    """Merge the chunks' partition files into the sorted trigram table and postings.bin.

    Groups of partitions are merged in the pool when there is one; their outputs are concatenated in
    partition order, so trigram keys stay globally sorted.
    """
    groups = (
        [(lo, min(lo + _MERGE_GROUP, _PARTITIONS)) for lo in range(0, _PARTITIONS, _MERGE_GROUP)]
        if trigrams.pool is not None
        else [(0, _PARTITIONS)]
    )
    parts_dir = str(trigrams.parts_dir)
    if trigrams.pool is not None:
        results = list(
            trigrams.pool.map(merge_partitions, *zip(*[(parts_dir, lo, hi) for lo, hi in groups], strict=True))
        )
    else:
        results = [merge_partitions(parts_dir, lo, hi) for lo, hi in groups]
    table = _TrigramTable()
    position = 0
    with open(out / "postings.bin", "wb") as postings:
        for (lo, _hi), (part, size) in zip(groups, results, strict=True):
            chunk = Path(parts_dir) / f"m{lo:03}.bin"
            with open(chunk, "rb") as f:
                shutil.copyfileobj(f, postings, 16 << 20)
            chunk.unlink()
            table.extend(part, position)
            position += size
    table.save(out, position)


@dataclass
class _TrigramTable:
    """Per trigram, in key order: key, postings offset, raw-array flag and number of units."""

    keys: list[np.ndarray] = field(default_factory=list)
    offsets: list[np.ndarray] = field(default_factory=list)
    raw: list[np.ndarray] = field(default_factory=list)
    counts: list[np.ndarray] = field(default_factory=list)

    def extend(self, other: _TrigramTable, shift: int) -> None:
        self.keys += other.keys
        self.offsets += [o + np.uint64(shift) for o in other.offsets]
        self.raw += other.raw
        self.counts += other.counts

    def save(self, out: Path, end: int) -> None:
        def joined(parts: list[np.ndarray], dtype: type) -> np.ndarray:
            return (np.concatenate(parts) if parts else np.zeros(0)).astype(dtype)

        np.save(out / "tri_keys.npy", joined(self.keys, np.uint32))
        np.save(out / "tri_offs.npy", joined([*self.offsets, np.asarray([end], dtype=np.uint64)], np.uint64))
        np.save(out / "tri_raw.npy", joined(self.raw, np.bool_))
        np.save(out / "tri_counts.npy", joined(self.counts, np.uint32))


def merge_partitions(parts_dir: str, part_lo: int, part_hi: int) -> tuple[_TrigramTable, int]:
    """Merge partitions [part_lo, part_hi) into `m<part_lo>.bin`; return its trigram table and size.

    Runs in a worker process; offsets are relative to the start of this group's postings file.
    """
    table = _TrigramTable()
    position = 0
    directory = Path(parts_dir)
    # One listing, not one glob per partition: chunks write only the partitions they have keys for. Names
    # (c<chunk>u<first unit>.p<partition>) sort in chunk order.
    by_part: dict[int, list[tuple[Path, int]]] = {}
    for name in sorted(os.listdir(directory)):
        if name.startswith("c") and ".p" in name:
            stem, number = name.rsplit(".p", 1)
            by_part.setdefault(int(number), []).append((directory / name, int(stem.split("u", 1)[1])))
    kernels = native.kernels()
    with open(directory / f"m{part_lo:03}.bin", "wb") as postings:
        for part in range(part_lo, part_hi):
            files = by_part.get(part, [])
            if kernels is not None:
                position = _merge_native(kernels, files, part, postings, position, table)
                continue
            arrays = [_full_keys(np.fromfile(f, dtype=np.uint32), part, unit_lo) for f, unit_lo in files]
            if not arrays:
                continue
            keys = np.sort(np.concatenate(arrays))
            del arrays
            for f, _ in files:
                f.unlink()
            if not len(keys):
                continue
            position = _write_partition(keys, postings, position, table)
    return table, position


def _full_keys(keys: np.ndarray, part: int, unit_lo: int) -> np.ndarray:
    """A partition file's uint32 keys as uint64 `trigram << 32 | unit id` (the numpy merge sorts those)."""
    trigrams = (keys >> np.uint32(16)).astype(np.uint64) | np.uint64(part << 16)
    return (trigrams << np.uint64(32)) | ((keys & np.uint32(0xFFFF)).astype(np.uint64) + np.uint64(unit_lo))


def _merge_native(
    kernels: Any, files: list[tuple[Path, int]], part: int, postings: Any, position: int, table: _TrigramTable
) -> int:
    """merge_partitions for one partition through _build.merge_partition (the chunk files are in chunk order)."""
    if not files:
        return position
    arrays = [np.fromfile(f, dtype=np.uint32) for f, _ in files]
    data, tris, counts, sizes = kernels.merge_partition(arrays, [unit_lo for _, unit_lo in files], part)
    del arrays
    for f, _ in files:
        f.unlink()
    if not tris:
        return position
    postings.write(data)
    lengths = np.frombuffer(sizes, dtype=np.uint64)
    table.keys.append(np.frombuffer(tris, dtype=np.uint32))
    table.offsets.append(np.uint64(position) + np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.uint64))
    found = np.frombuffer(counts, dtype=np.uint32)
    table.raw.append(found <= _RAW_MAX)
    table.counts.append(found)
    return position + len(data)


def _write_partition(keys: np.ndarray, postings: Any, position: int, table: _TrigramTable) -> int:
    tris = (keys >> np.uint64(32)).astype(np.uint32)
    units = (keys & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    del keys
    bounds = np.flatnonzero(np.diff(tris)) + 1
    group_starts = np.concatenate([[0], bounds]).astype(np.int64)
    group_ends = np.concatenate([bounds, [len(tris)]]).astype(np.int64)
    counts = group_ends - group_starts
    raw = counts <= _RAW_MAX
    # Rare trigrams (most of them) are copied as raw unit-id runs in one slice per stretch; only common
    # ones become roaring bitmaps, so the Python loop runs once per common trigram, not per trigram.
    sizes = counts * 4
    bitmaps: dict[int, bytes] = {}
    for g in np.flatnonzero(~raw).tolist():
        bitmaps[g] = bitmap_of(units[group_starts[g] : group_ends[g]]).serialize()
        sizes[g] = len(bitmaps[g])
    offsets = (position + np.concatenate([[0], np.cumsum(sizes)[:-1]])).astype(np.uint64)
    previous = 0
    for g in [*sorted(bitmaps), len(group_starts)]:
        if g > previous:
            postings.write(units[group_starts[previous] : group_ends[g - 1]].tobytes())
        if g < len(group_starts):
            postings.write(bitmaps[g])
        previous = g + 1
    pos = position + int(sizes.sum())
    table.keys.append(tris[group_starts])
    table.offsets.append(offsets)
    table.raw.append(raw)
    table.counts.append(counts.astype(np.uint32))
    return pos


def trigram_keys(content_path: str, starts: np.ndarray, out_prefix: str) -> None:
    """Write the unique (trigram, unit) keys of a chunk's units into partition files `out_prefix.p<n>`.

    `starts` holds the absolute content offsets of at most _CHUNK_UNITS units plus the end of the last one.
    Keys are uint32 `(trigram & 0xFFFF) << 16 | unit rank in the chunk`, units ascending within a file. Runs
    in a worker process; trigrams are ASCII case-folded and never span two units (nor, so, two documents).
    """
    if int(starts[-1]) - int(starts[0]) == 0:
        return
    content = np.memmap(content_path, dtype=np.uint8, mode="r", shape=(int(starts[-1]),))
    outs = _PartitionFiles(out_prefix)
    kernels = native.kernels()
    if kernels is not None:
        try:
            keys, bounds = kernels.unit_trigrams(content, np.ascontiguousarray(starts, dtype=np.int64))
            edges = np.frombuffer(bounds, dtype=np.int64).tolist()
            view = memoryview(keys)
            for p in range(_PARTITIONS):
                if edges[p + 1] > edges[p]:
                    outs.write(p, view[edges[p] * 4 : edges[p + 1] * 4])
        finally:
            outs.close()
        return
    n_units = len(starts) - 1
    try:
        lo = 0
        while lo < n_units:
            hi = int(np.searchsorted(starts, starts[lo] + _BATCH_BYTES, side="right")) - 1
            # At most 256 units per batch: (local unit, trigram) then fits a uint32 sort key.
            hi = min(max(hi, lo + 1), n_units, lo + _BATCH_UNITS)
            _batch_keys(content, starts, lo, hi, outs)
            lo = hi
    finally:
        outs.close()


class _PartitionFiles:
    """A chunk's partition files, each created on its first write.

    A small repository touches a few partitions: creating all 256 files per chunk made building a shard of a
    few files cost ~300 file creations (seconds on a slow disk).
    """

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.files: dict[int, Any] = {}

    def write(self, part: int, data: bytes | memoryview) -> None:
        f = self.files.get(part)
        if f is None:
            f = self.files[part] = open(f"{self.prefix}.p{part}", "ab")  # noqa: SIM115 - closed in close()
        f.write(data)

    def close(self) -> None:
        for f in self.files.values():
            f.close()


def _batch_keys(content: np.ndarray, starts: np.ndarray, lo: int, hi: int, outs: _PartitionFiles) -> None:
    s, e = int(starts[lo]), int(starts[hi])
    if e - s < 3:
        return
    buf = np.array(content[s:e])
    upper = (buf >= 65) & (buf <= 90)
    buf[upper] |= 32
    tri = (buf[:-2].astype(np.uint32) << 16) | (buf[1:-1].astype(np.uint32) << 8) | buf[2:].astype(np.uint32)
    lengths = np.diff(starts[lo : hi + 1]).astype(np.int64)
    local = np.repeat(np.arange(hi - lo, dtype=np.uint32), lengths)
    valid = local[:-2] == local[2:]
    # np.sort + neighbour compare: several times faster than np.unique on this size.
    keys = np.sort((local[:-2][valid] << np.uint32(24)) | tri[valid])
    del tri, local, valid, buf
    if not len(keys):
        return
    keys = keys[np.concatenate([[True], keys[1:] != keys[:-1]])]
    tris = keys & np.uint32(0xFFFFFF)
    part = (tris >> np.uint32(_PART_SHIFT)).astype(np.uint8)
    order = np.argsort(part, kind="stable")
    full = ((tris[order] & np.uint32(0xFFFF)) << np.uint32(16)) | ((keys[order] >> np.uint32(24)) + np.uint32(lo))
    bounds = np.searchsorted(part[order], np.arange(_PARTITIONS + 1))
    for p in np.flatnonzero(np.diff(bounds)).tolist():
        outs.write(p, full[int(bounds[p]) : int(bounds[p + 1])].tobytes())
