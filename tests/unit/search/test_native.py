"""The native kernels (search/_scan.c) against plain-Python references, including hostile input."""

from __future__ import annotations

import itertools
import random
import re
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap

from codewell.search import native

_scan = native._scan
assert _scan is not None, "the native kernels must be built for the tests (pip install -e .)"

# Letters of both cases, their neighbours under `| 0x20` ('@' -> '`', '[' -> '{'), and non-ASCII bytes
# that fold in Unicode but not in ripgrep's --no-unicode mode.
CONTENT_BYTES = b"aAbBkK_@`[{ \n\xc9\xe9\xb5\xff"
content = st.binary(max_size=300).map(lambda b: bytes(CONTENT_BYTES[x % len(CONTENT_BYTES)] for x in b))
needle = st.binary(min_size=1, max_size=6).map(lambda b: bytes(b"aAbBkK_@`[{ "[x % 12] for x in b))


def reference_lines(data: bytes, literal: bytes, case_sensitive: bool, runs: list[tuple[int, int]]) -> list[int]:
    """The first match's start in each line piece of each run that holds `literal` (RE2/ripgrep semantics)."""
    pattern = re.compile(re.escape(literal), 0 if case_sensitive else re.IGNORECASE)
    found = []
    for start, end in runs:
        pos = start
        while pos < end:
            line_end = data.find(b"\n", pos, end)
            line_end = end if line_end < 0 else line_end
            hit = pattern.search(data, pos, line_end)
            if hit:
                found.append(hit.start())
            pos = line_end + 1
    return found


def split_runs(size: int, cuts: list[int]) -> list[tuple[int, int]]:
    points = sorted({0, size, *(c % (size + 1) for c in cuts)})
    return list(itertools.pairwise(points))


@settings(max_examples=400, deadline=None)
@given(content, needle, st.booleans(), st.lists(st.integers(min_value=0, max_value=400), max_size=4))
def test_find_lines_equals_the_line_by_line_reference(
    data: bytes, literal: bytes, case_sensitive: bool, cuts: list[int]
) -> None:
    # Long inputs cross the 16-byte vector loop and its scalar tail at every alignment.
    data = data * 3
    runs = split_runs(len(data), cuts)
    folded = literal if case_sensitive else literal.lower()
    got = _scan.find_lines(data, folded, case_sensitive, runs, -1)
    want = reference_lines(data, literal, case_sensitive, runs)
    assert got == want
    for budget in range(3):
        assert _scan.find_lines(data, folded, case_sensitive, runs, budget) == want[: max(budget, 1)][: len(want)]


def test_find_lines_folds_ascii_letters_only() -> None:
    # '@' | 0x20 is '`' and the Kelvin sign is not 'k' without Unicode: neither may match.
    data = b"xx MUTEX_Lock\nmutex@lock\nmutex`lock\nK\xe2\x84\xaa\n\xc9\xe9\n"
    whole = [(0, len(data))]
    assert _scan.find_lines(data, b"mutex_lock", False, whole, -1) == [3]
    assert _scan.find_lines(data, b"mutex_lock", True, whole, -1) == []
    assert _scan.find_lines(data, b"kk", False, whole, -1) == []
    # One offset per line: the first k or K of each of the four lines that hold one.
    want = reference_lines(data, b"k", False, whole)
    assert _scan.find_lines(data, b"k", False, whole, -1) == [12, 23, 34, 36] == want


def test_find_lines_refuses_what_it_cannot_answer() -> None:
    data = b"abc\n"
    with pytest.raises(ValueError, match="ASCII"):
        _scan.find_lines(data, b"\xc9", True, [(0, 4)], -1)
    with pytest.raises(ValueError, match="lower case"):
        _scan.find_lines(data, b"ABC", False, [(0, 4)], -1)
    with pytest.raises(ValueError, match="newlines"):
        _scan.find_lines(data, b"a\nb", True, [(0, 4)], -1)
    with pytest.raises(ValueError, match="empty"):
        _scan.find_lines(data, b"", True, [(0, 4)], -1)
    with pytest.raises(ValueError, match="outside the content"):
        _scan.find_lines(data, b"a", True, [(0, 5)], -1)
    with pytest.raises(ValueError, match="outside the content"):
        _scan.find_lines(data, b"a", True, [(3, 2)], -1)
    with pytest.raises(TypeError, match="tuples"):
        _scan.find_lines(data, b"a", True, [[0, 4]], -1)
    with pytest.raises(TypeError, match="tuples"):
        _scan.find_lines(data, b"a", True, ((0, 4),), -1)


def test_map_lines_refuses_offsets_outside_the_tables() -> None:
    starts = np.array([0, 4], dtype=np.int64)
    page0 = np.array([0, 1], dtype=np.int64)
    pages = np.array([0, 1], dtype=np.int64)
    low = np.array([3], dtype=np.uint16)
    assert _scan.map_lines([0, 3], starts, page0, pages, low, 16) == [(0, 0), (0, 0)]
    with pytest.raises(ValueError, match="outside the content"):
        _scan.map_lines([4], starts, page0, pages, low, 16)
    with pytest.raises(ValueError, match="outside the content"):
        _scan.map_lines([-1], starts, page0, pages, low, 16)
    with pytest.raises(ValueError, match="page_shift"):
        _scan.map_lines([0], starts, page0, pages, low, 0)
    with pytest.raises(ValueError, match="nl_pages"):
        _scan.map_lines([3], starts, page0, pages, low, 1)  # page 1 of document 0 is not in the table
    with pytest.raises(ValueError, match="multiple"):
        _scan.map_lines([0], b"\x00" * 9, page0, pages, low, 16)


def _bitmaps() -> st.SearchStrategy[BitMap]:
    """Bitmaps with array, bitmap and run containers, in 1 to 6 containers (offsets stored from 4 on)."""

    def build(draw_spec: list[tuple[int, int, int]]) -> BitMap:
        values: set[int] = set()
        for key, kind, seed in draw_spec:
            rng = random.Random(seed)
            base = key << 16
            if kind == 0:  # sparse: an array container
                values.update(base + rng.randrange(1 << 16) for _ in range(rng.randrange(1, 200)))
            elif kind == 1:  # dense: a bitmap container
                values.update(base + rng.randrange(1 << 16) for _ in range(6000))
            else:  # long stretches: run containers once optimized
                start = rng.randrange(1 << 15)
                values.update(range(base + start, base + start + rng.randrange(1, 20000)))
        bitmap = BitMap(values)
        bitmap.run_optimize()
        return bitmap

    spec = st.lists(st.tuples(st.integers(0, 8), st.integers(0, 2), st.integers()), min_size=1, max_size=6)
    return spec.map(build)


@settings(max_examples=80, deadline=None)
@given(_bitmaps(), st.integers(), st.integers(min_value=0, max_value=64))
def test_posting_keep_equals_bitmap_intersection(bitmap: BitMap, seed: int, pad: int) -> None:
    rng = random.Random(seed)
    members = list(bitmap)
    probes = rng.sample(members, min(len(members), 300)) + [rng.randrange(9 << 16) for _ in range(300)]
    units = sorted(set(probes))
    want = [u for u in units if u in bitmap]
    serialized = bitmap.serialize()
    buffer = b"\xee" * pad + serialized + b"\xee" * 7
    assert _scan.posting_keep(buffer, pad, pad + len(serialized), False, units) == want
    raw = struct.pack(f"<{len(members)}I", *members)
    assert _scan.posting_keep(b"\x00" * pad + raw, pad, pad + len(raw), True, units) == want


@settings(max_examples=100, deadline=None)
@given(_bitmaps(), st.integers(), st.integers(min_value=1, max_value=64))
def test_posting_keep_never_reads_past_a_damaged_list(bitmap: BitMap, seed: int, cut: int) -> None:
    """Truncated or scribbled lists raise ValueError (or read wrong bits in bounds), never crash."""
    rng = random.Random(seed)
    serialized = bytearray(bitmap.serialize())
    for _ in range(rng.randrange(4)):
        serialized[rng.randrange(len(serialized))] = rng.randrange(256)
    damaged = bytes(serialized[: max(0, len(serialized) - cut)])
    try:
        found = _scan.posting_keep(damaged, 0, len(damaged), False, list(range(0, 9 << 16, 997)))
    except ValueError:
        return
    assert all(isinstance(u, int) for u in found)


def test_posting_keep_refuses_bad_bounds() -> None:
    with pytest.raises(ValueError, match="not a stored list"):
        _scan.posting_keep(b"\x00" * 8, 4, 12, True, [1])
    with pytest.raises(ValueError, match="not a stored list"):
        _scan.posting_keep(b"\x00" * 8, 0, 7, True, [1])
    with pytest.raises(ValueError, match="roaring"):
        _scan.posting_keep(b"\x00" * 8, 0, 8, False, [1])
    with pytest.raises(ValueError, match="uint32"):
        _scan.posting_keep(struct.pack("<I", 5), 0, 4, True, [-1])
