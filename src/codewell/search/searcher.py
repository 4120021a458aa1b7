"""Evaluate a parsed query on one shard: its selection (selection.py), then verification (verify.py).

A single pattern walks its candidate units; a tree of patterns walks its selected documents; both in
geometrically growing batches that stop at the match limit and check the deadline in between.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from pyroaring import BitMap

from codewell.search.index.bitmaps import bitmap_of
from codewell.search.index.shard import Shard
from codewell.search.query.parser import Pattern, Query
from codewell.search.selection import Selection, select_docs
from codewell.search.verify import Evaluator, ranges_of

__all__ = ["ShardHit", "ShardResult", "search_shard"]

# Verification batches grow geometrically: the first page comes from a small slice of the shard, while
# exhaustive searches make few, large native calls.
_FIRST_BATCH_BYTES = 1 << 20
_MAX_BATCH_BYTES = 64 << 20
# Gaps of at most this many bytes between candidate units are scanned through (_bridges).
_BRIDGE_BYTES = 16 << 10


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
    evaluator = Evaluator(shard, query.case_sensitive, path_mode, selection.candidates)
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
    evaluator: Evaluator,
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
        runs = ranges_of(units[i:j], shard.unit_starts, _bridges(shard, units[i:j], every_doc))
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
    units = selection.candidates.units_in(pattern, docs)
    return shard.units_of(docs) if units is None else units


def _collect(result: ShardResult, found: dict[int, set[int]], limit: int | None) -> bool:
    """Append `found` (doc → lines) to `result` in document order, up to `limit` lines; True = stop.

    Used for pattern trees, whose batches are whole documents: no document spans two batches.
    """
    for doc in sorted(found):
        lines = sorted(found[doc])
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
