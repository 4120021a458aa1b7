"""The index build's native kernels (search/_build.c) write the shard the numpy path writes (issue #30).

The numpy and pyroaring path is what runs without a C compiler; both must agree on every table, every trigram
and every posting list, on random documents cut into tiny units and pages so that every boundary is crossed.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyroaring import BitMap
from tests.gitfixtures import PNG_BYTES, make_bare, make_repo

from codewell.search import _scan, indexer
from codewell.search.index import builder, native
from codewell.search.index.builder import MAX_FILE_SIZE, SourceDoc, build_shard
from codewell.search.index.shard import Shard
from codewell.search.indexer import branch_commits

TABLES = ["starts", "line_base", "nl_low", "nl_pages", "doc_page0", "unit_starts", "doc_unit0"]
TRIGRAM_TABLES = ["tri_keys", "tri_raw", "tri_counts"]


def trigram(value: bytes) -> int:
    return (value[0] << 16) | (value[1] << 8) | value[2]


@pytest.fixture
def kernels() -> Iterator[object]:
    assert native._build is not None, "the build kernels must be built for these tests (pip install -e .)"
    saved = native.ENABLED
    yield native._build
    native.ENABLED = saved


def build_both(tmp: Path, docs: list[SourceDoc], unit_bytes: int, page_shift: int) -> tuple[Shard, Shard]:
    shards = []
    for enabled in (True, False):
        native.ENABLED = enabled
        target = tmp / ("native" if enabled else "numpy")
        shards.append(
            Shard.open(build_shard(target, {"repo": "r"}, docs, unit_bytes=unit_bytes, page_shift=page_shift))
        )
    return shards[0], shards[1]


def assert_same_index(ours: Shard, theirs: Shard) -> None:
    for name in TABLES + TRIGRAM_TABLES:
        assert np.array_equal(getattr(ours, name), getattr(theirs, name)), name
    assert ours.content[:] == theirs.content[:]
    for i in range(len(ours.tri_keys)):
        assert ours._posting_at(i) == theirs._posting_at(i), int(ours.tri_keys[i])


# Few distinct letters (both cases) and many newlines: trigrams repeat within units and units end often.
texts = st.lists(st.binary(min_size=0, max_size=400).map(lambda b: bytes(b"aAbB\n c"[x % 7] for x in b)), max_size=30)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(texts, st.sampled_from([1, 7, 64, 12 << 10]), st.sampled_from([1, 4, 16]))
def test_native_and_numpy_builds_write_the_same_shard(
    kernels: object, tmp_path_factory: pytest.TempPathFactory, contents: list[bytes], unit_bytes: int, page_shift: int
) -> None:
    docs = [SourceDoc(f"f{i}.c", data, len(data), frozenset({"main"})) for i, data in enumerate(contents)]
    ours, theirs = build_both(tmp_path_factory.mktemp("b"), docs, unit_bytes, page_shift)
    assert_same_index(ours, theirs)


def test_posting_lists_of_every_container_kind_match_pyroaring(kernels: object, tmp_path: Path) -> None:
    """Common trigrams over >65536 units: roaring containers of runs, arrays and bitmaps, with several keys."""
    rng = random.Random(5)
    docs = [SourceDoc("runs.c", b"abc\n" * 70000, 280000, frozenset({"main"}))]
    # Every third unit of a second file holds "xyz" (dense arrays and bitmaps), a few hold "qqq" (sparse arrays).
    lines = [b"xyz\n" if i % 3 == 0 else (b"qqq\n" if rng.random() < 0.001 else b"k\n") for i in range(140000)]
    data = b"".join(lines)
    docs.append(SourceDoc("mixed.c", data, len(data), frozenset({"main"})))
    ours, theirs = build_both(tmp_path, docs, unit_bytes=1, page_shift=16)
    assert ours.unit_count > 200000
    assert_same_index(ours, theirs)
    for literal in (b"abc", b"xyz", b"qqq"):
        expected = theirs._literal_units(literal, None)
        assert len(expected) > 10
        assert ours._literal_units(literal, None) == expected
        # The query side's in-place reader (search/_scan.c) reads the native serialization too.
        i = int(np.searchsorted(ours.tri_keys, trigram(literal)))
        offsets, raw = ours._posting_views
        sample = sorted(rng.sample(range(ours.unit_count), 3000))
        kept = _scan.posting_keep(ours.postings, offsets[i], offsets[i + 1], raw[i], sample)
        assert kept == [u for u in sample if u in expected]


def test_a_pooled_build_in_many_chunks_equals_the_inline_build(
    kernels: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(3)
    docs = []
    for i in range(300):
        data = bytes(rng.choice(b"abcdefgh \n") for _ in range(rng.choice([10, 3000, 20000])))
        docs.append(SourceDoc(f"f{i}.c", data, len(data), frozenset({"main"})))
    monkeypatch.setattr(builder, "_CHUNK_BYTES", 100_000)
    monkeypatch.setattr(builder, "_CHUNK_UNITS", 50)  # and pieces of 50 units: many unit ids in file names
    pooled = Shard.open(build_shard(tmp_path / "pooled", {"repo": "r"}, docs, workers=2, unit_bytes=512))
    inline = Shard.open(build_shard(tmp_path / "inline", {"repo": "r"}, docs, workers=1, unit_bytes=512))
    for name in TABLES + TRIGRAM_TABLES + ["tri_offs"]:
        assert np.array_equal(getattr(pooled, name), getattr(inline, name)), name
    assert (pooled.path / "postings.bin").read_bytes() == (inline.path / "postings.bin").read_bytes()


def test_unit_trigrams_folds_ascii_case_and_drops_repeats_within_a_unit(kernels: object) -> None:
    content = b"AbCabc\nxyzXYZ"
    starts = np.asarray([0, 7, 13], dtype=np.int64)
    keys, bounds = native._build.unit_trigrams(content, starts)  # type: ignore[union-attr]
    edges = np.frombuffer(bounds, dtype=np.int64).tolist()
    found = set()
    for part in range(256):
        for key in np.frombuffer(keys, dtype=np.uint32)[edges[part] : edges[part + 1]].tolist():
            found.add(((part << 16) | (key >> 16), key & 0xFFFF))
    unit0 = {b"abc", b"bca", b"cab", b"bc\n"}
    unit1 = {b"xyz", b"yzx", b"zxy"}
    assert found == {(trigram(t), 0) for t in unit0} | {(trigram(t), 1) for t in unit1}
    assert len(keys) == 4 * len(found)  # each (trigram, unit) once
    assert edges[-1] == len(found)


def test_the_kernels_refuse_input_they_would_read_past(kernels: object) -> None:
    build = native._build
    assert build is not None
    with pytest.raises(ValueError, match="not inside the content"):
        build.unit_trigrams(b"abc", np.asarray([0, 10], dtype=np.int64))
    with pytest.raises(ValueError, match="at most 65536 units"):
        build.unit_trigrams(b"a" * 70000, np.arange(70001, dtype=np.int64))
    with pytest.raises(ValueError, match="one per part"):
        build.merge_partition([np.zeros(1, dtype=np.uint32)], [], 0x61)
    assert build.merge_partition([np.zeros(0, dtype=np.uint32)], [0], 0x61) == (b"", b"", b"", b"")
    descending = np.asarray([(0x6263 << 16) | 5, (0x6263 << 16) | 4], dtype=np.uint32)
    with pytest.raises(ValueError, match="not ascending"):
        build.merge_partition([descending], [0], 0x61)


def test_merge_partition_serializes_what_pyroaring_deserializes(kernels: object) -> None:
    build = native._build
    assert build is not None
    lists = {
        0x616100: list(range(3)),  # raw
        0x616101: list(range(0, 300000, 2)),  # bitmaps, 5 containers
        0x616102: list(range(70000, 140000)),  # runs
        0x616103: [1, 5, 70000, 70001, 200000, 200005, 300000, 400000, 500000],  # arrays, offsets header
    }
    # Chunks of 65536 units, as unit_trigrams writes them: (trigram & 0xFFFF) << 16 | unit - the chunk's first.
    parts, firsts = [], []
    for first in range(0, 600000, 1 << 16):
        chunk = [
            ((t & 0xFFFF) << 16) | (u - first) for t, units in lists.items() for u in units if 0 <= u - first < 1 << 16
        ]
        parts.append(np.asarray(chunk, dtype=np.uint32))
        firsts.append(first)
    postings, tris, counts, sizes = build.merge_partition(parts, firsts, 0x61)
    assert np.frombuffer(tris, dtype=np.uint32).tolist() == sorted(lists)
    assert np.frombuffer(counts, dtype=np.uint32).tolist() == [len(lists[t]) for t in sorted(lists)]
    at = 0
    for t, size in zip(sorted(lists), np.frombuffer(sizes, dtype=np.uint64).tolist(), strict=True):
        stored = postings[at : at + size]
        at += size
        if len(lists[t]) <= 8:
            assert np.frombuffer(stored, dtype=np.uint32).tolist() == lists[t]
        else:
            assert BitMap.deserialize(stored) == BitMap(lists[t])
            assert len(stored) <= len(BitMap(lists[t]).serialize())  # as small as pyroaring's optimized form
    assert at == len(postings)


def test_blobs_read_through_git_cat_file_equal_libgit2s(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Big repositories are read through `git cat-file --batch`: the same documents, in the same order."""
    files: dict[str, str | bytes] = {f"src/f{i}.c": f"int f{i};\n" * i for i in range(40)}
    files |= {"logo.png": PNG_BYTES, "huge.txt": "x" * (MAX_FILE_SIZE + 10), "empty.txt": ""}
    repo = make_repo(tmp_path / "work", files, branches={"dev": {"src/f3.c": "changed\n", "new.c": "new\n"}})
    mirror = make_bare(tmp_path / "mirror.git", repo)
    commits = branch_commits(mirror, "main", ("dev",))

    def documents() -> list[tuple[str, bytes | None, int, frozenset[str], str]]:
        return [(d.path, d.data, d.size, d.branches, d.skipped) for d in indexer.commit_docs(mirror, commits)]

    monkeypatch.setattr(indexer, "CAT_FILE_MIN_BLOBS", 10**9)
    through_libgit2 = documents()
    monkeypatch.setattr(indexer, "CAT_FILE_MIN_BLOBS", 0)
    assert documents() == through_libgit2
    assert len(through_libgit2) == 45  # 43 on main, the changed f3.c and new.c on dev
    skipped = {path: reason for path, _, _, _, reason in through_libgit2 if reason}
    assert skipped == {"logo.png": "binary", "huge.txt": "too large"}
    # A closed reader stops its git process (the build failed or was cancelled half-way).
    reader = indexer.commit_docs(mirror, commits)
    next(reader)
    reader.close()
