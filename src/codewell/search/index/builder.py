"""Build one immutable shard (a directory of flat files) from a stream of documents.

Layout (see docs/design.md): `content.bin` (every document's bytes, each ending in a newline, read through
mmap), `starts.npy` (document offsets), `line_base.npy` + `newlines.npy` (per-document newline offsets, so a
match offset maps to a line with one searchsorted), `tri_keys.npy`/`tri_offs.npy`/`tri_raw.npy` +
`postings.bin` (case-folded trigram → documents), `docs.json` (paths, languages, skip reasons, branch
membership) and `meta.json`. The shard is written to `<dir>.tmp` and renamed into place only when complete.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
from pyroaring import BitMap

from codewell.search.index.languages import language_of

__all__ = ["FORMAT_VERSION", "MAX_FILE_SIZE", "SourceDoc", "build_shard", "skip_reason"]

FORMAT_VERSION = 1
# Files above this size are usually generated or data; like Zoekt we index their path only (#4).
MAX_FILE_SIZE = 1 << 20
# Trigram keys are grouped into this many partitions so the final sort never holds every key at once.
_PARTITIONS = 256
_PART_SHIFT = 16  # the first byte of the trigram chooses the partition (keeps keys globally sorted)
# Posting lists with at most this many documents are stored as raw uint32 arrays (cheaper than a bitmap).
_RAW_MAX = 8
_BATCH_BYTES = 8 << 20
_BATCH_DOCS = 256


@dataclass(frozen=True, slots=True)
class SourceDoc:
    """One file version to index; `data` is None when the file is skipped (path-only)."""

    path: str
    data: bytes | None
    size: int
    branches: frozenset[str]
    skipped: str = ""  # "", "binary", "too large"


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
    branches: dict[str, list[int]] = field(default_factory=dict)


def build_shard(
    target: Path,
    meta: dict[str, Any],
    docs: Iterable[SourceDoc],
    *,
    workers: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> Path:
    """Write a complete shard to `target` atomically (build in `target.tmp`, then rename); return `target`.

    `progress(docs_done, bytes_done)` is called while reading documents.
    """
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        info = _write_content(tmp, docs, progress)
        _write_postings(tmp, info.paths, workers)
        branches = {name: _serialize_ids(ids) for name, ids in info.branches.items()}
        (tmp / "docs.json").write_text(
            json.dumps({"paths": info.paths, "languages": info.languages, "skipped": info.skipped, "sizes": info.sizes})
        )
        full_meta = {
            **meta,
            "format": FORMAT_VERSION,
            "docs": len(info.paths),
            "content_bytes": (tmp / "content.bin").stat().st_size,
            "branch_docs": branches,
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


def _write_content(out: Path, docs: Iterable[SourceDoc], progress: Callable[[int, int], None] | None) -> _Docs:
    info = _Docs()
    starts: list[int] = [0]
    line_base: list[int] = [0]
    newline_chunks: list[np.ndarray] = []
    offset = 0
    lines = 0
    with open(out / "content.bin", "wb") as content:
        for doc in docs:
            doc_id = len(info.paths)
            info.paths.append(doc.path)
            info.languages.append(language_of(doc.path))
            info.skipped.append(doc.skipped)
            info.sizes.append(doc.size)
            for branch in doc.branches:
                info.branches.setdefault(branch, []).append(doc_id)
            data = doc.data if not doc.skipped and doc.data is not None else b""
            if data and not data.endswith(b"\n"):
                # Every document ends in a newline so no match (and no trigram we query) spans two files.
                data += b"\n"
            if data:
                content.write(data)
                nl = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10).astype(np.uint32)
                newline_chunks.append(nl)
                lines += len(nl)
                offset += len(data)
            starts.append(offset)
            line_base.append(lines)
            if progress is not None and doc_id % 256 == 0:
                progress(doc_id + 1, offset)
    if progress is not None:
        progress(len(info.paths), offset)
    np.save(out / "starts.npy", np.asarray(starts, dtype=np.uint64))
    np.save(out / "line_base.npy", np.asarray(line_base, dtype=np.uint64))
    newlines = np.concatenate(newline_chunks) if newline_chunks else np.zeros(0, dtype=np.uint32)
    np.save(out / "newlines.npy", newlines)
    return info


def _write_postings(out: Path, paths: list[str], workers: int) -> None:
    starts = np.load(out / "starts.npy")
    total = int(starts[-1])
    n_docs = len(paths)
    parts_dir = Path(tempfile.mkdtemp(prefix="parts-", dir=out))
    ranges = _split_docs(starts, workers if total > 32 * _BATCH_BYTES else 1)
    if len(ranges) > 1:
        with ProcessPoolExecutor(len(ranges), mp_context=get_context("spawn")) as pool:
            futures = [
                pool.submit(trigram_keys, str(out), lo, hi, str(parts_dir / f"w{i}"))
                for i, (lo, hi) in enumerate(ranges)
            ]
            for f in futures:
                f.result()
    elif n_docs:
        trigram_keys(str(out), 0, n_docs, str(parts_dir / "w0"))
    keys_out: list[np.ndarray] = []
    offs_out: list[np.ndarray] = []
    raw_out: list[np.ndarray] = []
    position = 0
    with open(out / "postings.bin", "wb") as postings:
        for part in range(_PARTITIONS):
            files = sorted(parts_dir.glob(f"w*.p{part}"))
            arrays = [np.fromfile(f, dtype=np.uint64) for f in files]
            if not arrays:
                continue
            keys = np.sort(np.concatenate(arrays))
            del arrays
            if not len(keys):
                continue
            position = _write_partition(keys, postings, position, keys_out, offs_out, raw_out)
    shutil.rmtree(parts_dir, ignore_errors=True)
    tri_keys = np.concatenate(keys_out) if keys_out else np.zeros(0, dtype=np.uint32)
    tri_offs = np.concatenate([*offs_out, np.asarray([position], dtype=np.uint64)])
    tri_raw = np.concatenate(raw_out) if raw_out else np.zeros(0, dtype=np.bool_)
    np.save(out / "tri_keys.npy", tri_keys)
    np.save(out / "tri_offs.npy", tri_offs)
    np.save(out / "tri_raw.npy", tri_raw)


def _write_partition(
    keys: np.ndarray,
    postings: Any,
    position: int,
    keys_out: list[np.ndarray],
    offs_out: list[np.ndarray],
    raw_out: list[np.ndarray],
) -> int:
    tris = (keys >> np.uint64(32)).astype(np.uint32)
    docs = (keys & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    del keys
    bounds = np.flatnonzero(np.diff(tris)) + 1
    group_starts = np.concatenate([[0], bounds]).astype(np.int64)
    group_ends = np.concatenate([bounds, [len(tris)]]).astype(np.int64)
    counts = group_ends - group_starts
    raw = counts <= _RAW_MAX
    # Rare trigrams (most of them) are copied as raw doc-id runs in one slice per stretch; only common
    # ones become roaring bitmaps, so the Python loop runs once per common trigram, not per trigram.
    sizes = counts * 4
    bitmaps: dict[int, bytes] = {}
    for g in np.flatnonzero(~raw).tolist():
        bitmaps[g] = BitMap(docs[group_starts[g] : group_ends[g]]).serialize()
        sizes[g] = len(bitmaps[g])
    offsets = (position + np.concatenate([[0], np.cumsum(sizes)[:-1]])).astype(np.uint64)
    previous = 0
    for g in [*sorted(bitmaps), len(group_starts)]:
        if g > previous:
            postings.write(docs[group_starts[previous] : group_ends[g - 1]].tobytes())
        if g < len(group_starts):
            postings.write(bitmaps[g])
        previous = g + 1
    pos = position + int(sizes.sum())
    keys_out.append(tris[group_starts])
    offs_out.append(offsets)
    raw_out.append(raw)
    return pos


def _split_docs(starts: np.ndarray, workers: int) -> list[tuple[int, int]]:
    n = len(starts) - 1
    if workers <= 1 or n < 2:
        return [(0, n)]
    total = int(starts[-1])
    cuts = [0]
    for k in range(1, workers):
        cuts.append(int(np.searchsorted(starts, total * k // workers)))
    cuts.append(n)
    return [(a, b) for a, b in itertools.pairwise(cuts) if b > a]


def trigram_keys(shard_dir: str, doc_lo: int, doc_hi: int, out_prefix: str) -> None:
    """Write unique `trigram << 32 | doc` keys of documents [doc_lo, doc_hi) into partition files.

    Runs in a worker process; trigrams are ASCII case-folded and never span two documents.
    """
    starts = np.load(Path(shard_dir) / "starts.npy")
    size = int(starts[-1])
    if size == 0:
        return
    content = np.memmap(Path(shard_dir) / "content.bin", dtype=np.uint8, mode="r")
    outs = [open(f"{out_prefix}.p{p}", "ab") for p in range(_PARTITIONS)]  # noqa: SIM115
    try:
        lo = doc_lo
        while lo < doc_hi:
            hi = int(np.searchsorted(starts, starts[lo] + _BATCH_BYTES, side="right")) - 1
            # At most 256 documents per batch: (local doc, trigram) then fits a uint32 sort key.
            hi = min(max(hi, lo + 1), doc_hi, lo + _BATCH_DOCS)
            _batch_keys(content, starts, lo, hi, outs)
            lo = hi
    finally:
        for f in outs:
            f.close()


def _batch_keys(content: np.ndarray, starts: np.ndarray, lo: int, hi: int, outs: list[Any]) -> None:
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
    full = (tris[order].astype(np.uint64) << np.uint64(32)) | ((keys[order] >> np.uint32(24)).astype(np.uint64) + lo)
    bounds = np.searchsorted(part[order], np.arange(_PARTITIONS + 1))
    for p in np.flatnonzero(np.diff(bounds)).tolist():
        outs[p].write(full[int(bounds[p]) : int(bounds[p + 1])].tobytes())
