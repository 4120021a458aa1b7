"""Read a shard: mmap'd content and arrays, trigram lookups, and offset → document/line mapping."""

from __future__ import annotations

import json
import mmap
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import re2
from pyroaring import BitMap

from codewell.search.query.regex import TRUE, Formula, Lit, LitAnd, LitOr

__all__ = ["Shard"]


def _trigrams(value: bytes) -> list[int]:
    return sorted({(value[i] << 16) | (value[i + 1] << 8) | value[i + 2] for i in range(len(value) - 2)})


@dataclass
class Shard:
    """An opened shard; immutable, safe to share between threads, closed when garbage-collected."""

    path: Path
    meta: dict[str, Any]
    content: Any  # mmap.mmap or bytes
    starts: np.ndarray
    line_base: np.ndarray
    newlines: np.ndarray
    tri_keys: np.ndarray
    tri_offs: np.ndarray
    tri_raw: np.ndarray
    postings: Any
    paths: list[str]
    languages: list[str]
    skipped: list[str]
    _path_cache: dict[tuple[bytes, bool], BitMap] = field(default_factory=dict)

    @classmethod
    def open(cls, path: Path) -> Shard:
        """Open the shard directory at `path` (content and postings are mapped, not read)."""
        meta = json.loads((path / "meta.json").read_text())
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
            newlines=load("newlines.npy"),
            tri_keys=load("tri_keys.npy"),
            tri_offs=load("tri_offs.npy"),
            tri_raw=load("tri_raw.npy"),
            postings=_map(path / "postings.bin"),
            paths=docs["paths"],
            languages=docs["languages"],
            skipped=docs["skipped"],
        )

    @property
    def doc_count(self) -> int:
        return len(self.paths)

    @property
    def branches(self) -> dict[str, str]:
        """Indexed branch name → commit sha."""
        branches: dict[str, str] = self.meta.get("branches", {})
        return branches

    @property
    def all_docs(self) -> BitMap:
        """A fresh (mutable) bitmap of every document."""
        return BitMap(range(self.doc_count))

    def branch_docs(self, branch: str) -> BitMap:
        """Documents present in `branch` (empty when the branch is not indexed)."""
        raw = self.meta.get("branch_docs", {}).get(branch)
        return BitMap.deserialize(bytes.fromhex(raw)) if raw else BitMap()

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

    # Trigram index -----------------------------------------------------------------------------

    def _find(self, trigram: int) -> int:
        # The key must have the array's dtype: a Python int would make numpy cast the whole array per call.
        return int(np.searchsorted(self.tri_keys, np.uint32(trigram)))

    def posting(self, trigram: int) -> BitMap:
        """Documents containing the (case-folded) trigram."""
        i = self._find(trigram)
        if i >= len(self.tri_keys) or int(self.tri_keys[i]) != trigram:
            return BitMap()
        a, b = int(self.tri_offs[i]), int(self.tri_offs[i + 1])
        if self.tri_raw[i]:
            return BitMap(np.frombuffer(self.postings, dtype=np.uint32, count=(b - a) // 4, offset=a))
        return BitMap.deserialize(self.postings[a:b])

    def _posting_size(self, trigram: int) -> int:
        i = self._find(trigram)
        if i >= len(self.tri_keys) or int(self.tri_keys[i]) != trigram:
            return 0
        return int(self.tri_offs[i + 1]) - int(self.tri_offs[i])

    def candidates(self, formula: Formula) -> BitMap | None:
        """Documents that may satisfy `formula`; None means "every document" (no index help)."""
        if formula is TRUE:
            return None
        if isinstance(formula, Lit):
            tris = sorted(_trigrams(formula.value), key=self._posting_size)
            result: BitMap | None = None
            for t in tris:
                docs = self.posting(t)
                result = docs if result is None else result & docs
                if not result:
                    break
            return result if result is not None else None
        if isinstance(formula, LitAnd):
            acc: BitMap | None = None
            for child in formula.children:
                found = self.candidates(child)
                if found is None:
                    continue
                acc = found if acc is None else acc & found
                if not acc:
                    break
            return acc
        if isinstance(formula, LitOr):
            union = BitMap()
            for child in formula.children:
                part = self.candidates(child)
                if part is None:
                    return None
                union |= part
            return union
        return None

    # Offsets → lines ---------------------------------------------------------------------------

    def doc_of(self, offset: int) -> int:
        return int(np.searchsorted(self.starts, offset, side="right")) - 1

    def line_index(self, doc: int, offset: int) -> int:
        """Global index (into `newlines`) of the line containing `offset` of document `doc`."""
        base, top = int(self.line_base[doc]), int(self.line_base[doc + 1])
        rel = offset - int(self.starts[doc])
        return base + int(np.searchsorted(self.newlines[base:top], np.uint32(rel), side="left"))

    def line_span(self, doc: int, line: int) -> tuple[int, int]:
        """Absolute [start, end) of global line `line` of `doc`, without the newline."""
        base = int(self.line_base[doc])
        doc_start = int(self.starts[doc])
        end = doc_start + int(self.newlines[line])
        start = doc_start if line == base else doc_start + int(self.newlines[line - 1]) + 1
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
