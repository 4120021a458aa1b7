"""A query's selection on one shard: its filters as document bitmaps, and its candidate units.

Trigram postings name units (line-aligned ~12 KiB pieces of documents, see index/builder.py): a pattern's
candidates are the units holding all of its required trigrams. Patterns combine per document (AND/OR/NOT
are file-level); filters are document bitmaps, applied first and memoized per shard.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import numpy as np
from pyroaring import BitMap

from codewell.search.index.bitmaps import bitmap_of
from codewell.search.index.shard import DocSet, Shard
from codewell.search.query.parser import And, Node, Not, Pattern, Query
from codewell.search.query.regex import compile_regex, prefilter_literal, required_literals

__all__ = ["Candidates", "DeadlineExceeded", "Selection", "filter_docs", "select_docs", "selected_bytes"]

# Filters that leave at most this many documents scope the trigram lookups to their units.
_SCOPED_DOCS = 4096
# Filter results kept per shard (see _filtered).
_FILTER_CACHE = 64
# A single pattern with at most this many candidate units (~12 KiB each) is scanned without batches.
_DIRECT_UNITS = 512


class DeadlineExceeded(Exception):
    """The query's deadline passed while planning or verifying: the searcher returns what it has, timed out."""


def check_deadline(deadline: float | None) -> None:
    """Raise DeadlineExceeded once `deadline` (time.monotonic) has passed; None never expires."""
    if deadline is not None and time.monotonic() > deadline:
        raise DeadlineExceeded


class Candidates:
    """Per query and shard: each pattern's candidate units (looked up once) and the tree's documents.

    `scope`, when set, holds the units of the documents that the filters leave: candidate units are
    looked up within it, so a filtered query never materializes the corpus-wide candidates.
    """

    def __init__(self, shard: Shard, scope: BitMap | None = None, deadline: float | None = None) -> None:
        self.shard = shard
        self.scope = scope
        # Checked before each pattern's trigram lookup: a query of many terms stops planning in time.
        self.deadline = deadline
        self._units: dict[str, BitMap | None] = {}
        self._arrays: dict[str, np.ndarray] = {}
        self._docs: dict[Node, BitMap | None] = {}

    def units(self, pattern: Pattern) -> BitMap | None:
        """Units that may hold a match of `pattern`; None when the index cannot narrow it."""
        if pattern.value not in self._units:
            check_deadline(self.deadline)
            self._units[pattern.value] = self.shard.candidates(required_literals(pattern.value), self.scope)
        return self._units[pattern.value]

    def units_in(self, pattern: Pattern, docs: np.ndarray) -> np.ndarray | None:
        """Sorted ids of `pattern`'s candidate units that belong to `docs` (sorted document ids, not empty).

        None when the index cannot narrow the pattern (every unit of `docs` is a candidate).
        """
        units = self.units(pattern)
        if units is None:
            return None
        every = self._arrays.get(pattern.value)
        if every is None:
            every = self._arrays[pattern.value] = np.asarray(units.to_array(), dtype=np.int64)
        shard = self.shard
        if len(docs) == shard.doc_count:
            return every
        # The documents' units form one id range; keep the candidates inside it whose document is in `docs`.
        lo, hi = np.searchsorted(every, shard.doc_unit0[[docs[0], docs[-1] + 1]])
        inside = every[lo:hi]
        owner = shard.unit_doc[inside]
        at = np.minimum(np.searchsorted(docs, owner), len(docs) - 1)
        kept: np.ndarray = inside[docs[at] == owner]
        return kept

    def docs(self, node: Node) -> BitMap | None:
        """Documents that may satisfy the pattern tree (patterns combine per file); None = every document."""
        if node not in self._docs:
            self._docs[node] = self._tree_docs(node)
        return self._docs[node]

    def _tree_docs(self, node: Node) -> BitMap | None:
        if isinstance(node, Pattern):
            units = self.units(node)
            return None if units is None else self.shard.docs_of_units(units)
        if isinstance(node, Not):
            return None
        parts = [self.docs(child) for child in node.children]
        if isinstance(node, And):
            kept = [p for p in parts if p is not None]
            if not kept:
                return None
            acc = kept[0]
            for part in kept[1:]:
                acc = acc & part
            return acc
        if any(p is None for p in parts):
            return None
        union = BitMap()
        for found in parts:
            assert found is not None
            union |= found
        return union


def filter_docs(shard: Shard, query: Query, branch: str | DocSet | None) -> BitMap:
    """Documents that pass the branch (or the given documents), language and file filters."""
    if isinstance(branch, DocSet):
        docs = branch.docs.copy()
    else:
        docs = shard.branch_docs(branch) if branch is not None else shard.all_docs
    if query.languages:
        docs &= shard.docs_with_language(set(query.languages))
    if query.exclude_languages:
        docs -= shard.docs_with_language(set(query.exclude_languages))
    for pattern in query.files:
        docs &= _paths_matching(shard, pattern, query.case_sensitive)
    for pattern in query.exclude_files:
        docs -= _paths_matching(shard, pattern, query.case_sensitive)
    return docs


def _paths_matching(shard: Shard, pattern: str, case_sensitive: bool) -> BitMap:
    literal = prefilter_literal(pattern, regex=True)
    prefilter = compile_regex(re.escape(literal.decode()), case_sensitive=False) if literal else None
    return shard.docs_matching_path(compile_regex(pattern, case_sensitive=case_sensitive), prefilter)


@dataclass(frozen=True, slots=True)
class _Filtered:
    """What a query's filters leave of a shard: documents, and their units when they are few."""

    docs: BitMap
    scope: BitMap | None


def _filtered(shard: Shard, query: Query, branch: str | DocSet | None) -> _Filtered:
    """The filters' documents, memoized per shard: agents search one directory or language again and again."""
    base = ("docs", branch.key) if isinstance(branch, DocSet) else branch
    key = (base, query.files, query.exclude_files, query.languages, query.exclude_languages, query.case_sensitive)
    found: _Filtered | None = shard.filter_cache.get(key)
    if found is None:
        # Shared by later queries: callers combine these bitmaps with `&`, never modify them in place.
        docs = filter_docs(shard, query, branch)
        scope = None
        if len(docs) <= _SCOPED_DOCS and len(docs) < shard.doc_count:
            scope = bitmap_of(shard.units_of(np.asarray(docs.to_array(), dtype=np.int64)))
        found = _Filtered(docs, scope)
        with shard.filter_lock:  # searches run in threads: evict and insert as one step
            if len(shard.filter_cache) >= _FILTER_CACHE:
                shard.filter_cache.pop(next(iter(shard.filter_cache)))
            shard.filter_cache[key] = found
    return found


class Selection:
    """A query's filters applied to a shard, and its candidates, looked up when first needed.

    `narrowed` says `filtered` was cut to a document range after the candidates' scope was chosen (a
    piece of a parallel search): candidate units must then be kept to the range.
    """

    def __init__(
        self, shard: Shard, query: Query, filtered: BitMap, candidates: Candidates, narrowed: bool = False
    ) -> None:
        self.shard, self.query, self.filtered, self.candidates = shard, query, filtered, candidates
        self.narrowed = narrowed
        self._docs: BitMap | None = None
        self._direct: tuple[BitMap | None] | None = None

    @property
    def docs(self) -> BitMap:
        """Documents worth verifying: the filtered ones that may satisfy the pattern tree."""
        if self._docs is None:
            docs = self.filtered
            expr = self.query.expr
            if docs and expr is not None and self.query.type != "path":
                found = self.candidates.docs(expr)
                if found is not None:
                    docs = docs & found
            self._docs = docs
        return self._docs

    def direct_units(self) -> BitMap | None:
        """The candidate units of a single-pattern query when they are few enough to scan at once."""
        if self._direct is None:
            self._direct = (self._direct_units(),)
        return self._direct[0]

    def _direct_units(self) -> BitMap | None:
        expr = self.query.expr
        if not isinstance(expr, Pattern) or self.query.type == "path" or not self.filtered:
            return None
        units = self.candidates.units(expr)
        if units is None or len(units) > _DIRECT_UNITS:
            return None
        if (self.candidates.scope is None or self.narrowed) and len(self.filtered) < self.shard.doc_count:
            # Candidates looked up beyond the filtered documents: keep the units of those documents only.
            kept = self.candidates.units_in(expr, np.asarray(self.filtered.to_array(), dtype=np.int64))
            assert kept is not None  # units() found candidates above
            units = bitmap_of(kept)
        return units

    def within(self, lo: int, hi: int) -> Selection:
        return Selection(self.shard, self.query, self.filtered & BitMap(range(lo, hi)), self.candidates, True)


def select_docs(
    shard: Shard,
    query: Query,
    branch: str | DocSet | None,
    doc_range: tuple[int, int] | None = None,
    deadline: float | None = None,
) -> Selection:
    """The query's selection: the filters (path, language, branch) first, then trigram candidates.

    Filters come first because they are cheap bitmaps that often leave a handful of documents; the
    trigram candidates of the pattern tree are looked up within them, so a filtered query never scans
    content outside its filter. Path-only (`type:path`) and filter-only queries get the filtered set.
    """
    filtered = _filtered(shard, query, branch)
    if doc_range is None:
        return Selection(shard, query, filtered.docs, Candidates(shard, filtered.scope, deadline))
    docs = filtered.docs & BitMap(range(*doc_range))
    return Selection(shard, query, docs, Candidates(shard, filtered.scope, deadline), narrowed=True)


def selected_bytes(shard: Shard, docs: BitMap) -> int:
    """Content bytes of `docs` (what verification would scan at most)."""
    if not docs:
        return 0
    arr = np.asarray(docs.to_array(), dtype=np.int64)
    return int((shard.starts[arr + 1] - shard.starts[arr]).sum())
