"""Exhaustive answers without a Python object per match: the kernels that scan and number lines in one call
(find_hits, line_bounds), the array grouping of hits, and the packed worker answers (search/parallel.py)."""

from __future__ import annotations

import itertools
import re
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codewell.search import native, parallel
from codewell.search.index.builder import SourceDoc, build_shard
from codewell.search.index.shard import Shard
from codewell.search.query.parser import And, Pattern, Query
from codewell.search.query.regex import literal_then_class
from codewell.search.searcher import ShardHit, ShardResult, search_shard
from codewell.search.verify import group_hits

_scan = native._scan
assert _scan is not None, "the native kernels must be built for the tests (pip install -e .)"

docs_text = st.lists(st.text(alphabet="abAB_x \n\xe9", max_size=80), min_size=1, max_size=6)
needle = st.text(alphabet="abAB_x ", min_size=1, max_size=4)


def _shard(tmp: str, docs: list[str], page_shift: int) -> Shard:
    sources = [SourceDoc(f"f{i}.txt", d.encode(), len(d), frozenset({"main"})) for i, d in enumerate(docs)]
    return Shard.open(build_shard(Path(tmp) / "s", {"repo": "r"}, sources, unit_bytes=16, page_shift=page_shift))


def _runs(shard: Shard, cuts: list[int]) -> list[tuple[int, int]]:
    """Document-aligned runs: the documents split into consecutive groups at `cuts`."""
    starts = [int(x) for x in shard.starts]
    points = sorted({0, shard.doc_count, *(c % (shard.doc_count + 1) for c in cuts)})
    return [(starts[a], starts[b]) for a, b in itertools.pairwise(points) if b > a]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs_text, needle, st.booleans(), st.sampled_from([1, 2, 3, 16]), st.lists(st.integers(0, 8), max_size=3))
def test_find_hits_equals_find_lines_then_map_lines(
    docs: list[str], literal: str, case_sensitive: bool, page_shift: int, cuts: list[int]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        shard = _shard(tmp, docs, page_shift)
        runs = _runs(shard, cuts)
        folded = (literal if case_sensitive else literal.lower()).encode()
        t = shard.tables
        tables = (t.starts, t.doc_page0, t.nl_pages, t.nl_low, shard.page_shift)
        content = shard.content
        for budget in (-1, 0, 1, 2):
            offsets = _scan.find_lines(content, folded, case_sensitive, runs, budget)
            pairs = _scan.map_lines(offsets, *tables) if offsets else []
            raw = _scan.find_hits(content, folded, case_sensitive, np.asarray(runs, dtype=np.int64), budget, *tables)
            docs_got, lines_got, firsts_got = (np.frombuffer(b, dtype=np.int64).tolist() for b in raw)
            assert firsts_got == offsets
            assert list(zip(docs_got, lines_got, strict=True)) == pairs


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200), st.sampled_from([b"ab", b"a", b"b_a"]), st.lists(st.integers(0, 200), max_size=3))
def test_line_bounds_lists_each_line_holding_the_literal_once(data: bytes, literal: bytes, cuts: list[int]) -> None:
    # Runs start at line starts (units are line-aligned): cut after newlines only.
    breaks = [i + 1 for i, c in enumerate(data) if c == 0x0A]
    points = sorted({0, len(data), *(breaks[c % len(breaks)] for c in cuts if breaks)})
    runs = [(a, b) for a, b in itertools.pairwise(points) if b > a]
    got = np.frombuffer(_scan.line_bounds(data, literal, False, np.asarray(runs, dtype=np.int64), -1), np.int64)
    want: list[int] = []
    pattern = re.compile(re.escape(literal), re.IGNORECASE)
    for start, end in runs:
        pos = start
        while pos < end:
            line_end = data.find(b"\n", pos, end)
            line_end = end if line_end < 0 else line_end
            if pattern.search(data, pos, line_end):
                want += [pos, line_end]
            pos = line_end + 1
    assert got.tolist() == want
    with pytest.raises(ValueError, match="outside the content"):
        _scan.line_bounds(data, literal, False, np.asarray([[0, len(data) + 1]], dtype=np.int64), -1)


def test_find_hits_refuses_runs_and_offsets_outside_the_tables() -> None:
    content = b"abc\nab\n"
    starts = np.array([0, 4], dtype=np.int64)  # the tables cover the first line only
    page0 = np.array([0, 1], dtype=np.int64)
    pages = np.array([0, 1], dtype=np.int64)
    low = np.array([3], dtype=np.uint16)
    tables = (starts, page0, pages, low, 16)
    raw = _scan.find_hits(content, b"ab", True, np.array([[0, 4]], dtype=np.int64), -1, *tables)
    assert [np.frombuffer(b, dtype=np.int64).tolist() for b in raw] == [[0], [0], [0]]
    with pytest.raises(ValueError, match="line tables"):
        _scan.find_hits(content, b"ab", True, np.array([[0, 7]], dtype=np.int64), -1, *tables)
    with pytest.raises(ValueError, match="outside the content"):
        _scan.find_hits(content, b"ab", True, np.array([[0, 8]], dtype=np.int64), -1, *tables)
    with pytest.raises(ValueError, match="multiple"):
        _scan.find_hits(content, b"ab", True, b"\x00" * 8, -1, *tables)


def test_group_hits_cuts_at_each_new_document() -> None:
    arrays = (
        np.array([3, 3, 5, 9, 9, 9], dtype=np.int64),
        np.array([10, 12, 40, 70, 71, 75], dtype=np.int64),
        np.array([100, 130, 400, 700, 710, 750], dtype=np.int64),
    )
    assert group_hits(arrays) == [
        (3, [10, 12], [100, 130]),
        (5, [40], [400]),
        (9, [70, 71, 75], [700, 710, 750]),
    ]
    empty = np.zeros(0, dtype=np.int64)
    assert group_hits((empty, empty, empty)) == []


def test_a_packed_worker_answer_unpacks_to_the_same_hits(tmp_path: Path) -> None:
    texts = [f"return {i % 3};\nx\nreturn 0;\n" for i in range(50)]
    docs = [SourceDoc(f"d{i}.c", text.encode(), 0, frozenset({"main"})) for i, text in enumerate(texts)]
    shard = Shard.open(build_shard(tmp_path / "s", {"repo": "r"}, docs))
    single = Query(expr=Pattern(re.escape("return 0"), "return 0", False, 0))
    found = search_shard(shard, single, branch="main", limit=None, deadline=time.monotonic() + 30)
    packed = parallel.pack(found)
    assert isinstance(packed, parallel.PackedResult)
    back = parallel.unpack(packed)
    assert [(h.doc, h.lines, h.firsts, h.plans) for h in back.hits] == [
        (h.doc, h.lines, h.firsts, h.plans) for h in found.hits
    ]
    assert (back.match_count, back.limit_hit, back.timed_out) == (found.match_count, False, False) == (67, False, False)
    # A pattern tree's hits carry plans, not first offsets: they travel as they are.
    tree = Query(expr=And((Pattern("return", "return", False, 0), Pattern("x", "x", False, 0))))
    found_tree = search_shard(shard, tree, branch="main", limit=None, deadline=time.monotonic() + 30)
    assert found_tree.hits
    assert parallel.pack(found_tree) is found_tree
    empty = ShardResult(timed_out=True)
    assert parallel.pack(empty) is empty
    assert parallel.unpack(ShardResult([ShardHit(1, [2], firsts=[3])])).hits[0].firsts == [3]


def test_a_regex_whose_required_literal_spans_lines_matches_no_line(tmp_path: Path) -> None:
    # The kernels refuse a needle with a newline; RE2 (never_nl) matches no line for such a regex anyway.
    docs = [SourceDoc("a.c", b"x foo\nbarbaz y\nfoo barbaz\n", 0, frozenset({"main"}))]
    shard = Shard.open(build_shard(tmp_path / "s", {"repo": "r"}, docs))
    for value in (r"foo\nbarbaz", r"[a-z]+foo\nbarbaz"):
        q = Query(expr=Pattern(value, value, True, 0), case_sensitive=True)
        found = search_shard(shard, q, branch="main", limit=None, deadline=time.monotonic() + 30)
        assert (found.hits, found.match_count) == ([], 0)
    q = Query(expr=Pattern(r"[a-z]+o barbaz", r"[a-z]+o barbaz", True, 0), case_sensitive=True)
    found = search_shard(shard, q, branch="main", limit=None, deadline=time.monotonic() + 30)
    assert [(h.doc, h.lines) for h in found.hits] == [(0, [2])]


def _class_bitmap(members: bytes) -> bytes:
    bitmap = bytearray(32)
    for c in members:
        bitmap[c >> 3] |= 1 << (c & 7)
    return bytes(bitmap)


@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=200).map(lambda b: bytes(b"ab01x\n _"[x % 8] for x in b)),
    st.sampled_from([b"ab", b"a", b"x0"]),
    st.sampled_from([b"01", b"01ab", b"_"]),
    st.integers(min_value=0, max_value=4),
)
def test_line_bounds_with_a_class_run_keeps_the_lines_where_the_literal_is_followed_by_it(
    data: bytes, literal: bytes, members: bytes, least: int
) -> None:
    follow = _class_bitmap(members + b"\n")  # a newline in the class is never part of a run: lines stay lines
    runs = np.asarray([[0, len(data)]], dtype=np.int64)
    got = np.frombuffer(_scan.line_bounds(data, literal, True, runs, -1, follow, least), np.int64).tolist()
    run = re.compile(re.escape(literal) + b"[" + re.escape(members) + b"]{%d}" % least)
    want: list[int] = []
    pos = 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        end = len(data) if end < 0 else end
        if run.search(data, pos, end):
            want += [pos, end]
        pos = end + 1
    assert got == want
    with pytest.raises(ValueError, match="follow"):
        _scan.line_bounds(data, literal, True, runs, -1, b"\x00", 1)


# Pieces of lines that make matches, near misses (a run one short, cut by a newline) and other case likely.
TOKENS = ["ab", "AB", "0x", "0X", "_a", "x_", "00", "3", "c", "b", "_", " ", "\n", "(", "0", "abc", "Ab0"]
# Each starts with a literal and a class run long enough for the native shortcut (`literal_then_class`).
CLASS_REGEXES = [
    r"\bab[0-9]{4,}\b",
    r"ab[0-9a-c]{4,}",
    r"_a\w{4}",
    r"x_[^ _]{4,}?b",
    r"AB[a-c]{4,}x",
    r"\b0x[0-9a-fA-F]{4,}\b",
    r"ab[b_]{4}",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.lists(st.sampled_from(TOKENS), max_size=40).map("".join), min_size=1, max_size=5),
    st.sampled_from(CLASS_REGEXES),
    st.booleans(),
)
def test_regexes_found_by_their_literal_and_class_run_equal_a_line_by_line_match(
    docs: list[str], value: str, case_sensitive: bool
) -> None:
    assert literal_then_class(value, case_sensitive) is not None
    with tempfile.TemporaryDirectory() as tmp:
        shard = _shard(tmp, docs, 16)
        q = Query(expr=Pattern(value, value, True, 0), case_sensitive=case_sensitive)
        found = search_shard(shard, q, branch="main", limit=None, deadline=time.monotonic() + 30)
        got = {(h.doc, line - int(shard.line_base[h.doc]) + 1) for h in found.hits for line in h.lines}
    flags = re.ASCII | (0 if case_sensitive else re.IGNORECASE)
    regex = re.compile(value.encode(), flags)
    want = {
        (doc, number)
        for doc, text in enumerate(docs)
        for number, line in enumerate(text.encode().split(b"\n"), start=1)
        if regex.search(line)
    }
    assert got == want


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=120).map(lambda b: bytes(b"ab\n\xc3\xa9\xff "[x % 7] for x in b)), st.data())
def test_line_texts_equal_the_decoded_slices(data: bytes, draw: st.DataObject) -> None:
    data += b"\n"  # units end with a newline: every offset's line has one
    offsets = draw.draw(st.lists(st.integers(min_value=0, max_value=len(data) - 1), max_size=8))
    want = [data[data.rfind(b"\n", 0, at) + 1 : data.find(b"\n", at)].decode("utf-8", "replace") for at in offsets]
    assert _scan.line_texts(data, offsets) == want
    with pytest.raises(ValueError, match="outside the content"):
        _scan.line_texts(data, [len(data) + 1])
