"""Exhaustive searches over big shards and many shards, fanned out over a process pool plus this process."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from codewell.search.index.shard import DocSet, Shard
from codewell.search.query.parser import Query
from codewell.search.searcher import ShardHit, ShardResult, gc_paused, search_shard
from codewell.search.selection import DeadlineExceeded, select_docs, selected_bytes

__all__ = ["PackedResult", "pack", "search_many", "search_part", "search_parts", "search_shard_parallel", "unpack"]


# Below this much content a second process costs more (pickling, scheduling) than it saves.
PARALLEL_MIN_BYTES = 64 << 20
_open_shards: dict[str, Shard] = {}


@dataclass(frozen=True, slots=True)
class PackedResult:
    """A worker's ShardResult of one pattern as four int64 arrays, which travel back as a few byte strings.

    Pickling the hits themselves cost more than finding them: ~90,000 lines of `"return 0"` in ~16,000
    ShardHit objects took 50-90 ms to pickle and as long again to unpickle; as arrays both are a copy.
    """

    docs: bytes  # each hit's document
    counts: bytes  # each hit's number of lines
    lines: bytes  # the hits' lines, one after another
    firsts: bytes  # their first-match offsets
    match_count: int
    limit_hit: bool
    timed_out: bool


def pack(result: ShardResult) -> ShardResult | PackedResult:
    """`result` as a PackedResult when each hit has lines with their first-match offsets (one pattern)."""
    hits = result.hits
    if not hits or any(not h.firsts or h.plans for h in hits):
        return result
    docs = np.fromiter((h.doc for h in hits), dtype=np.int64, count=len(hits))
    counts = np.fromiter((len(h.lines) for h in hits), dtype=np.int64, count=len(hits))
    total = int(counts.sum())
    lines = np.fromiter(itertools.chain.from_iterable(h.lines for h in hits), dtype=np.int64, count=total)
    firsts = np.fromiter(itertools.chain.from_iterable(h.firsts for h in hits), dtype=np.int64, count=total)
    return PackedResult(
        docs.tobytes(),
        counts.tobytes(),
        lines.tobytes(),
        firsts.tobytes(),
        result.match_count,
        result.limit_hit,
        result.timed_out,
    )


def unpack(found: ShardResult | PackedResult) -> ShardResult:
    """The ShardResult that `pack` packed (or `found` itself when it was not packed)."""
    if isinstance(found, ShardResult):
        return found
    counts = np.frombuffer(found.counts, dtype=np.int64)
    cuts = [0, *np.cumsum(counts).tolist()]
    lines = np.frombuffer(found.lines, dtype=np.int64).tolist()
    firsts = np.frombuffer(found.firsts, dtype=np.int64).tolist()
    docs = np.frombuffer(found.docs, dtype=np.int64).tolist()
    hits = [ShardHit(doc, lines[a:b], firsts=firsts[a:b]) for doc, a, b in zip(docs, cuts[:-1], cuts[1:], strict=True)]
    return ShardResult(hits, found.match_count, found.limit_hit, found.timed_out)


def split_ranges(shard: Shard, parts: int) -> list[tuple[int, int]]:
    """`parts` contiguous document ranges of about equal content size."""
    total = int(shard.starts[-1])
    cuts = [0, *(int(np.searchsorted(shard.starts, total * k // parts)) for k in range(1, parts)), shard.doc_count]
    return [(a, b) for a, b in itertools.pairwise(cuts) if b > a]


def search_part(
    path: str, query: Query, branch: str | DocSet | None, limit: int | None, deadline: float, lo: int, hi: int
) -> ShardResult | PackedResult:
    """Worker-process entry: search documents [lo, hi) of the shard at `path` (opened once per process).

    The answer is packed for the trip back (`unpack` it); no cyclic collection runs while it is built, as
    in the server's own searches (`gc_paused`).
    """
    shard = _open_shards.get(path)
    if shard is None:
        # A new generation: let go of those whose files were removed (replaced by a newer index), so
        # their mappings close here too.
        for old in [p for p in _open_shards if not Path(p).exists()]:
            del _open_shards[old]
        shard = _open_shards[path] = Shard.open(Path(path))
        if len(_open_shards) > 64:
            _open_shards.clear()
    with gc_paused():
        return pack(search_shard(shard, query, branch=branch, limit=limit, deadline=deadline, doc_range=(lo, hi)))


def search_shard_parallel(
    shard: Shard,
    query: Query,
    *,
    branch: str | DocSet | None,
    limit: int | None,
    deadline: float,
    pool: Any,
    parts: int,
) -> ShardResult:
    """Like search_shard, with document ranges verified in `pool` processes; exhaustive searches only.

    The filters and trigram candidates are applied first, here: only when the selected documents hold at
    least PARALLEL_MIN_BYTES of content is the scan split over processes (a filtered or rare query is
    answered here in well under a millisecond of scanning, far less than a round trip to the pool).
    """
    if pool is None or parts < 2 or limit is not None or int(shard.starts[-1]) < PARALLEL_MIN_BYTES:
        return search_shard(shard, query, branch=branch, limit=limit, deadline=deadline)
    selected = select_docs(shard, query, branch, deadline=deadline)
    try:
        small = (
            query.expr is None
            or query.type == "path"
            or selected.direct_units() is not None
            or selected_bytes(shard, selected.docs) < PARALLEL_MIN_BYTES
        )
    except DeadlineExceeded:
        return ShardResult(timed_out=True)
    if small:
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
        part = unpack(future.result())
        merged.hits.extend(part.hits)
        merged.match_count += part.match_count
        merged.timed_out |= part.timed_out
    return merged


def search_many(
    jobs: list[tuple[Shard, str | DocSet | None]], query: Query, *, deadline: float, pool: Any, parts: int
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
    selections = [select_docs(shard, query, branch, deadline=deadline) for shard, branch in jobs]
    try:
        scanned = sum(selected_bytes(shard, sel.docs) for (shard, _), sel in zip(jobs, selections, strict=True))
    except DeadlineExceeded:
        return [ShardResult(timed_out=True) for _ in jobs]
    if query.expr is None or query.type == "path" or scanned < PARALLEL_MIN_BYTES:
        return [
            search_shard(s, query, branch=b, limit=None, deadline=deadline, selected=sel)
            for (s, b), sel in zip(jobs, selections, strict=True)
        ]
    pieces: list[tuple[int, Shard, str | DocSet | None, tuple[int, int]]] = []
    for index, (shard, branch) in enumerate(jobs):
        ranges = split_ranges(shard, parts) if int(shard.starts[-1]) >= PARALLEL_MIN_BYTES else [(0, shard.doc_count)]
        pieces.extend((index, shard, branch, r) for r in ranges)
    try:
        weights = [selected_bytes(shard, selections[index].within(*r).docs) for index, shard, _b, r in pieces]
    except DeadlineExceeded:
        return [ShardResult(timed_out=True) for _ in jobs]
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
        outputs.update(zip(group, map(unpack, future.result()), strict=True))
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
    piece: tuple[int, Shard, str | DocSet | None, tuple[int, int]], query: Query, deadline: float
) -> tuple[str, Query, str | DocSet | None, None, float, int, int]:
    _index, shard, branch, (lo, hi) = piece
    return (str(shard.path), query, branch, None, deadline, lo, hi)


def search_parts(
    parts: list[tuple[str, Query, str | DocSet | None, int | None, float, int, int]],
) -> list[ShardResult | PackedResult]:
    """Worker-process entry: several `search_part` calls in one round trip."""
    return [search_part(*args) for args in parts]
