"""Verification: scan content ranges of a shard for a pattern, and map match offsets to lines.

Verification never loops over files in Python: consecutive candidate units form one contiguous range of
the mmap'd content. A plain ASCII literal is scanned by the native kernel (search/_scan.c: one call per
batch of ranges), a regex by RE2 (one native call per matching line), with Hyperscan finding the lines
that hold a regex's required literal. Offsets map to documents and lines through the stored document and
newline offsets, natively too.

Every scanner reports, per matching line, the start of the line's leftmost match. The match ranges shown
to users continue from there (`match_ranges`): the rest of that one line is matched with the pattern that
found it, for the lines kept only, and the bytes before the first match are not searched again. Only in a
pattern tree, a positive pattern whose leaf never saw a reported line's document is matched on that line
(`tree_ranges`).

Without a C compiler at install the kernel is missing: literals then go to Hyperscan (one callback per
match) or RE2, and lines are mapped in Python. The property tests compare all of these engines.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from typing import Any

import numpy as np
import re2
from pyroaring import BitMap

from codewell.search import native
from codewell.search.index.shard import Shard
from codewell.search.literal_scan import available as hyperscan_available
from codewell.search.literal_scan import scan_literal
from codewell.search.query.parser import Node, Not, Or, Pattern
from codewell.search.query.regex import compile_regex, literal_then_class, prefilter_literal
from codewell.search.selection import Candidates, check_deadline

__all__ = [
    "Evaluator",
    "Hits",
    "LineSpan",
    "group_hits",
    "is_plain_literal",
    "match_ranges",
    "ranges_from",
    "ranges_of",
    "run_bounds",
    "tree_line_bounds",
    "tree_ranges",
]

# A matching line as the verifier reports it: [start, end) content offsets of the line (without its
# newline), and the match ranges as byte offsets relative to the line start.
LineSpan = tuple[int, int, list[tuple[int, int]]]
# One pattern's matching lines as a scan reports them, ascending: int64 arrays of each line's document, global
# line index and first-match offset. Arrays, not a Python object per line: a `count:all` of a common word finds
# ~190,000 lines on the Linux tree, and only the lines a page shows ever become objects (results.py).
Hits = tuple[np.ndarray, np.ndarray, np.ndarray]
_NO_HITS: Hits = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))

_UNANCHORED = re2._re2.RE2.Anchor.UNANCHORED
# Literal scans go through Hyperscan when the native kernels are missing (tests switch it off too).
USE_HYPERSCAN = True
# A pattern's entry in a tree plan (Evaluator.tree_plan) when it has no first-match offset on the line.
WHOLE_LINE = -1
NOT_ON_LINE = -2
# Up to this many match offsets, a per-offset bisect beats the vectorized binary search's fixed cost.
_FEW_OFFSETS = 64


class Evaluator:
    """Evaluates a pattern tree on a batch of documents: doc → matching global line indices."""

    def __init__(
        self,
        shard: Shard,
        case_sensitive: bool,
        path_mode: bool,
        candidates: Candidates,
        deadline: float | None = None,
    ) -> None:
        self.shard = shard
        # Checked before each pattern of a tree is verified (DeadlineExceeded): many terms stop in time.
        self.deadline = deadline
        self.case_sensitive = case_sensitive
        self.path_mode = path_mode
        # Candidate units per pattern are looked up once per query (shared with select_docs), not per batch.
        self.candidates = candidates
        # For a single-pattern query, lines = matches: scans may stop once this many lines are found.
        self.line_budget: int | None = None
        self._paths: dict[str, BitMap] = {}
        # Pattern trees: per pattern value, the first-match offset of each line it matched (global line →
        # offset) and the documents it was verified on, for the match ranges of the reported lines.
        self._firsts: dict[str, dict[int, int]] = {}
        self._scanned: dict[str, BitMap] = {}
        self.native = native.kernels()
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
        check_deadline(self.deadline)
        regex = compile_regex(pattern.value, case_sensitive=self.case_sensitive)
        if self.path_mode:
            if pattern.value not in self._paths:
                self._paths[pattern.value] = self.shard.docs_matching_path(regex)
            return {d: set() for d in docs & self._paths[pattern.value]}
        offsets = self.scan_offsets(pattern, self._runs(pattern, docs))
        pairs = self.line_pairs(offsets)
        firsts = self._firsts.setdefault(pattern.value, {})
        scanned = self._scanned.setdefault(pattern.value, BitMap())
        scanned |= docs
        found: dict[int, set[int]] = {}
        for (doc, line), offset in zip(pairs, offsets, strict=True):
            firsts[line] = offset
            bucket = found.get(doc)
            if bucket is None:
                found[doc] = {line}
            else:
                bucket.add(line)
        return found

    # Match ranges -------------------------------------------------------------------------------

    def match_ranges(self, pattern: Pattern, first: int) -> LineSpan:
        """The line holding `first` (a scanner's first-match offset) and every match of `pattern` in it."""
        return match_ranges(self.shard.content, pattern, self.case_sensitive, first)

    def tree_ranges(self, patterns: list[Pattern], doc: int, line: int) -> LineSpan:
        """Line `line` of `doc` reported by a pattern tree, with the ranges of every positive pattern in it."""
        return tree_ranges(self.shard, patterns, self.case_sensitive, doc, line, self.tree_plan(patterns, doc, line))

    def tree_plan(self, patterns: list[Pattern], doc: int, line: int) -> tuple[int, ...]:
        """How each of `patterns` gets its ranges on a reported line (`tree_ranges`), known only here.

        Each pattern continues from its own first match when its leaf found the line (that offset); a
        pattern whose leaf verified the document without finding the line does not match it (NOT_ON_LINE);
        one whose leaf never saw the document (an AND or OR elsewhere in the tree decided it first) is
        matched on this line only (WHOLE_LINE).
        """
        plan = []
        for pattern in patterns:
            first = self._firsts.get(pattern.value, {}).get(line)
            if first is not None:
                plan.append(first)
            elif doc not in self._scanned.get(pattern.value, ()):
                plan.append(WHOLE_LINE)
            else:
                plan.append(NOT_ON_LINE)
        return tuple(plan)

    def _ranges_from(self, pattern: Pattern, start: int, end: int, pos: int) -> list[tuple[int, int]]:
        return ranges_from(self.shard.content, pattern, self.case_sensitive, start, end, pos)

    def scan_hits(self, pattern: Pattern, runs: np.ndarray) -> Hits:
        """The lines of `runs` (an (n, 2) int64 array of [start, end) ranges) that `pattern` matches (`Hits`).

        A plain literal with the native kernels is scanned and mapped to lines in one call that creates no
        Python object per match; the other scanners report offsets that are then mapped in one go.
        """
        if not len(runs):
            return _NO_HITS
        if self.native is not None and is_plain_literal(pattern):
            budget = -1 if self.line_budget is None else self.line_budget
            needle = pattern.text if self.case_sensitive else pattern.text.lower()
            tables = self.shard.tables
            found = self.native.find_hits(
                self.shard.content,
                needle.encode(),
                self.case_sensitive,
                np.ascontiguousarray(runs, dtype=np.int64),
                budget,
                tables.starts,
                tables.doc_page0,
                tables.nl_pages,
                tables.nl_low,
                self.shard.page_shift,
            )
            docs, lines, firsts = (np.frombuffer(raw, dtype=np.int64) for raw in found)
            return docs, lines, firsts
        pairs = [(int(a), int(b)) for a, b in runs.tolist()]
        offsets = self.scan_offsets(pattern, pairs)
        return self.line_arrays(offsets)

    def line_arrays(self, offsets: list[int]) -> Hits:
        """`line_pairs` of ascending `offsets` as `Hits` arrays."""
        if not offsets:
            return _NO_HITS
        pairs = self.line_pairs(offsets)
        docs = np.fromiter((d for d, _ in pairs), dtype=np.int64, count=len(pairs))
        lines = np.fromiter((x for _, x in pairs), dtype=np.int64, count=len(pairs))
        return docs, lines, np.asarray(offsets, dtype=np.int64)

    def scan_offsets(self, pattern: Pattern, runs: list[tuple[int, int]]) -> list[int]:
        """One offset inside each line of the `runs` that `pattern` matches, ascending (fastest verifier)."""
        if not runs:
            return []
        regex = compile_regex(pattern.value, case_sensitive=self.case_sensitive)
        if is_plain_literal(pattern):
            # ASCII literal: the kernel's and Hyperscan's case folding (A-Z only) is RE2's in Latin-1 mode,
            # and ripgrep's --no-unicode, exactly. A literal with a newline can never match a line: RE2
            # (never_nl) says so, the literal scanners would not.
            if self.native is not None:
                budget = -1 if self.line_budget is None else self.line_budget
                needle = pattern.text if self.case_sensitive else pattern.text.lower()
                lines: list[int] = self.native.find_lines(
                    self.shard.content, needle.encode(), self.case_sensitive, runs, budget
                )
                return lines
            if self.use_hyperscan:
                text = pattern.text.encode()
                return scan_literal(self.shard.content, text, self.case_sensitive, runs, self.line_budget)
        prefilter = prefilter_literal(pattern.value, regex=pattern.regex)
        if prefilter is not None and self.native is not None and b"\n" not in prefilter:
            return self._native_prefiltered(regex._regexp, prefilter, runs)
        if prefilter is not None and self.use_hyperscan:
            return self._hyperscan_prefiltered(regex._regexp, prefilter, runs)
        lead = literal_then_class(pattern.value, self.case_sensitive) if self.native is not None else None
        if lead is not None:
            literal, follow, least = lead
            return self._native_prefiltered(regex._regexp, literal, runs, (follow, least), self.case_sensitive)
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
        doc_ids = np.asarray(docs.to_array(), dtype=np.int64)
        units = self.candidates.units_in(pattern, doc_ids)
        if units is None:
            return ranges_of(doc_ids, self.shard.starts)
        return ranges_of(units, self.shard.unit_starts)

    def _native_prefiltered(
        self,
        regexp: Any,
        literal: bytes,
        runs: list[tuple[int, int]],
        follow: tuple[bytes, int] = (b"", 0),
        case_sensitive: bool = False,
    ) -> list[int]:
        """Like scan_prefiltered, with the native kernel listing the lines that hold the required literal.

        The kernel hands back every such line's bounds at once, so the Python loop is one RE2 call per
        candidate line: through Hyperscan each literal match was a Python callback as well (`init_` occurs
        on ~120,000 lines of the Linux tree, 17,000 of which the `init regex` of bench/search_bench.py matches).
        `follow` (a class bitmap and a count, `literal_then_class`) keeps only lines where the literal is
        followed by that many bytes of the class: `0x` is on 2.5 million lines of the Linux tree, `0x` and 12
        hex digits on fewer than 10,000.
        """
        content = self.shard.content
        # Folded unless asked otherwise: the literal is required in any case, and the kernel folds ASCII letters.
        needle = literal if case_sensitive else literal.lower()
        bounds = np.asarray(runs, dtype=np.int64).reshape(-1, 2)
        kernels = self.native
        assert kernels is not None  # scan_offsets chose this scanner because they are built
        found = kernels.line_bounds(content, needle, case_sensitive, bounds, -1, *follow)
        lines = np.frombuffer(found, dtype=np.int64).tolist()
        match, budget = regexp.Match, self.line_budget
        offsets: list[int] = []
        for k in range(0, len(lines), 2):
            hit: int = match(_UNANCHORED, content, lines[k], lines[k + 1])[0][0]
            if hit >= 0:
                offsets.append(hit)
                if budget is not None and len(offsets) >= budget:
                    break
        return offsets

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
        if self.native is not None:
            tables = self.shard.tables
            pages = (tables.starts, tables.doc_page0, tables.nl_pages, tables.nl_low)
            found: list[tuple[int, int]] = self.native.map_lines(offsets, *pages, self.shard.page_shift)
            return found
        return self._lines_few(offsets) if len(offsets) <= _FEW_OFFSETS else self._lines_many(offsets)

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


def tree_ranges(
    shard: Shard, patterns: list[Pattern], case_sensitive: bool, doc: int, line: int, plan: tuple[int, ...]
) -> LineSpan:
    """Line `line` of `doc` with the ranges of `patterns` in it, as `plan` (Evaluator.tree_plan) says."""
    content = shard.content
    bounds: tuple[int, int] | None = None
    ranges: set[tuple[int, int]] = set()
    for pattern, first in zip(patterns, plan, strict=True):
        if first >= 0:
            start, end, found = match_ranges(content, pattern, case_sensitive, first)
            bounds = (start, end)
            ranges.update(found)
    if bounds is None:
        bounds = shard.line_span(doc, line)
    for pattern, first in zip(patterns, plan, strict=True):
        if first == WHOLE_LINE:
            ranges.update(ranges_from(content, pattern, case_sensitive, bounds[0], bounds[1], bounds[0]))
    return bounds[0], bounds[1], sorted(ranges)


def tree_line_bounds(shard: Shard, doc: int, line: int, plan: tuple[int, ...]) -> tuple[int, int]:
    """[start, end) of the line `tree_ranges` reports, without its ranges."""
    first = max(plan)
    if first < 0:
        return shard.line_span(doc, line)
    content = shard.content
    return content.rfind(b"\n", 0, first) + 1, content.find(b"\n", first)


def match_ranges(content: Any, pattern: Pattern, case_sensitive: bool, first: int) -> LineSpan:
    """The line of `content` holding `first` (a scanner's first-match offset) and every match of `pattern` in it.

    Continues from the first match to the end of its line: a literal by `find`, a regex by RE2 from each
    match's end, as `finditer` steps (an empty match advances one byte; empty ranges are not reported).
    Needs only the shard's content, so results compute it lazily for the lines a page shows.
    """
    start = content.rfind(b"\n", 0, first) + 1
    end = content.find(b"\n", first)
    return start, end, ranges_from(content, pattern, case_sensitive, start, end, first)


def ranges_from(
    content: Any, pattern: Pattern, case_sensitive: bool, start: int, end: int, pos: int
) -> list[tuple[int, int]]:
    """Non-empty matches of `pattern` in the line [start, end) at or after `pos`, relative to `start`."""
    out: list[tuple[int, int]] = []
    if is_plain_literal(pattern):
        needle = pattern.text.encode()
        size = len(needle)
        if case_sensitive:
            hit = content.find(needle, pos, end)
            while hit >= 0:
                out.append((hit - start, hit - start + size))
                hit = content.find(needle, hit + size, end)
            return out
        # ASCII folding only, as the kernel and RE2's Latin-1 mode fold a literal's letters.
        line = content[start:end].lower()
        needle = needle.lower()
        hit = line.find(needle, pos - start)
        while hit >= 0:
            out.append((hit, hit + size))
            hit = line.find(needle, hit + size)
        return out
    match = compile_regex(pattern.value, case_sensitive=case_sensitive)._regexp.Match
    while pos <= end:
        hit_start, hit_end = match(_UNANCHORED, content, pos, end)[0]
        if hit_start < 0:
            break
        if hit_end > hit_start:
            out.append((hit_start - start, hit_end - start))
            pos = hit_end
        else:
            pos = hit_start + 1
    return out


def ranges_of(ids: np.ndarray, starts: np.ndarray, bridge: np.ndarray | None = None) -> list[tuple[int, int]]:
    """[start, end) content ranges of the runs of consecutive ids (documents or units) in sorted `ids`.

    `bridge`, when given, marks the gaps after each id (but the last) that may be scanned through anyway.
    """
    bounds = run_bounds(ids, starts, bridge)
    return list(zip(bounds[:, 0].tolist(), bounds[:, 1].tolist(), strict=True))


def run_bounds(ids: np.ndarray, starts: np.ndarray, bridge: np.ndarray | None = None) -> np.ndarray:
    """`ranges_of` as an (n, 2) int64 array (what `Evaluator.scan_hits` takes), without a tuple per run."""
    if not len(ids):
        return np.zeros((0, 2), dtype=np.int64)
    gaps = np.diff(ids) != 1
    if bridge is not None:
        gaps &= ~bridge
    breaks = np.flatnonzero(gaps) + 1
    firsts = ids[np.concatenate([[0], breaks])]
    lasts = ids[np.concatenate([breaks, [len(ids)]]) - 1]
    return np.stack([starts[firsts], starts[lasts + 1]], axis=1).astype(np.int64, copy=False)


def group_hits(hits: Hits) -> list[tuple[int, list[int], list[int]]]:
    """(document, its lines, their first-match offsets) per document of `hits`, in order.

    The lists are slices of two `tolist()` calls: per document a few C-level operations, per line nothing
    but the integers themselves.
    """
    docs, lines, firsts = hits
    if not len(docs):
        return []
    cuts = [0, *(np.flatnonzero(docs[1:] != docs[:-1]) + 1).tolist(), len(docs)]
    line_list, first_list = lines.tolist(), firsts.tolist()
    doc_ids = docs[cuts[:-1]].tolist()
    return [(doc, line_list[a:b], first_list[a:b]) for doc, a, b in zip(doc_ids, cuts[:-1], cuts[1:], strict=True)]


def is_plain_literal(pattern: Pattern) -> bool:
    """An ASCII literal without newlines: scanned by the literal kernels, its ranges found by `find`."""
    return not pattern.regex and bool(pattern.text) and pattern.text.isascii() and "\n" not in pattern.text


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
