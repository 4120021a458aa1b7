"""Evaluate a parsed query on one shard: filters as bitmaps, trigram candidates, native RE2 verification.

Trigram postings name units (line-aligned ~12 KiB pieces of documents): a pattern's candidates are the units
holding all of its required trigrams, and only those are scanned. Patterns combine per document (AND/OR/NOT
are file-level), filters are document bitmaps. Verification never loops over files in Python: consecutive
candidate units form one contiguous range of the mmap'd content, and RE2 scans each range in one call per
matching line; offsets map to documents and lines through the stored document and newline offsets.
"""

from __future__ import annotations

import itertools
import re
import time
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import re2
from pyroaring import BitMap

from codewell.search.index.bitmaps import bitmap_of
from codewell.search.index.shard import Shard
from codewell.search.literal_scan import available as hyperscan_available
from codewell.search.literal_scan import scan_literal
from codewell.search.query.parser import And, Node, Not, Or, Pattern, Query
from codewell.search.query.regex import Lit, LitAnd, compile_regex, required_literals

__all__ = ["ShardHit", "ShardResult", "search_many", "search_shard", "search_shard_parallel", "select_docs"]

_UNANCHORED = re2._re2.RE2.Anchor.UNANCHORED
# Verification batches grow geometrically: the first page comes from a small slice of the shard, while
# exhaustive searches make few, large native calls.
_FIRST_BATCH_BYTES = 1 << 20
_MAX_BATCH_BYTES = 64 << 20
# Literal scans go through Hyperscan when it is available (tests switch it off to compare both engines).
USE_HYPERSCAN = True
# Filters that leave at most this many documents scope the trigram lookups to their units.
_SCOPED_DOCS = 4096
# Filter results kept per shard (see _filtered).
_FILTER_CACHE = 64
# Gaps of at most this many bytes between candidate units of one document are scanned through (_bridges).
_BRIDGE_BYTES = 16 << 10
# A single pattern with at most this many candidate units (~12 KiB each) is scanned without batches.
_DIRECT_UNITS = 512
# Up to this many match offsets, a per-offset bisect beats the vectorized binary search's fixed cost.
_FEW_OFFSETS = 64


@dataclass(slots=True)
class ShardHit:
    """A matching document: global line indices of its matching lines (empty for path-only matches)."""

    doc: int
    lines: list[int]


@dataclass(slots=True)
class ShardResult:
    hits: list[ShardHit] = field(default_factory=list)
    match_count: int = 0
    limit_hit: bool = False
    timed_out: bool = False


class Candidates:
    """Per query and shard: each pattern's candidate units (looked up once) and the tree's documents.

    `scope`, when set, holds the units of the documents that the filters leave: candidate units are
    looked up within it, so a filtered query never materializes the corpus-wide candidates.
    """

    def __init__(self, shard: Shard, scope: BitMap | None = None) -> None:
        self.shard = shard
        self.scope = scope
        self._units: dict[str, BitMap | None] = {}
        self._arrays: dict[str, np.ndarray] = {}
        self._docs: dict[Node, BitMap | None] = {}

    def units(self, pattern: Pattern) -> BitMap | None:
        """Units that may hold a match of `pattern`; None when the index cannot narrow it."""
        if pattern.value not in self._units:
            self._units[pattern.value] = self.shard.candidates(required_literals(pattern.value), self.scope)
        return self._units[pattern.value]

    def unit_array(self, pattern: Pattern, units: BitMap) -> np.ndarray:
        found = self._arrays.get(pattern.value)
        if found is None:
            found = self._arrays[pattern.value] = np.asarray(units.to_array(), dtype=np.int64)
        return found

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


def filter_docs(shard: Shard, query: Query, branch: str | None) -> BitMap:
    """Documents that pass the branch, language and file filters."""
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
    literal = _prefilter_literal(Pattern(pattern, pattern, True, 0))
    prefilter = compile_regex(re.escape(literal.decode()), case_sensitive=False) if literal else None
    return shard.docs_matching_path(compile_regex(pattern, case_sensitive=case_sensitive), prefilter)


@dataclass(frozen=True, slots=True)
class _Filtered:
    """What a query's filters leave of a shard: documents, and their units when they are few."""

    docs: BitMap
    scope: BitMap | None


def _filtered(shard: Shard, query: Query, branch: str | None) -> _Filtered:
    """The filters' documents, memoized per shard: agents search one directory or language again and again."""
    key = (branch, query.files, query.exclude_files, query.languages, query.exclude_languages, query.case_sensitive)
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
            owners = self.shard.unit_doc[np.asarray(units.to_array(), dtype=np.int64)]
            keep = np.asarray([d in self.filtered for d in owners.tolist()], dtype=bool)
            units = bitmap_of(np.asarray(units.to_array(), dtype=np.int64)[keep])
        return units

    def within(self, lo: int, hi: int) -> Selection:
        return Selection(self.shard, self.query, self.filtered & BitMap(range(lo, hi)), self.candidates, True)


def select_docs(shard: Shard, query: Query, branch: str | None, doc_range: tuple[int, int] | None = None) -> Selection:
    """The query's selection: the filters (path, language, branch) first, then trigram candidates.

    Filters come first because they are cheap bitmaps that often leave a handful of documents; the
    trigram candidates of the pattern tree are looked up within them, so a filtered query never scans
    content outside its filter. Path-only (`type:path`) and filter-only queries get the filtered set.
    """
    filtered = _filtered(shard, query, branch)
    if doc_range is None:
        return Selection(shard, query, filtered.docs, Candidates(shard, filtered.scope))
    docs = filtered.docs & BitMap(range(*doc_range))
    return Selection(shard, query, docs, Candidates(shard, filtered.scope), narrowed=True)


def selected_bytes(shard: Shard, docs: BitMap) -> int:
    """Content bytes of `docs` (what verification would scan at most)."""
    if not docs:
        return 0
    arr = np.asarray(docs.to_array(), dtype=np.int64)
    return int((shard.starts[arr + 1] - shard.starts[arr]).sum())


def search_shard(
    shard: Shard,
    query: Query,
    *,
    branch: str | None,
    limit: int | None,
    deadline: float,
    doc_range: tuple[int, int] | None = None,
    selected: Selection | None = None,
) -> ShardResult:
    """Matching documents of `shard` (within `doc_range`) in document order, stopping after `limit` lines.

    `selected`, when given, is `select_docs(shard, query, branch, doc_range)` computed by the caller.
    """
    result = ShardResult()
    selection = selected if selected is not None else select_docs(shard, query, branch, doc_range)
    if query.expr is None:
        return _take_paths(selection.filtered, result, limit)
    path_mode = query.type == "path"
    evaluator = _Evaluator(shard, query.case_sensitive, path_mode, selection.candidates)
    units = selection.direct_units()
    if units is not None and isinstance(query.expr, Pattern):
        # A selective single pattern: its few candidate units are scanned in one go, no batches.
        if time.monotonic() > deadline:
            result.timed_out = True
            return result
        evaluator.line_budget = limit
        offsets = evaluator.scan_offsets(query.expr, _unit_runs(shard, units))
        _collect_pairs(result, evaluator.line_pairs(offsets), limit)
        return result
    if isinstance(query.expr, Pattern) and not path_mode:
        return _search_pattern(selection, query.expr, evaluator, limit, deadline, result)
    docs = selection.docs
    sorted_docs = np.asarray(docs.to_array(), dtype=np.int64) if docs else np.zeros(0, dtype=np.int64)
    batch_bytes = _FIRST_BATCH_BYTES
    i = 0
    # Content bytes of the selected documents up to and including each one: batches are cut on it.
    cumulative = np.cumsum(shard.starts[sorted_docs + 1] - shard.starts[sorted_docs])
    while i < len(sorted_docs):
        if time.monotonic() > deadline:
            result.timed_out = True
            break
        j = _batch_end(cumulative, i, batch_bytes)
        batch = bitmap_of(sorted_docs[i:j])
        i = j
        batch_bytes = min(batch_bytes * 2, _MAX_BATCH_BYTES)
        if isinstance(query.expr, Pattern) and limit is not None:
            evaluator.line_budget = limit - result.match_count
        if _collect(result, evaluator.eval(query.expr, batch), limit):
            break
    return result


def _search_pattern(
    selection: Selection,
    pattern: Pattern,
    evaluator: _Evaluator,
    limit: int | None,
    deadline: float,
    result: ShardResult,
) -> ShardResult:
    """One pattern: its candidate units (of the filtered documents) in geometrically growing batches.

    Batches are cut on the candidates' own bytes, so a first page reads only as many units as it needs
    and never builds the document-level candidate set of the whole shard.
    """
    shard = selection.shard
    units = _pattern_units(selection, pattern)
    sizes = shard.unit_starts[units + 1] - shard.unit_starts[units]
    cumulative = np.cumsum(sizes)
    every_doc = len(selection.filtered) == shard.doc_count
    batch_bytes = _FIRST_BATCH_BYTES
    i = 0
    while i < len(units):
        if time.monotonic() > deadline:
            result.timed_out = True
            break
        j = _batch_end(cumulative, i, batch_bytes)
        runs = _ranges(units[i:j], shard.unit_starts, _bridges(shard, units[i:j], every_doc))
        i = j
        batch_bytes = min(batch_bytes * 2, _MAX_BATCH_BYTES)
        evaluator.line_budget = None if limit is None else limit - result.match_count
        if _collect_pairs(result, evaluator.line_pairs(evaluator.scan_offsets(pattern, runs)), limit):
            break
    return result


def _bridges(shard: Shard, units: np.ndarray, every_doc: bool) -> np.ndarray:
    """Which gaps between consecutive candidate units to scan through: the short ones.

    A Hyperscan or RE2 call costs about as much as scanning a few KiB, so dense candidates (a common
    literal's first page) are scanned as whole stretches rather than unit by unit; matches found in a gap
    are real matches. A gap may span documents only when every document passed the filters
    (`every_doc`); otherwise it stays inside one document.
    """
    if len(units) < 2:
        return np.zeros(0, dtype=bool)
    gap_bytes = shard.unit_starts[units[1:]] - shard.unit_starts[units[:-1] + 1]
    short: np.ndarray = np.asarray(gap_bytes <= _BRIDGE_BYTES, dtype=bool)
    if every_doc:
        return short
    same_doc = np.asarray(shard.unit_doc[units[1:]] == shard.unit_doc[units[:-1]], dtype=bool)
    bridged: np.ndarray = short & same_doc
    return bridged


def _pattern_units(selection: Selection, pattern: Pattern) -> np.ndarray:
    """Sorted ids of the units to scan for `pattern`: its candidates that belong to filtered documents."""
    shard = selection.shard
    docs = np.asarray(selection.filtered.to_array(), dtype=np.int64)
    if not len(docs):
        return np.zeros(0, dtype=np.int64)
    candidates = selection.candidates.units(pattern)
    if candidates is None:
        return shard.units_of(docs)
    units = selection.candidates.unit_array(pattern, candidates)
    if len(docs) == shard.doc_count:
        return units
    # The filtered documents' units form one id range; keep the candidates inside it whose document passed.
    lo, hi = np.searchsorted(units, shard.doc_unit0[[docs[0], docs[-1] + 1]])
    inside = units[lo:hi]
    owner = shard.unit_doc[inside]
    at = np.minimum(np.searchsorted(docs, owner), len(docs) - 1)
    kept: np.ndarray = inside[docs[at] == owner]
    return kept


def _collect(result: ShardResult, found: dict[int, set[int]], limit: int | None) -> bool:
    """Append `found` (doc → lines) to `result` in document order, up to `limit` lines; True = stop.

    A document whose units fell into the previous batch too continues that batch's hit.
    """
    for doc in sorted(found):
        lines = sorted(found[doc])
        if result.hits and result.hits[-1].doc == doc and lines:
            previous = result.hits[-1]
            keep = len(lines) if limit is None else min(len(lines), limit - result.match_count)
            previous.lines.extend(lines[:keep])
            result.match_count += keep
            if keep < len(lines) or (limit is not None and result.match_count >= limit):
                result.limit_hit = True
                return True
            continue
        count = max(1, len(lines))
        if limit is not None and result.match_count + count > limit:
            keep = limit - result.match_count
            if keep > 0 and lines:
                result.hits.append(ShardHit(doc, lines[:keep]))
                result.match_count += keep
            result.limit_hit = True
            return True
        result.hits.append(ShardHit(doc, lines))
        result.match_count += count
    # Reaching the count means "stopped, there may be more", as the count: filter documents.
    if limit is not None and result.match_count >= limit:
        result.limit_hit = True
        return True
    return False


def _collect_pairs(result: ShardResult, pairs: list[tuple[int, int]], limit: int | None) -> bool:
    """Append ascending (document, line) pairs of one pattern to `result`, up to `limit` lines; True = stop.

    One pattern's scanners report each line once, in content order: no sets or sorting needed. A
    document continued from the previous batch extends that batch's hit.
    """
    hits = result.hits
    for doc, line in pairs:
        if limit is not None and result.match_count >= limit:
            break
        if hits and hits[-1].doc == doc:
            hits[-1].lines.append(line)
        else:
            hits.append(ShardHit(doc, [line]))
        result.match_count += 1
    if limit is not None and result.match_count >= limit:
        result.limit_hit = True
        return True
    return False


def _unit_runs(shard: Shard, units: BitMap) -> list[tuple[int, int]]:
    """[start, end) content ranges of the runs of consecutive units in `units` (few: a Python loop)."""
    starts = shard.tables.unit_starts
    runs: list[tuple[int, int]] = []
    previous = -2
    for unit in units:
        if unit == previous + 1:
            runs[-1] = (runs[-1][0], starts[unit + 1])
        else:
            runs.append((starts[unit], starts[unit + 1]))
        previous = unit
    return runs


def _prefilter_literal(pattern: Pattern) -> bytes | None:
    """The longest ASCII literal a regex requires, when scanning for it first pays off (None otherwise)."""
    if not pattern.regex:
        return None
    formula = required_literals(pattern.value)
    candidates = (
        [formula] if isinstance(formula, Lit) else list(formula.children) if isinstance(formula, LitAnd) else []
    )
    literals = [c.value for c in candidates if isinstance(c, Lit) and c.value.isascii() and len(c.value) >= 4]
    if not literals:
        return None
    best = max(literals, key=len)
    # Any substring of a required literal is required too. Leading underscores are everywhere in C, and
    # RE2 finds a literal by its first byte: `coherent` scans ~1.6x faster than `_coherent` (measured).
    stripped = best.lstrip(b"_")
    if len(stripped) >= 4:
        best = stripped
    # A regex that starts with its literal already gets RE2's own prefix acceleration.
    if re.escape(best.decode()).lower() == pattern.value.lower():
        return None
    return best


def _relaxed(pattern: Pattern) -> str | None:
    """The regex without a leading `\\b`, whose matches are a superset of the pattern's.

    RE2 cannot use its literal-prefix acceleration behind a leading word boundary (measured 7x slower on
    `\\b0x[0-9a-fA-F]{12,}\\b`); scanning for the relaxed regex and re-checking the line is much faster.
    """
    if not pattern.regex or not pattern.value.startswith("\\b") or pattern.value.startswith("\\b\\b"):
        return None
    rest = pattern.value[2:]
    if not rest or rest[0] in "*+?{|)":
        return None
    try:
        compile_regex(rest, case_sensitive=True)
    except Exception:  # not a standalone regex (e.g. the \\b was quantified): no relaxation
        return None
    return rest


def _take_paths(docs: BitMap, result: ShardResult, limit: int | None) -> ShardResult:
    for doc in docs:
        if limit is not None and result.match_count >= limit:
            result.limit_hit = True
            break
        result.hits.append(ShardHit(doc, []))
        result.match_count += 1
    return result


def _batch_end(cumulative: np.ndarray, i: int, batch_bytes: int) -> int:
    """End of the batch starting at `i`: about `batch_bytes` of the selected documents' content.

    Counted over the selected documents only (`cumulative` sizes), so sparse candidates (a filter, a rare
    literal) form a few batches instead of one per stretch of the content file.
    """
    before = int(cumulative[i - 1]) if i else 0
    j = int(np.searchsorted(cumulative, before + batch_bytes, side="right"))
    return max(j, i + 1)


class _Evaluator:
    """Evaluates a pattern tree on a batch of documents: doc → matching global line indices."""

    def __init__(self, shard: Shard, case_sensitive: bool, path_mode: bool, candidates: Candidates) -> None:
        self.shard = shard
        self.case_sensitive = case_sensitive
        self.path_mode = path_mode
        # Candidate units per pattern are looked up once per query (shared with select_docs), not per batch.
        self.candidates = candidates
        # For a single-pattern query, lines = matches: scans may stop once this many lines are found.
        self.line_budget: int | None = None
        self._paths: dict[str, BitMap] = {}
        self.use_hyperscan = USE_HYPERSCAN and hyperscan_available()

    def eval(self, node: Node, docs: BitMap) -> dict[int, set[int]]:
        if not docs:
            return {}
        if isinstance(node, Pattern):
            return self.leaf(node, docs)
        if isinstance(node, Not):
            matched = self.eval(node.child, docs)
            return {d: set() for d in docs if d not in matched}
        if isinstance(node, Or):
            merged: dict[int, set[int]] = {}
            for child in node.children:
                for doc, lines in self.eval(child, docs).items():
                    merged.setdefault(doc, set()).update(lines)
            return merged
        # AND: positive children first narrow the documents; negations only remove.
        ordered = sorted(node.children, key=lambda c: isinstance(c, Not))
        acc: dict[int, set[int]] | None = None
        remaining = docs
        for child in ordered:
            found = self.eval(child, remaining)
            acc = found if acc is None else {d: acc[d] | found[d] for d in acc if d in found}
            remaining = BitMap(acc.keys())
            if not remaining:
                return {}
        return acc or {}

    def leaf(self, pattern: Pattern, docs: BitMap) -> dict[int, set[int]]:
        regex = compile_regex(pattern.value, case_sensitive=self.case_sensitive)
        if self.path_mode:
            if pattern.value not in self._paths:
                self._paths[pattern.value] = self.shard.docs_matching_path(regex)
            return {d: set() for d in docs & self._paths[pattern.value]}
        return self.scan_runs(pattern, self._runs(pattern, docs))

    def scan_runs(self, pattern: Pattern, runs: list[tuple[int, int]]) -> dict[int, set[int]]:
        """Matching lines of `pattern` in the content `runs`, as {document: global line indices}."""
        return self.lines_of(self.scan_offsets(pattern, runs))

    def scan_offsets(self, pattern: Pattern, runs: list[tuple[int, int]]) -> list[int]:
        """One offset inside each line of the `runs` that `pattern` matches, ascending (fastest verifier)."""
        if not runs:
            return []
        regex = compile_regex(pattern.value, case_sensitive=self.case_sensitive)
        if not pattern.regex and pattern.text.isascii() and self.use_hyperscan:
            # ASCII literal: Hyperscan's case folding is RE2's (and ripgrep's --no-unicode) exactly.
            return scan_literal(self.shard.content, pattern.text.encode(), self.case_sensitive, runs, self.line_budget)
        prefilter = _prefilter_literal(pattern)
        if prefilter is not None and self.use_hyperscan:
            return self._hyperscan_prefiltered(regex._regexp, prefilter, runs)
        if prefilter is not None:
            literal = compile_regex(re.escape(prefilter.decode()), case_sensitive=False)._regexp
            return self.scan_prefiltered(regex._regexp, literal, runs)
        relaxed = _relaxed(pattern)
        if relaxed is not None:
            return self.scan_prefiltered(
                regex._regexp, compile_regex(relaxed, case_sensitive=self.case_sensitive)._regexp, runs
            )
        return self.scan(regex._regexp, runs)

    def _runs(self, pattern: Pattern, docs: BitMap) -> list[tuple[int, int]]:
        """[start, end) content ranges to scan for `pattern` in `docs`: its candidate units there, merged."""
        shard = self.shard
        doc_ids = np.asarray(docs.to_array(), dtype=np.int64)
        units = self.candidates.units(pattern)
        if units is None:
            return _ranges(doc_ids, shard.starts)
        every = self.candidates.unit_array(pattern, units)
        # The documents' units form one id range; keep the candidates inside it whose document is in `docs`.
        lo, hi = np.searchsorted(every, shard.doc_unit0[[doc_ids[0], doc_ids[-1] + 1]])
        inside = every[lo:hi]
        owner = shard.unit_doc[inside]
        at = np.minimum(np.searchsorted(doc_ids, owner), len(doc_ids) - 1)
        return _ranges(inside[doc_ids[at] == owner], shard.unit_starts)

    def _hyperscan_prefiltered(self, regexp: Any, literal: bytes, runs: list[tuple[int, int]]) -> list[int]:
        """Like scan_prefiltered, with Hyperscan finding the lines that hold the required literal."""
        content = self.shard.content
        rfind, full_match = content.rfind, regexp.Match

        def accept(offset: int, line_end: int) -> int:
            line_start = rfind(b"\n", 0, offset) + 1
            hit: int = full_match(_UNANCHORED, content, line_start, line_end)[0][0]
            return hit

        return scan_literal(content, literal, False, runs, self.line_budget, accept)

    def scan_prefiltered(self, regexp: Any, literal: Any, runs: list[tuple[int, int]]) -> list[int]:
        """Find a required literal first (fast literal scan), then run the full regex on that line only.

        For regexes without a literal prefix (`[a-z]+_init_`) this replaces a DFA pass over every byte with a
        literal scan plus one anchored-to-the-line check per candidate line.
        """
        content = self.shard.content
        find, rfind = content.find, content.rfind
        lit_match, full_match = literal.Match, regexp.Match
        offsets: list[int] = []
        for run_start, end in runs:
            pos = run_start
            while pos < end:
                ms = lit_match(_UNANCHORED, content, pos, end)[0][0]
                if ms < 0 or ms >= end:
                    break
                line_start = max(rfind(b"\n", pos, ms) + 1, pos)
                line_end = find(b"\n", ms)
                hit = full_match(_UNANCHORED, content, line_start, line_end)[0][0]
                if hit >= 0:
                    offsets.append(hit)
                    if self.line_budget is not None and len(offsets) >= self.line_budget:
                        return offsets
                pos = line_end + 1
        return offsets

    def scan(self, regexp: Any, runs: list[tuple[int, int]]) -> list[int]:
        """Match `regexp` over each contiguous range with one native call per matching line.

        The loop only records match offsets and skips to the next line (memchr via mmap.find); offsets are
        mapped to documents and lines afterwards.
        """
        content = self.shard.content
        match = regexp.Match
        find = content.find
        budget = self.line_budget
        offsets: list[int] = []
        for run_start, end in runs:
            pos = run_start
            while pos < end:
                ms = match(_UNANCHORED, content, pos, end)[0][0]
                if ms < 0 or ms >= end:
                    break
                offsets.append(ms)
                if budget is not None and len(offsets) >= budget:
                    return offsets
                # Every unit ends in a newline, so the line end is always inside the range.
                pos = find(b"\n", ms) + 1
        return offsets

    def line_pairs(self, offsets: list[int]) -> list[tuple[int, int]]:
        """(document, global line) of each ascending content offset, ascending."""
        if not offsets:
            return []
        return self._lines_few(offsets) if len(offsets) <= _FEW_OFFSETS else self._lines_many(offsets)

    def lines_of(self, offsets: list[int]) -> dict[int, set[int]]:
        """Map ascending content offsets to {document: global line indices}."""
        pairs = self.line_pairs(offsets)
        found: dict[int, set[int]] = {}
        for doc, line in pairs:
            bucket = found.get(doc)
            if bucket is None:
                found[doc] = {line}
            else:
                bucket.add(line)
        return found

    def _lines_few(self, offsets: list[int]) -> list[tuple[int, int]]:
        """(document, line) of each offset by bisecting the stored tables (cheapest for a few offsets).

        Offsets arrive ascending, mostly several per document: the document is looked up again only when
        an offset leaves the current one.
        """
        tables = self.shard.tables
        starts, page0, pages, low = tables.starts, tables.doc_page0, tables.nl_pages, tables.nl_low
        shift = self.shard.page_shift
        mask = (1 << shift) - 1
        out = []
        doc = doc_start = doc_end = first_page = -1
        for offset in offsets:
            if not doc_start <= offset < doc_end:
                doc = bisect_right(starts, offset) - 1
                doc_start, doc_end, first_page = starts[doc], starts[doc + 1], page0[doc]
            rel = offset - doc_start
            page = first_page + (rel >> shift)
            out.append((doc, bisect_left(low, rel & mask, pages[page], pages[page + 1])))
        return out

    def _lines_many(self, offsets: list[int]) -> list[tuple[int, int]]:
        """(document, line) of each offset, as one vectorized binary search over all offsets.

        Each offset is searched for within its own 64 KiB page of its document's newline offsets: about
        log2(lines per page) numpy steps in all, instead of a Python loop over matching documents.
        """
        shard = self.shard
        at = np.asarray(offsets, dtype=np.int64)
        doc_of = np.searchsorted(shard.starts, at, side="right") - 1
        rel = at - shard.starts[doc_of]
        page = shard.doc_page0[doc_of] + (rel >> shard.page_shift)
        target = rel & ((1 << shard.page_shift) - 1)
        newlines = shard.nl_low
        lo = shard.nl_pages[page].copy()
        hi = shard.nl_pages[page + 1].copy()
        last = len(newlines) - 1
        # Leftmost line whose newline offset is >= the target (the newline that ends the match's line).
        while True:
            active = lo < hi
            if not active.any():
                break
            mid = (lo + hi) >> 1
            go_right = active & (newlines[np.minimum(mid, last)].astype(np.int64) < target)
            lo = np.where(go_right, mid + 1, lo)
            hi = np.where(active & ~go_right, mid, hi)
        return list(zip(doc_of.tolist(), lo.tolist(), strict=True))


def _ranges(ids: np.ndarray, starts: np.ndarray, bridge: np.ndarray | None = None) -> list[tuple[int, int]]:
    """[start, end) content ranges of the runs of consecutive ids (documents or units) in sorted `ids`.

    `bridge`, when given, marks the gaps after each id (but the last) that may be scanned through anyway.
    """
    if not len(ids):
        return []
    gaps = np.diff(ids) != 1
    if bridge is not None:
        gaps &= ~bridge
    breaks = np.flatnonzero(gaps) + 1
    firsts = ids[np.concatenate([[0], breaks])]
    lasts = ids[np.concatenate([breaks, [len(ids)]]) - 1]
    return list(zip(starts[firsts].tolist(), starts[lasts + 1].tolist(), strict=True))


# Parallel verification -----------------------------------------------------------------------------

# Below this much content a second process costs more (pickling, scheduling) than it saves.
PARALLEL_MIN_BYTES = 64 << 20
_open_shards: dict[str, Shard] = {}


def split_ranges(shard: Shard, parts: int) -> list[tuple[int, int]]:
    """`parts` contiguous document ranges of about equal content size."""
    total = int(shard.starts[-1])
    cuts = [0, *(int(np.searchsorted(shard.starts, total * k // parts)) for k in range(1, parts)), shard.doc_count]
    return [(a, b) for a, b in itertools.pairwise(cuts) if b > a]


def search_part(
    path: str, query: Query, branch: str | None, limit: int | None, deadline: float, lo: int, hi: int
) -> ShardResult:
    """Worker-process entry: search documents [lo, hi) of the shard at `path` (opened once per process)."""
    shard = _open_shards.get(path)
    if shard is None:
        from pathlib import Path

        shard = _open_shards[path] = Shard.open(Path(path))
        if len(_open_shards) > 64:
            _open_shards.clear()
    return search_shard(shard, query, branch=branch, limit=limit, deadline=deadline, doc_range=(lo, hi))


def search_shard_parallel(
    shard: Shard, query: Query, *, branch: str | None, limit: int | None, deadline: float, pool: Any, parts: int
) -> ShardResult:
    """Like search_shard, with document ranges verified in `pool` processes; exhaustive searches only.

    The filters and trigram candidates are applied first, here: only when the selected documents hold at
    least PARALLEL_MIN_BYTES of content is the scan split over processes (a filtered or rare query is
    answered here in well under a millisecond of scanning, far less than a round trip to the pool).
    """
    if pool is None or parts < 2 or limit is not None or int(shard.starts[-1]) < PARALLEL_MIN_BYTES:
        return search_shard(shard, query, branch=branch, limit=limit, deadline=deadline)
    selected = select_docs(shard, query, branch)
    if (
        query.expr is None
        or query.type == "path"
        or selected.direct_units() is not None
        or selected_bytes(shard, selected.docs) < PARALLEL_MIN_BYTES
    ):
        return search_shard(shard, query, branch=branch, limit=limit, deadline=deadline, selected=selected)
    ranges = split_ranges(shard, parts)
    futures = [
        pool.submit(search_part, str(shard.path), query, branch, limit, deadline, lo, hi) for lo, hi in ranges[1:]
    ]
    lo0, hi0 = ranges[0]
    merged = search_shard(
        shard, query, branch=branch, limit=limit, deadline=deadline, selected=selected.within(lo0, hi0)
    )
    for future in futures:
        part = future.result()
        merged.hits.extend(part.hits)
        merged.match_count += part.match_count
        merged.timed_out |= part.timed_out
    return merged


def search_many(
    jobs: list[tuple[Shard, str | None]], query: Query, *, deadline: float, pool: Any, parts: int
) -> list[ShardResult]:
    """Exhaustive search (no limit) of several shards, fanned out over `pool` plus this process.

    Big shards are split into document ranges; results come back in job order. Falls back to one shard
    after another when the selected content (after filters and trigram candidates) is too small for
    processes to pay off.
    """
    total = sum(int(shard.starts[-1]) for shard, _ in jobs)
    if pool is None or parts < 2 or len(jobs) < 2 or total < PARALLEL_MIN_BYTES:
        return [
            search_shard_parallel(s, query, branch=b, limit=None, deadline=deadline, pool=pool, parts=parts)
            for s, b in jobs
        ]
    selections = [select_docs(shard, query, branch) for shard, branch in jobs]
    scanned = sum(selected_bytes(shard, sel.docs) for (shard, _), sel in zip(jobs, selections, strict=True))
    if query.expr is None or query.type == "path" or scanned < PARALLEL_MIN_BYTES:
        return [
            search_shard(s, query, branch=b, limit=None, deadline=deadline, selected=sel)
            for (s, b), sel in zip(jobs, selections, strict=True)
        ]
    pieces: list[tuple[int, Shard, str | None, tuple[int, int]]] = []
    for index, (shard, branch) in enumerate(jobs):
        ranges = split_ranges(shard, parts) if int(shard.starts[-1]) >= PARALLEL_MIN_BYTES else [(0, shard.doc_count)]
        pieces.extend((index, shard, branch, r) for r in ranges)
    weights = [selected_bytes(shard, selections[index].within(*r).docs) for index, shard, _b, r in pieces]
    local, remote = _share(weights, parts)
    # The pool takes groups of pieces (fewer round trips); this process works through its own share meanwhile.
    futures = [
        (group, pool.submit(search_parts, [_part_args(pieces[k], query, deadline) for k in group])) for group in remote
    ]
    outputs: dict[int, ShardResult] = {}
    for k in local:
        index, shard, branch, (lo, hi) = pieces[k]
        chosen = selections[index].within(lo, hi)
        outputs[k] = search_shard(shard, query, branch=branch, limit=None, deadline=deadline, selected=chosen)
    for group, future in futures:
        outputs.update(zip(group, future.result(), strict=True))
    merged = [ShardResult() for _ in jobs]
    for k, (index, *_rest) in enumerate(pieces):
        merged[index].hits.extend(outputs[k].hits)
        merged[index].match_count += outputs[k].match_count
        merged[index].timed_out |= outputs[k].timed_out
    return merged


def _share(weights: list[int], parts: int) -> tuple[list[int], list[list[int]]]:
    """Split pieces (by content weight) into this process's share and groups for the pool's workers.

    This process takes about 1/parts of the work, from the end; the rest is cut into groups of at least
    1/(4 * parts) of the work each, so that many small shards do not cost a pool round trip each.
    """
    total = sum(weights) or 1
    share = total / parts
    local: list[int] = []
    taken = 0
    for k in range(len(weights) - 1, -1, -1):
        if taken >= share:
            break
        if local and taken + weights[k] > share * 1.25:
            continue  # too big to take on top: a smaller piece further on may fit
        local.append(k)
        taken += weights[k]
    remote: list[list[int]] = []
    group: list[int] = []
    size = 0
    for k in range(len(weights)):
        if k in local:
            continue
        group.append(k)
        size += weights[k]
        if size >= total / (4 * parts):
            remote.append(group)
            group, size = [], 0
    if group:
        remote.append(group)
    return sorted(local), remote


def _part_args(
    piece: tuple[int, Shard, str | None, tuple[int, int]], query: Query, deadline: float
) -> tuple[str, Query, str | None, None, float, int, int]:
    _index, shard, branch, (lo, hi) = piece
    return (str(shard.path), query, branch, None, deadline, lo, hi)


def search_parts(parts: list[tuple[str, Query, str | None, int | None, float, int, int]]) -> list[ShardResult]:
    """Worker-process entry: several `search_part` calls in one round trip."""
    return [search_part(*args) for args in parts]
