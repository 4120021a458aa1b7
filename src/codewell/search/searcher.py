"""Evaluate a parsed query on one shard: its selection (selection.py), then verification (verify.py).

A single pattern walks its candidate units; a tree of patterns walks its selected documents; both in
geometrically growing batches that stop at the match limit and check the deadline in between.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import re2
from pyroaring import BitMap

from codewell.search import native
from codewell.search.index.bitmaps import bitmap_of
from codewell.search.index.shard import DocSet, Shard
from codewell.search.query.parser import Pattern, Query
from codewell.search.query.regex import compile_regex
from codewell.search.results import FileMatch, LineMatch, LineSource
from codewell.search.selection import DeadlineExceeded, Selection, select_docs
from codewell.search.verify import (
    Evaluator,
    Hits,
    group_hits,
    is_plain_literal,
    match_ranges,
    run_bounds,
    tree_line_bounds,
    tree_ranges,
)

__all__ = ["ShardHit", "ShardResult", "file_matches", "gc_paused", "search_shard"]

# Verification batches grow geometrically: the first page comes from a small slice of the shard, while
# exhaustive searches make few, large native calls.
_FIRST_BATCH_BYTES = 1 << 20
_MAX_BATCH_BYTES = 64 << 20
_UNANCHORED = re2._re2.RE2.Anchor.UNANCHORED
# Gaps of at most this many bytes between candidate units are scanned through (_bridges).
_BRIDGE_BYTES = 16 << 10


@dataclass(slots=True)
class ShardHit:
    """A matching document: global line indices of its matching lines (empty for path-only matches).

    A single pattern's hit has `firsts[i]`, the offset of line `lines[i]`'s first match; a pattern tree's has
    `plans[i]` (Evaluator.tree_plan). Match ranges and texts are found from them only for the lines that are
    read (`file_matches`), so an exhaustive answer does little per-line work beyond the native scan.
    """

    doc: int
    lines: list[int]
    firsts: list[int] = field(default_factory=list)
    plans: list[tuple[int, ...]] = field(default_factory=list)


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
    branch: str | DocSet | None,
    limit: int | None,
    deadline: float,
    doc_range: tuple[int, int] | None = None,
    selected: Selection | None = None,
) -> ShardResult:
    """Matching documents of `shard` (within `doc_range`) in document order, stopping after `limit` lines.

    `selected`, when given, is `select_docs(shard, query, branch, doc_range)` computed by the caller.
    """
    result = ShardResult()
    try:
        return _search(shard, query, branch, limit, deadline, doc_range, selected, result)
    except DeadlineExceeded:
        # Planning or verifying a pattern tree ran past the deadline: what was collected stands, marked.
        result.timed_out = True
        return result


def _search(
    shard: Shard,
    query: Query,
    branch: str | DocSet | None,
    limit: int | None,
    deadline: float,
    doc_range: tuple[int, int] | None,
    selected: Selection | None,
    result: ShardResult,
) -> ShardResult:
    selection = selected if selected is not None else select_docs(shard, query, branch, doc_range, deadline)
    selection.candidates.deadline = deadline
    if query.expr is None:
        return _take_paths(selection.filtered, result, limit)
    path_mode = query.type == "path"
    evaluator = Evaluator(shard, query.case_sensitive, path_mode, selection.candidates, deadline)
    units = selection.direct_units()
    if units is not None and isinstance(query.expr, Pattern):
        # A selective single pattern: its few candidate units are scanned in one go, no batches.
        if time.monotonic() > deadline:
            result.timed_out = True
            return result
        evaluator.line_budget = limit
        runs = np.asarray(_unit_runs(shard, units), dtype=np.int64).reshape(-1, 2)
        _collect_pairs(result, evaluator.scan_hits(query.expr, runs), limit)
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
        if _collect(result, evaluator, query, evaluator.eval(query.expr, batch), limit):
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
        runs = run_bounds(units[i:j], shard.unit_starts, _bridges(shard, units[i:j], every_doc))
        i = j
        batch_bytes = min(batch_bytes * 2, _MAX_BATCH_BYTES)
        evaluator.line_budget = None if limit is None else limit - result.match_count
        if _collect_pairs(result, evaluator.scan_hits(pattern, runs), limit):
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


def _collect(
    result: ShardResult, evaluator: Evaluator, query: Query, found: dict[int, set[int]], limit: int | None
) -> bool:
    """Append `found` (doc → lines) to `result` in document order, up to `limit` lines; True = stop.

    Used for pattern trees, whose batches are whole documents: no document spans two batches. How to
    find the match ranges is noted for the kept lines only (`Evaluator.tree_plan`).
    """
    patterns = query.patterns()
    for doc in sorted(found):
        lines = sorted(found[doc])
        count = max(1, len(lines))
        if limit is not None and result.match_count + count > limit:
            keep = limit - result.match_count
            if keep > 0 and lines:
                kept = lines[:keep]
                result.hits.append(ShardHit(doc, kept, plans=[evaluator.tree_plan(patterns, doc, x) for x in kept]))
                result.match_count += keep
            result.limit_hit = True
            return True
        result.hits.append(ShardHit(doc, lines, plans=[evaluator.tree_plan(patterns, doc, x) for x in lines]))
        result.match_count += count
    # Reaching the count means "stopped, there may be more", as the count: filter documents.
    if limit is not None and result.match_count >= limit:
        result.limit_hit = True
        return True
    return False


def _collect_pairs(result: ShardResult, found: Hits, limit: int | None) -> bool:
    """Append one pattern's matching lines (`Hits`, ascending) to `result`, up to `limit` lines.

    One pattern's scanners report each line once, in content order: no sets or sorting needed. A
    document continued from the previous batch extends that batch's hit. True = stop.
    """
    docs, lines, firsts = found
    if limit is not None:
        keep = max(0, limit - result.match_count)
        docs, lines, firsts = docs[:keep], lines[:keep], firsts[:keep]
    hits = result.hits
    for doc, doc_lines, doc_firsts in group_hits((docs, lines, firsts)):
        last = hits[-1] if hits else None
        if last is not None and last.doc == doc:
            last.lines.extend(doc_lines)
            last.firsts.extend(doc_firsts)
        else:
            hits.append(ShardHit(doc, doc_lines, firsts=doc_firsts))
    result.match_count += len(docs)
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


def file_matches(
    shard: Shard, found: ShardResult, query: Query, *, origin: Callable[[int], tuple[str, str]]
) -> list[FileMatch]:
    """The hits of one shard search as FileMatch results: line texts and ranges come from verification.

    `origin(doc)` names the repository and commit a document was found in (a compound shard holds many).
    Lines are read from the shard when used: a single pattern's by `_ShardLines`, a tree's by `_TreeLines`.
    """
    # RE2's raw Match: the wrapper's `search` costs ~10 us of Python per call, paid here once per file.
    patterns = query.patterns()
    path_tests = [compile_regex(p.value, case_sensitive=query.case_sensitive)._regexp.Match for p in patterns]
    single = query.expr if isinstance(query.expr, Pattern) else None
    content = shard.content
    paths, languages, line_base = shard.paths, shard.languages, shard.line_base
    out: list[FileMatch] = []
    for hit in found.hits:
        doc = hit.doc
        path = paths[doc]
        first_line = int(line_base[doc]) - 1
        path_bytes = path.encode("utf-8", "surrogateescape")
        path_match = any(test(_UNANCHORED, path_bytes, 0, len(path_bytes))[0][0] >= 0 for test in path_tests)
        repo, commit = origin(doc)
        source: LineSource | None = None
        if hit.firsts:
            assert single is not None
            source = _ShardLines(content, single, query.case_sensitive, hit.lines, hit.firsts, first_line)
        elif hit.plans:
            source = _TreeLines(shard, patterns, query.case_sensitive, doc, hit.lines, hit.plans, first_line)
        out.append(FileMatch(repo, path, commit, languages[doc], None if source else [], path_match, source=source))
    return out


class _TreeLines:
    """The matching lines of one document for a pattern tree, read from the shard when asked for.

    `plans` say how each positive pattern finds its ranges on each line (`Evaluator.tree_plan`); a line's
    text and ranges are then what `Evaluator.tree_ranges` would have found.
    """

    __slots__ = ("case_sensitive", "doc", "first_line", "lines", "patterns", "plans", "shard")

    def __init__(
        self,
        shard: Shard,
        patterns: list[Pattern],
        case_sensitive: bool,
        doc: int,
        lines: list[int],
        plans: list[tuple[int, ...]],
        first_line: int,
    ) -> None:
        self.shard = shard
        self.patterns = patterns
        self.case_sensitive = case_sensitive
        self.doc = doc
        self.lines = lines
        self.plans = plans
        self.first_line = first_line

    def __len__(self) -> int:
        return len(self.lines)

    def number(self, i: int) -> int:
        return self.lines[i] - self.first_line

    def text(self, i: int) -> str:
        start, end = tree_line_bounds(self.shard, self.doc, self.lines[i], self.plans[i])
        text: str = self.shard.content[start:end].decode("utf-8", "replace")
        return text

    def texts(self) -> list[str]:
        return [self.text(i) for i in range(len(self.lines))]

    def first_range(self, i: int) -> tuple[bytes, int, int] | None:
        return None

    def match(self, i: int) -> LineMatch:
        shard, line = self.shard, self.lines[i]
        start, end, ranges = tree_ranges(shard, self.patterns, self.case_sensitive, self.doc, line, self.plans[i])
        return LineMatch(line - self.first_line, shard.content[start:end].decode("utf-8", "replace"), ranges)


class _ShardLines:
    """The matching lines of one document for one pattern, read from the shard's content when asked for.

    `lines` are global line indices (`first_line` + the 1-based number) and `firsts` the offset of each
    line's first match, as the scan reported them; a line's text and ranges are what `Evaluator.match_ranges`
    would have found then.
    """

    __slots__ = ("case_sensitive", "content", "first_line", "firsts", "lines", "literal", "pattern")

    def __init__(
        self, content: Any, pattern: Pattern, case_sensitive: bool, lines: list[int], firsts: list[int], first_line: int
    ) -> None:
        self.content = content
        self.pattern = pattern
        self.case_sensitive = case_sensitive
        self.lines = lines
        self.firsts = firsts
        self.first_line = first_line
        self.literal = is_plain_literal(pattern)

    def __len__(self) -> int:
        return len(self.lines)

    def number(self, i: int) -> int:
        return self.lines[i] - self.first_line

    def text(self, i: int) -> str:
        content, first = self.content, self.firsts[i]
        text: str = content[content.rfind(b"\n", 0, first) + 1 : content.find(b"\n", first)].decode("utf-8", "replace")
        return text

    def texts(self) -> list[str]:
        # Not kept: ranking reads them once, and an answer of many files would hold them all until dropped.
        kernels = native.kernels()
        if kernels is not None:
            # Ranking reads every line of a count:all: ~0.35 us a line this way, ~0.7 us in the loop below.
            found: list[str] = kernels.line_texts(self.content, self.firsts)
            return found
        content = self.content
        rfind, find = content.rfind, content.find
        return [content[rfind(b"\n", 0, at) + 1 : find(b"\n", at)].decode("utf-8", "replace") for at in self.firsts]

    def match(self, i: int) -> LineMatch:
        start, end, ranges = match_ranges(self.content, self.pattern, self.case_sensitive, self.firsts[i])
        return LineMatch(self.lines[i] - self.first_line, self.content[start:end].decode("utf-8", "replace"), ranges)

    def first_range(self, i: int) -> tuple[bytes, int, int] | None:
        # A plain literal's first range starts at the scan's offset and is as long as the literal; on an ASCII
        # line the bytes are what `match(i)`'s text encodes to, so ranking may judge the range from them.
        if not self.literal:
            return None
        content, first = self.content, self.firsts[i]
        start = content.rfind(b"\n", 0, first) + 1
        raw: bytes = content[start : content.find(b"\n", first)]
        if not raw.isascii():
            return None
        return raw, first - start, first - start + len(self.pattern.text)


class _GcPause:
    """How many searches are running with collection off, and whether it was on before the first."""

    lock = threading.Lock()
    running = 0
    was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a search builds its answer (reference counting still frees).

    An exhaustive answer allocates tens of thousands of objects that live until it is returned: each
    collection then scans them, and every few queries a full collection walks the whole heap, which in a
    server holding the shards of thousands of repositories costs more than the search (80 ms of a 100 ms
    answer at 2,000 repositories). Searches in several threads overlap: the first to enter switches
    collection off, the last to leave restores it as it was.
    """
    with _GcPause.lock:
        if _GcPause.running == 0:
            _GcPause.was_enabled = gc.isenabled()
            gc.disable()
        _GcPause.running += 1
    try:
        yield
    finally:
        with _GcPause.lock:
            _GcPause.running -= 1
            if _GcPause.running == 0 and _GcPause.was_enabled:
                gc.enable()
