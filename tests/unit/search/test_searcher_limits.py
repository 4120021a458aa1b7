"""Hostile input never hangs the searcher: RE2 stays linear and deadlines give partial, marked results."""

from __future__ import annotations

import time
from pathlib import Path

from codewell.search.index.builder import SourceDoc, build_shard, skip_reason
from codewell.search.index.shard import Shard
from codewell.search.query.parser import parse_query
from codewell.search.searcher import search_shard


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
