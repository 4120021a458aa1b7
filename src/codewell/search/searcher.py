"""Evaluate a parsed query on one shard: filters as bitmaps, trigram candidates, native RE2 verification.

Verification never loops over files in Python: consecutive candidate documents form one contiguous range of
the mmap'd content, and RE2 scans each range in one call per matching line; offsets map to documents and
lines with numpy searchsorted over the stored document and newline offsets.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import re2
from pyroaring import BitMap

from codewell.search.index.shard import Shard
from codewell.search.query.parser import And, Node, Not, Or, Pattern, Query
from codewell.search.query.regex import TRUE, Formula, LitAnd, LitOr, compile_regex, required_literals

__all__ = ["ShardHit", "ShardResult", "compile_paths", "search_shard"]

_UNANCHORED = re2._re2.RE2.Anchor.UNANCHORED
# Verification batches grow geometrically: the first page comes from a small slice of the shard, while
# exhaustive searches make few, large native calls.
_FIRST_BATCH_BYTES = 1 << 20
_MAX_BATCH_BYTES = 64 << 20


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


def compile_paths(patterns: tuple[str, ...], case_sensitive: bool) -> list[Any]:
    """Compiled RE2 regexes for file: filters."""
    return [compile_regex(p, case_sensitive=case_sensitive) for p in patterns]


def plan(node: Node) -> Formula:
    """The required-literal formula of a pattern tree (negations contribute nothing)."""
    if isinstance(node, Pattern):
        return required_literals(node.value)
    if isinstance(node, Not):
        return TRUE
    parts = [plan(child) for child in node.children]
    if isinstance(node, And):
        kept = [p for p in parts if p is not TRUE]
        if not kept:
            return TRUE
        return kept[0] if len(kept) == 1 else LitAnd(tuple(kept))
    if any(p is TRUE for p in parts):
        return TRUE
    return LitOr(tuple(parts))


def filter_docs(shard: Shard, query: Query, branch: str | None) -> BitMap:
    """Documents that pass the branch, language and file filters."""
    docs = shard.branch_docs(branch) if branch is not None else shard.all_docs
    if query.languages:
        docs &= shard.docs_with_language(set(query.languages))
    if query.exclude_languages:
        docs -= shard.docs_with_language(set(query.exclude_languages))
    for regex in compile_paths(query.files, query.case_sensitive):
        docs &= shard.docs_matching_path(regex)
    for regex in compile_paths(query.exclude_files, query.case_sensitive):
        docs -= shard.docs_matching_path(regex)
    return docs


def search_shard(shard: Shard, query: Query, *, branch: str | None, limit: int | None, deadline: float) -> ShardResult:
    """Matching documents of `shard` in document order, stopping after `limit` matching lines."""
    result = ShardResult()
    docs = filter_docs(shard, query, branch)
    if query.expr is None:
        return _take_paths(docs, result, limit)
    path_mode = query.type == "path"
    if not path_mode:
        candidates = shard.candidates(plan(query.expr))
        if candidates is not None:
            docs &= candidates
    evaluator = _Evaluator(shard, query.case_sensitive, path_mode)
    sorted_docs = np.asarray(docs.to_array(), dtype=np.int64) if docs else np.zeros(0, dtype=np.int64)
    batch_bytes = _FIRST_BATCH_BYTES
    i = 0
    starts = shard.starts
    while i < len(sorted_docs):
        if time.monotonic() > deadline:
            result.timed_out = True
            break
        j = _batch_end(sorted_docs, starts, i, batch_bytes)
        batch = BitMap(sorted_docs[i:j])
        i = j
        batch_bytes = min(batch_bytes * 2, _MAX_BATCH_BYTES)
        found = evaluator.eval(query.expr, batch)
        for doc in sorted(found):
            lines = sorted(found[doc])
            count = max(1, len(lines))
            if limit is not None and result.match_count + count > limit:
                keep = limit - result.match_count
                if keep > 0 and lines:
                    result.hits.append(ShardHit(doc, lines[:keep]))
                    result.match_count += keep
                result.limit_hit = True
                return result
            result.hits.append(ShardHit(doc, lines))
            result.match_count += count
        if limit is not None and result.match_count >= limit and i < len(sorted_docs):
            result.limit_hit = True
            break
    return result


def _take_paths(docs: BitMap, result: ShardResult, limit: int | None) -> ShardResult:
    for doc in docs:
        if limit is not None and result.match_count >= limit:
            result.limit_hit = True
            break
        result.hits.append(ShardHit(doc, []))
        result.match_count += 1
    return result


def _batch_end(sorted_docs: np.ndarray, starts: np.ndarray, i: int, batch_bytes: int) -> int:
    first = int(starts[sorted_docs[i]])
    doc_ends = starts[sorted_docs[i:] + 1]
    j = i + int(np.searchsorted(doc_ends, first + batch_bytes, side="right"))
    return max(j, i + 1)


class _Evaluator:
    """Evaluates a pattern tree on a batch of documents: doc → matching global line indices."""

    def __init__(self, shard: Shard, case_sensitive: bool, path_mode: bool) -> None:
        self.shard = shard
        self.case_sensitive = case_sensitive
        self.path_mode = path_mode

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
            return {d: set() for d in docs & self.shard.docs_matching_path(regex)}
        candidates = self.shard.candidates(required_literals(pattern.value))
        if candidates is not None:
            docs = docs & candidates
        if not docs:
            return {}
        return self.scan(regex._regexp, docs)

    def scan(self, regexp: Any, docs: BitMap) -> dict[int, set[int]]:
        """Match `regexp` over each run of consecutive documents with one native call per matching line.

        The loop only records match offsets and skips to the next line (memchr via mmap.find); offsets are
        mapped to documents and lines afterwards with one numpy searchsorted per matching document.
        """
        shard = self.shard
        starts = shard.starts
        content = shard.content
        arr = np.asarray(docs.to_array(), dtype=np.int64)
        # Runs of consecutive doc ids are contiguous in the content file.
        breaks = np.flatnonzero(np.diff(arr) != 1) + 1
        run_firsts = arr[np.concatenate([[0], breaks])].tolist()
        run_lasts = arr[np.concatenate([breaks, [len(arr)]]) - 1].tolist()
        match = regexp.Match
        find = content.find
        offsets: list[int] = []
        for first_doc, last_doc in zip(run_firsts, run_lasts, strict=True):
            pos, end = int(starts[first_doc]), int(starts[last_doc + 1])
            while pos < end:
                ms = match(_UNANCHORED, content, pos, end)[0][0]
                if ms < 0 or ms >= end:
                    break
                offsets.append(ms)
                # Every document ends in a newline, so the line end is always inside the run.
                pos = find(b"\n", ms) + 1
        return self.lines_of(offsets)

    def lines_of(self, offsets: list[int]) -> dict[int, set[int]]:
        """Map ascending content offsets to {document: global line indices}."""
        if not offsets:
            return {}
        shard = self.shard
        at = np.asarray(offsets, dtype=np.int64)
        doc_of = np.searchsorted(shard.starts, at, side="right") - 1
        bounds = np.flatnonzero(np.diff(doc_of)) + 1
        found: dict[int, set[int]] = {}
        for lo, hi in zip(
            np.concatenate([[0], bounds]).tolist(), np.concatenate([bounds, [len(at)]]).tolist(), strict=True
        ):
            doc = int(doc_of[lo])
            base, top = int(shard.line_base[doc]), int(shard.line_base[doc + 1])
            rel = at[lo:hi] - int(shard.starts[doc])
            lines = base + np.searchsorted(shard.newlines[base:top], rel, side="left")
            found[doc] = set(lines.tolist())
        return found
