"""Read a shard: mmap'd content and arrays, trigram lookups (→ units), and offset → document/line mapping."""

from __future__ import annotations

import json
import mmap
import threading
from bisect import bisect_left
from collections.abc import Hashable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import re2
from pyroaring import BitMap

from codewell.search import native
from codewell.search.index.bitmaps import bitmap_of
from codewell.search.index.builder import FORMAT_VERSION
from codewell.search.query.regex import TRUE, Formula, Lit, LitAnd, LitOr

__all__ = ["DocSet", "LineTables", "Shard", "ShardFormatError", "ShardRepo"]


# Candidate lookups stop reading posting lists of trigrams found in more than _COMMON of all units once
# at most _FEW_UNITS candidates remain (see Shard._literal_units).
_FEW_UNITS = 64
_COMMON = 0.25


def _trigrams(value: bytes) -> list[int]:
    return sorted({(value[i] << 16) | (value[i + 1] << 8) | value[i + 2] for i in range(len(value) - 2)})


class ShardFormatError(ValueError):
    """The shard was written in another format version (an earlier codewell): it must be rebuilt."""


@dataclass(frozen=True, slots=True)
class DocSet:
    """The documents of a shard a search may see (readable, live repositories at their selected branches).

    The base every filter narrows; `key` identifies the set within its shard for the filter memo (equal keys
    must mean equal documents). Pickled to the verification processes with the query.
    """

    key: Hashable
    docs: BitMap


@dataclass(frozen=True, slots=True)
class ShardRepo:
    """One repository of a (compound) shard: its facts and its run of documents [lo, hi)."""

    slot: int
    id: int | None
    name: str
    default_branch: str | None
    branches: dict[str, str]  # indexed branch → commit
    lo: int
    hi: int
    indexed_at: str | None
    branch_bits: dict[str, str]  # branch → serialized bitmap (hex) of its documents

    @property
    def search_branch(self) -> str | None:
        """The branch searched by default: the default branch, else the first indexed one (None: nothing)."""
        if self.default_branch in self.branches:
            return self.default_branch
        return next(iter(self.branches), None)

    def branch_docs(self, branch: str) -> BitMap:
        raw = self.branch_bits.get(branch)
        return BitMap.deserialize(bytes.fromhex(raw)) if raw else BitMap()


class LineTables(NamedTuple):
    """Memoryviews of the offset tables, for `bisect` from Python without numpy's per-call overhead."""

    starts: memoryview
    doc_page0: memoryview
    nl_pages: memoryview
    nl_low: memoryview
    unit_starts: memoryview


@dataclass
class Shard:
    """An opened shard; immutable, safe to share between threads, closed when garbage-collected."""

    path: Path
    meta: dict[str, Any]
    content: Any  # mmap.mmap or bytes
    starts: np.ndarray
    line_base: np.ndarray
    nl_low: np.ndarray
    nl_pages: np.ndarray
    doc_page0: np.ndarray
    unit_starts: np.ndarray
    doc_unit0: np.ndarray
    tri_keys: np.ndarray
    tri_offs: np.ndarray
    tri_raw: np.ndarray
    tri_counts: np.ndarray
    postings: Any
    paths: list[str]
    languages: list[str]
    skipped: list[str]
    _path_cache: dict[tuple[bytes, bool], BitMap] = field(default_factory=dict)
    # The searcher's memo of filter results (query filters → documents), bounded by the searcher.
    filter_cache: dict[Any, Any] = field(default_factory=dict)
    filter_lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def open(cls, path: Path) -> Shard:
        """Open the shard directory at `path` (content and postings are mapped, not read)."""
        meta = json.loads((path / "meta.json").read_text())
        if meta.get("format") != FORMAT_VERSION:
            found = meta.get("format")
            raise ShardFormatError(f"{path.name} has index format {found}, this version reads {FORMAT_VERSION}")
        docs = json.loads((path / "docs.json").read_text())

        def load(name: str) -> np.ndarray:
            # A plain ndarray view of the mapping: no memmap subclass overhead on every scalar access.
            array: np.ndarray = np.asarray(np.load(path / name, mmap_mode="r"))
            return array

        return cls(
            path=path,
            meta=meta,
            content=_map(path / "content.bin"),
            # Small per-document arrays as int64, so lookups with Python ints never promote to float64.
            starts=np.load(path / "starts.npy").astype(np.int64),
            line_base=np.load(path / "line_base.npy").astype(np.int64),
            nl_low=load("nl_low.npy"),
            nl_pages=np.load(path / "nl_pages.npy").astype(np.int64),
            doc_page0=np.load(path / "doc_page0.npy").astype(np.int64),
            unit_starts=np.load(path / "unit_starts.npy").astype(np.int64),
            doc_unit0=np.load(path / "doc_unit0.npy").astype(np.int64),
            tri_keys=load("tri_keys.npy"),
            tri_offs=load("tri_offs.npy"),
            tri_raw=load("tri_raw.npy"),
            tri_counts=load("tri_counts.npy"),
            postings=_map(path / "postings.bin"),
            paths=docs["paths"],
            languages=docs["languages"],
            skipped=docs["skipped"],
        )

    @cached_property
    def page_shift(self) -> int:
        """log2 of the page size of the newline table (16 unless a test built tiny pages)."""
        return int(self.meta["page_shift"])

    @property
    def doc_count(self) -> int:
        return len(self.paths)

    @cached_property
    def repos(self) -> list[ShardRepo]:
        """The repositories whose documents the shard holds, by slot (one, or many in a compound shard)."""
        return [
            ShardRepo(
                slot,
                r.get("id"),
                r.get("name", ""),
                r.get("default_branch"),
                dict(r.get("branches", {})),
                int(r["docs"][0]),
                int(r["docs"][1]),
                r.get("indexed_at"),
                dict(r.get("branch_docs", {})),
            )
            for slot, r in enumerate(self.meta.get("repos", []))
        ]

    @property
    def branches(self) -> dict[str, str]:
        """Indexed branch name → commit sha of a single-repository shard ({} for a compound one)."""
        return self.repos[0].branches if len(self.repos) == 1 else {}

    @property
    def all_docs(self) -> BitMap:
        """A fresh (mutable) bitmap of every document."""
        return BitMap(range(self.doc_count))

    def branch_docs(self, branch: str) -> BitMap:
        """Documents present in `branch` of any of the shard's repositories (empty when not indexed)."""
        found = BitMap()
        for repo in self.repos:
            found |= repo.branch_docs(branch)
        return found

    @cached_property
    def doc_slot(self) -> np.ndarray:
        """Each document's repository slot (documents of a repository are one run)."""
        slots = np.zeros(self.doc_count, dtype=np.int32)
        for repo in self.repos:
            slots[repo.lo : repo.hi] = repo.slot
        return slots

    @cached_property
    def default_docs(self) -> BitMap:
        """Documents of every repository's search branch (ShardRepo.search_branch); shared, never modify."""
        found = BitMap()
        for repo in self.repos:
            branch = repo.search_branch
            if branch is not None:
                found |= repo.branch_docs(branch)
        return found

    @cached_property
    def sizes(self) -> list[int]:
        """Each document's size in git (its content in content.bin may carry one added final newline)."""
        sizes: list[int] = json.loads((self.path / "docs.json").read_text())["sizes"]
        return sizes

    def doc_span(self, doc: int) -> tuple[int, int]:
        """(offset, length) in content.bin of `doc`'s bytes exactly as in git; length 0 when it is skipped."""
        start = int(self.starts[doc])
        stored = int(self.starts[doc + 1]) - start
        return start, min(stored, self.sizes[doc])

    def doc_bytes(self, doc: int) -> memoryview:
        """`doc`'s bytes exactly as in git (a view of the mapping, no copy); empty when it is skipped."""
        start, length = self.doc_span(doc)
        return memoryview(self.content)[start : start + length]

    @cached_property
    def path_blob(self) -> bytes:
        """Every path followed by a newline, for one-call regex matching over all paths."""
        return "".join(p + "\n" for p in self.paths).encode("utf-8", "surrogateescape")

    @cached_property
    def path_starts(self) -> np.ndarray:
        lengths = [len(p.encode("utf-8", "surrogateescape")) + 1 for p in self.paths]
        return np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int64)

    def docs_matching_path(self, regex: Any, literal: Any = None) -> BitMap:
        """Documents whose path matches the compiled RE2 `regex` (a copy; results are cached per shard).

        `literal`, a compiled regex for a literal every match contains, is scanned for first so that
        anchored patterns (`^fs/ext4/`) need not run a DFA over every path.
        """
        key = (regex.pattern, regex.options.case_sensitive)
        cached = self._path_cache.get(key)
        if cached is None:
            cached = self._match_paths(regex, literal)
            if len(self._path_cache) > 256:
                self._path_cache.clear()
            self._path_cache[key] = cached
        return BitMap(cached)

    def _match_paths(self, regex: Any, literal: Any) -> BitMap:
        blob = self.path_blob
        found: list[int] = []
        pos, end = 0, len(blob)
        starts = self.path_starts
        anchor = re2._re2.RE2.Anchor.UNANCHORED
        while pos < end:
            if literal is not None:
                hit = literal._regexp.Match(anchor, blob, pos, end)[0][0]
                if hit < 0:
                    break
                doc = int(np.searchsorted(starts, hit, side="right")) - 1
                line_start, line_end = int(starts[doc]), int(starts[doc + 1]) - 1
                if regex._regexp.Match(anchor, blob, line_start, line_end)[0][0] >= 0:
                    found.append(doc)
                pos = line_end + 1
                continue
            span = regex._regexp.Match(anchor, blob, pos, end)[0]
            if span[0] < 0:
                break
            doc = int(np.searchsorted(starts, span[0], side="right")) - 1
            if doc >= len(self.paths):
                break
            found.append(doc)
            pos = int(starts[doc + 1])
        return BitMap(found)

    def docs_with_language(self, languages: set[str]) -> BitMap:
        return BitMap(i for i, lang in enumerate(self.languages) if lang in languages)

    @cached_property
    def _trigram_views(self) -> tuple[memoryview, memoryview, memoryview]:
        """Keys, counts, and a directory of the keys by their first two bytes (2^16 + 1 entries).

        The directory narrows a lookup to the few keys sharing a prefix, so finding a trigram touches two
        or three cache lines instead of the ~18 a bisection of all keys touches (each one a miss when other
        work evicted the caches: an absent literal went from 137 to 108 us right after a ripgrep run).
        """
        prefixes = np.arange(1 << 16, dtype=np.uint32) << np.uint32(8)
        directory = np.searchsorted(self.tri_keys, prefixes).astype(np.uint32)
        directory = np.append(directory, np.uint32(len(self.tri_keys)))
        return memoryview(self.tri_keys.data), memoryview(self.tri_counts.data), memoryview(directory.data)

    @cached_property
    def tables(self) -> LineTables:
        arrays = (self.starts, self.doc_page0, self.nl_pages, self.nl_low, self.unit_starts)
        views = (memoryview(a.data) for a in arrays)
        return LineTables(*views)

    # Units ---------------------------------------------------------------------------------------

    @property
    def unit_count(self) -> int:
        return len(self.unit_starts) - 1

    @cached_property
    def unit_doc(self) -> np.ndarray:
        """Document of each unit."""
        counts = np.diff(self.doc_unit0)
        return np.repeat(np.arange(self.doc_count, dtype=np.int64), counts)

    def units_of(self, docs: np.ndarray) -> np.ndarray:
        """Every unit of the (sorted) documents `docs`, ascending."""
        firsts, lasts = self.doc_unit0[docs], self.doc_unit0[docs + 1]
        counts = lasts - firsts
        total = int(counts.sum())
        if total == 0:
            return np.zeros(0, dtype=np.int64)
        # firsts repeated per unit, plus the unit's rank within its document.
        offsets = np.repeat(firsts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
        return offsets + np.arange(total, dtype=np.int64)

    def docs_of_units(self, units: BitMap) -> BitMap:
        """The documents that the units belong to."""
        if not units:
            return BitMap()
        docs = self.unit_doc[np.asarray(units.to_array(), dtype=np.int64)]
        # Units ascend, so their documents do: drop repeats by comparing neighbours.
        return bitmap_of(docs[np.concatenate([[True], docs[1:] != docs[:-1]])])

    # Trigram index -----------------------------------------------------------------------------

    def _posting_at(self, i: int) -> BitMap:
        offsets, raw = self._posting_views
        a, b = offsets[i], offsets[i + 1]
        if raw[i]:
            return BitMap(np.frombuffer(self.postings, dtype=np.uint32, count=(b - a) // 4, offset=a).tolist())
        return BitMap.deserialize(self.postings[a:b])

    @cached_property
    def _posting_views(self) -> tuple[memoryview, memoryview]:
        # Python ints from memoryviews: numpy scalar indexing costs ~10x more per access.
        return memoryview(self.tri_offs.data), memoryview(self.tri_raw.astype(np.uint8).data)

    def _literal_units(self, value: bytes, scope: BitMap | None) -> BitMap:
        """Units (within `scope`) holding every trigram of `value`, fewest units first.

        Once at most _FEW_UNITS candidates remain, lists of trigrams in more than _COMMON of all units are
        not read: they rarely remove a unit, and scanning a unit costs less than reading such a list (the
        candidates stay a superset of the matches).
        """
        # A literal has a handful of trigrams: bisecting memoryviews beats numpy's per-call overhead here.
        keys, counts, directory = self._trigram_views
        found: list[tuple[int, int]] = []
        for trigram in _trigrams(value):
            hi = directory[(trigram >> 8) + 1]
            i = bisect_left(keys, trigram, directory[trigram >> 8], hi)
            if i == hi or keys[i] != trigram:
                return BitMap()
            found.append((counts[i], i))
        found.sort()
        common = _COMMON * self.unit_count
        kernels = native.kernels()
        if scope is not None and kernels is not None:
            return self._scoped_units(kernels, found, scope, common)
        result: BitMap | None = None if scope is None else scope.copy()
        for count, i in found:
            if result is not None and len(result) <= _FEW_UNITS and count > common:
                break
            posting = self._posting_at(i)
            result = posting if result is None else result & posting
            if not result:
                break
        return result if result is not None else BitMap()

    def _scoped_units(self, kernels: Any, found: list[tuple[int, int]], scope: BitMap, common: float) -> BitMap:
        """_literal_units within a filter's few units: each list is tested in place for those units only.

        Decoding a posting list of ~18k units into a bitmap to intersect it with ~200 units cost more than
        the rest of a filtered query (`mutex_lock file:^fs/ext4/`); `posting_keep` reads just the bits.
        """
        offsets, raw = self._posting_views
        kept = scope.to_array().tolist()
        for count, i in found:
            if len(kept) <= _FEW_UNITS and count > common:
                break
            kept = kernels.posting_keep(self.postings, offsets[i], offsets[i + 1], raw[i], kept)
            if not kept:
                break
        return BitMap(kept)

    def candidates(self, formula: Formula, scope: BitMap | None = None) -> BitMap | None:
        """Units (within `scope`, if given) that may hold a match of one pattern whose required literals are `formula`.

        None means "every unit (of the scope)" (no index help). Units, not documents: literals that one pattern requires
        all lie on the matching line, hence in one unit (combine patterns per document with
        `docs_of_units`).
        """
        if formula is TRUE:
            return None
        if isinstance(formula, Lit):
            if len(formula.value) < 3:
                return None
            return self._literal_units(formula.value, scope)
        if isinstance(formula, LitAnd):
            acc: BitMap | None = None
            for child in formula.children:
                found = self.candidates(child, scope)
                if found is None:
                    continue
                acc = found if acc is None else acc & found
                if not acc:
                    break
            return acc
        if isinstance(formula, LitOr):
            union = BitMap()
            for child in formula.children:
                part = self.candidates(child, scope)
                if part is None:
                    return None
                union |= part
            return union
        return None

    # Offsets → lines ---------------------------------------------------------------------------

    def line_index(self, doc: int, offset: int) -> int:
        """Global line index of the line containing absolute `offset` of document `doc`."""
        rel = offset - int(self.starts[doc])
        page = int(self.doc_page0[doc]) + (rel >> self.page_shift)
        lo, hi = int(self.nl_pages[page]), int(self.nl_pages[page + 1])
        low = np.uint16(rel & ((1 << self.page_shift) - 1))
        return lo + int(np.searchsorted(self.nl_low[lo:hi], low, side="left"))

    def newline_offset(self, doc: int, line: int) -> int:
        """Offset, relative to the document, of the newline that ends global line `line` of `doc`."""
        first, last = int(self.doc_page0[doc]), int(self.doc_page0[doc + 1])
        page = int(np.searchsorted(self.nl_pages[first:last], line, side="right")) - 1
        return (page << self.page_shift) | int(self.nl_low[line])

    def line_span(self, doc: int, line: int) -> tuple[int, int]:
        """Absolute [start, end) of global line `line` of `doc`, without the newline."""
        base = int(self.line_base[doc])
        doc_start = int(self.starts[doc])
        end = doc_start + self.newline_offset(doc, line)
        start = doc_start if line == base else doc_start + self.newline_offset(doc, line - 1) + 1
        return start, end

    def line_text(self, doc: int, line: int) -> bytes:
        start, end = self.line_span(doc, line)
        return bytes(self.content[start:end])


def _map(path: Path) -> Any:
    size = path.stat().st_size
    if size == 0:
        return b""
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
