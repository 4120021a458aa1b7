"""Hostile input never hangs the searcher: RE2 stays linear and deadlines give partial, marked results."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from codewell.search.index import builder
from codewell.search.index.builder import SourceDoc, build_shard, skip_reason
from codewell.search.index.shard import Shard
from codewell.search.query.parser import MAX_TERMS, parse_query
from codewell.search.searcher import search_shard
from codewell.search.selection import select_docs


def shard_of(tmp_path: Path, files: dict[str, bytes]) -> Shard:
    docs = [SourceDoc(p, d, len(d), frozenset({"main"}), skip_reason(d, len(d))) for p, d in files.items()]
    return Shard.open(build_shard(tmp_path / "s", {"repo": "r"}, docs))


def test_catastrophic_backtracking_pattern_is_linear(tmp_path: Path) -> None:
    shard = shard_of(tmp_path, {"a.txt": b"a" * 200_000 + b"b\n", "b.txt": b"aaaa\n"})
    started = time.monotonic()
    result = search_shard(shard, parse_query("/(a+)+$/"), branch="main", limit=None, deadline=started + 10)
    assert time.monotonic() - started < 2
    assert [shard.paths[h.doc] for h in result.hits] == ["b.txt"]


def test_expired_deadline_returns_partial_marked_result(tmp_path: Path) -> None:
    shard = shard_of(tmp_path, {f"f{i}.txt": b"needle\n" * 10 for i in range(50)})
    result = search_shard(shard, parse_query("needle"), branch="main", limit=None, deadline=time.monotonic() - 1)
    assert result.timed_out
    assert result.hits == []


def test_binary_and_large_files_are_path_only(tmp_path: Path) -> None:
    big = b"needle\n" * 200_000  # > 1 MB
    shard = shard_of(tmp_path, {"needle.bin": b"needle\x00", "big.txt": big, "ok.txt": b"needle\n"})
    content = search_shard(shard, parse_query("needle"), branch="main", limit=None, deadline=time.monotonic() + 5)
    assert [shard.paths[h.doc] for h in content.hits] == ["ok.txt"]
    paths = search_shard(
        shard, parse_query("type:path needle"), branch="main", limit=None, deadline=time.monotonic() + 5
    )
    assert [shard.paths[h.doc] for h in paths.hits] == ["needle.bin"]
    assert shard.skipped == ["binary", "too large", ""]


def test_branch_membership_shares_blobs(tmp_path: Path) -> None:
    docs = [
        SourceDoc("a.txt", b"shared\n", 7, frozenset({"main", "dev"})),
        SourceDoc("b.txt", b"only dev\n", 9, frozenset({"dev"})),
    ]
    shard = Shard.open(build_shard(tmp_path / "s", {"repo": "r"}, docs))
    for branch, expected in (("main", []), ("dev", ["b.txt"])):
        found = search_shard(shard, parse_query("only"), branch=branch, limit=None, deadline=time.monotonic() + 5)
        assert [shard.paths[h.doc] for h in found.hits] == expected
    assert shard.doc_count == 2


def test_pipelined_parallel_build_equals_inline_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks handed to worker processes while reading, and partitions merged there, give the same shard."""
    docs = [
        SourceDoc(
            f"d{i:03}.c", f"int Needle{i};\nreturn {i * 7919 % 1000};\n".encode() * (i % 5 + 1), 0, frozenset({"main"})
        )
        for i in range(400)
    ]
    inline = build_shard(tmp_path / "inline", {"repo": "r"}, docs, workers=1)
    monkeypatch.setattr(builder, "_CHUNK_BYTES", 1000)
    monkeypatch.setattr(builder, "_MERGE_GROUP", 5)
    pooled = build_shard(tmp_path / "pooled", {"repo": "r"}, docs, workers=2)
    names = sorted(p.name for p in inline.iterdir())
    assert names == sorted(p.name for p in pooled.iterdir())
    assert "postings.bin" in names
    for name in names:
        assert (inline / name).read_bytes() == (pooled / name).read_bytes(), name
    shard = Shard.open(pooled)
    found = search_shard(shard, parse_query("needle399;"), branch="main", limit=None, deadline=time.monotonic() + 5)
    assert [shard.paths[h.doc] for h in found.hits] == ["d399.c"]


def test_many_terms_stop_planning_and_verification_at_the_deadline(tmp_path: Path) -> None:
    """#22: a query of many terms looked up and verified every term whatever the deadline (5 s for 1 s)."""
    shard = shard_of(tmp_path, {f"f{i}.c": "".join(f"term{k} " for k in range(i, i + 50)).encode() for i in range(60)})
    q = parse_query(" OR ".join(f"term{k}" for k in range(MAX_TERMS)))
    expired = time.monotonic() - 1
    selection = select_docs(shard, q, "main", deadline=expired)
    started = time.monotonic()
    result = search_shard(shard, q, branch="main", limit=None, deadline=expired, selected=selection)
    assert time.monotonic() - started < 0.5
    assert result.timed_out
    assert result.hits == []
    # Planning stopped at the first term instead of looking up all of them.
    assert len(selection.candidates._units) == 0
    # With time left, the same query answers in full.
    full = search_shard(shard, q, branch="main", limit=None, deadline=time.monotonic() + 30)
    assert not full.timed_out
    assert len(full.hits) == 60


def test_a_deadline_during_verification_marks_the_result(tmp_path: Path) -> None:
    """The deadline is checked between the terms of a tree, not only between batches of documents."""
    shard = shard_of(tmp_path, {"a.c": b"".join(b"alpha%d beta%d\n" % (k, k) for k in range(20_000))})
    q = parse_query(" ".join(f"/alpha{k}\\b/" for k in range(MAX_TERMS)))
    started = time.monotonic()
    full = search_shard(shard, q, branch="main", limit=None, deadline=started + 60)
    full_elapsed = time.monotonic() - started  # ~0.2 s: 100 regexes over the whole file
    assert not full.timed_out
    assert len(full.hits) == 1
    started = time.monotonic()
    result = search_shard(shard, q, branch="main", limit=None, deadline=started + full_elapsed / 5)
    elapsed = time.monotonic() - started
    assert result.timed_out
    assert result.hits == []
    assert elapsed < full_elapsed * 0.6  # stopped at the next term, not after all of them
