"""The web tier's merge of searcher replicas' answers (search/cluster.py) and what travels between them
(search/wire.py): one process's order, nothing counted twice while a repository moves, partial coverage."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from codewell.cli import searcher as searcher_cli
from codewell.core.actors import ANONYMOUS, INTERNAL, Actor
from codewell.jobs.placement import ranked
from codewell.search.cluster import INTERNAL_PREFIX, coverage, internal_token, merge_files, preferred_holders
from codewell.search.results import FileMatch, LineMatch, SearchResults
from codewell.search.wire import (
    FRAMED_MEDIA_TYPE,
    decode_actor,
    decode_answer,
    decode_ids,
    decode_results,
    encode_actor,
    encode_ids,
    encode_results,
    frame_results,
)


def _file(
    repo: str, path: str, lines: int, order: tuple[object, ...], labels: dict[int, str] | None = None
) -> FileMatch:
    f = FileMatch(
        repo, path, "c" * 40, "Go", [LineMatch(n + 1, f"line {n}", [(0, 4)]) for n in range(lines)], labels=labels
    )
    f.order = order
    return f


def _answer(
    name: str, files: list[tuple[FileMatch, int]], *, limit_hit: bool = False
) -> tuple[str, SearchResults, list[int]]:
    results = SearchResults([f for f, _ in files], sum(f.line_count for f, _ in files), limit_hit, False, [])
    return name, results, [rid for _, rid in files]


def test_answers_merge_in_ranking_order_with_ties_by_repository_name() -> None:
    a = _answer(
        "s1",
        [
            (_file("org/b", "x.go", 2, (False, True, 2, True, 1.0)), 2),
            (_file("org/d", "y.go", 1, (False, False, 1, True, 0.5)), 4),
        ],
    )
    b = _answer(
        "s2",
        [
            (_file("org/a", "z.go", 1, (False, False, 1, True, 0.5)), 1),
            (_file("org/c", "w.go", 3, (True, False, 0, False, 0.0)), 3),
        ],
    )
    files, count, cut = merge_files([a, b], {}, None, 1000)
    assert [f.repo for f in files] == ["org/c", "org/b", "org/a", "org/d"]  # path match, definition, then ties by name
    assert (count, cut) == (7, False)


def test_a_page_is_filled_in_repository_name_order_then_ranked() -> None:
    a = _answer(
        "s1",
        [
            (_file("org/a", "1", 3, (False, False, 0, False, 0.1)), 1),
            (_file("org/c", "3", 3, (False, True, 2, True, 9.0)), 3),
        ],
    )
    b = _answer("s2", [(_file("org/b", "2", 3, (False, False, 2, True, 5.0)), 2)])
    files, count, cut = merge_files([a, b], {}, 5, 5)
    assert [f.repo for f in files] == ["org/b", "org/a"]  # org/c comes after the page is full, as one process
    assert (count, cut) == (6, True)


def test_symbol_definitions_come_first_by_closeness() -> None:
    text = _file("org/a", "t.go", 1, (False, False, 2, True, 1.0))
    far = _file("org/a", "s.go", 1, (2, 1, 4, "s.go"), labels={1: "func FooBar"})
    near = _file("org/z", "s.go", 1, (0, 1, 4, "s.go"), labels={1: "func Foo"})
    files, _, _ = merge_files([_answer("s1", [(text, 1), (far, 1)]), _answer("s2", [(near, 26)])], {}, None, 1000)
    assert [(f.repo, f.path) for f in files] == [("org/z", "s.go"), ("org/a", "s.go"), ("org/a", "t.go")]


def test_a_repository_held_twice_counts_once_from_its_preferred_holder() -> None:
    held = {"s1": np.array([1, 2, 7]), "s2": np.array([3, 7]), "s3": np.array([4])}
    preferred = preferred_holders(held)
    assert preferred == {7: ranked("repo:7", ["s1", "s2"])[0]}
    other = "s2" if preferred[7] == "s1" else "s1"
    one = _answer(preferred[7], [(_file("org/g", "a", 2, (False, False, 0, False, 0.0)), 7)])
    two = _answer(
        other,
        [
            (_file("org/g", "a", 2, (False, False, 0, False, 0.0)), 7),
            (_file("org/h", "b", 1, (False, False, 0, False, 0.0)), 8),
        ],
    )
    files, count, _ = merge_files([one, two], preferred, None, 1000)
    assert [(f.repo, f.path) for f in files] == [("org/g", "a"), ("org/h", "b")]
    assert count == 3
    assert preferred_holders({"s1": np.array([1])}) == {}


def test_coverage_is_the_readable_repositories_no_replica_answered_for() -> None:
    readable = np.array([1, 2, 3, 4, 5, 9])
    assert coverage(readable, {"s1": np.array([1, 2]), "s2": np.array([4, 5, 6])}).tolist() == [3, 9]
    assert coverage(readable, {}).tolist() == [1, 2, 3, 4, 5, 9]


def test_what_travels_round_trips() -> None:
    ids = [1, 5, 64, 9999]
    assert decode_ids(encode_ids(ids)).tolist() == ids
    assert decode_ids(encode_ids([])).tolist() == []
    assert len(encode_ids(range(10_000))) < 2000
    user = Actor.user(7, "ada", scopes=frozenset({"user:all"}), via="access_token", client="claude")
    assert decode_actor(encode_actor(user)) == user
    assert decode_actor(encode_actor(ANONYMOUS)) == ANONYMOUS
    assert decode_actor(encode_actor(INTERNAL)) is INTERNAL  # `codewell search`, the service's own work
    f = _file("org/a", "x.go", 2, (False, True, 2, True, 3.5), labels={2: "func X"})
    results = SearchResults([f], 2, True, False, [], count_given=True)
    decoded, repo_ids, held = decode_results(encode_results(results, {"org/a": 3}, [3, 4]))
    assert decoded.files == [f]
    assert decoded.files[0].order == f.order
    assert (decoded.match_count, decoded.limit_hit, decoded.count_given) == (2, True, True)
    assert (repo_ids, held.tolist()) == ([3], [3, 4])


def test_a_framed_answer_carries_the_rest_lines_as_they_go_out() -> None:
    quoted = FileMatch("org/b", "q.go", "c" * 40, "Go", [LineMatch(3, 'say("hi\\n") \u00e9\n', [(0, 3), (5, 7)])])
    quoted.order = (1,)
    f = _file("org/a", "x.go", 3, (False, True, 2, True, 3.5), labels={2: "func X"})
    results = SearchResults([f, quoted], 4, True, False, [], count_given=False)
    plain = SearchResults([_file("org/a", "x.go", 3, f.order, {2: "func X"}), quoted], 4, True, False, [])
    body = frame_results(results, {"org/a": 3, "org/b": 8}, [3, 8])
    assert body.count(b"\n") == 1, "only the head's end: orjson escapes newlines inside strings"
    decoded, repo_ids, held = decode_results(decode_answer(FRAMED_MEDIA_TYPE, body))
    assert (repo_ids, held.tolist(), decoded.match_count, decoded.limit_hit) == ([3, 8], [3, 8], 4, True)
    assert [g.line_count for g in decoded.files] == [3, 1]  # counted without reading the lines
    assert decoded.files[0].order == f.order
    # The REST answer holds the replica's bytes, and reads exactly as the same results encoded on the web tier.
    rest = orjson.dumps(decoded.to_json(fragments=True))
    assert orjson.loads(rest) == orjson.loads(orjson.dumps(plain.to_json()))
    assert decoded.files == plain.files  # reading the lines decodes them, once
    # A plain answer (a replica before frames) still reads.
    old = orjson.dumps(encode_results(results, {"org/a": 3, "org/b": 8}, [3, 8]))
    assert decode_results(decode_answer("application/json", old))[0].files == plain.files


def _frame_head(end: int, **changes: object) -> bytes:
    columns: dict[str, object] = {
        "repo": ["r"], "repo_id": [1], "path": ["p"], "commit": ["c"], "language": ["Go"], "path_match": [False],
        "score": [0.0], "order": [[1]], "lines": [0], "end": [end],
    }  # fmt: skip
    head = {"match_count": 0, "limit_hit": False, "timed_out": False, "held": "", "files": columns, "labels": {}}
    for key, value in changes.items():
        (columns if key in columns else head)[key] = value
    return orjson.dumps(head) + b"\n"


_FILE = b'{"lineMatches":[]}'


@pytest.mark.parametrize(
    "body",
    [
        b'{"files": []}',
        _frame_head(99) + _FILE,
        _frame_head(len(_FILE)) + b"[" + _FILE[1:-1] + b"]",
        _frame_head(len(_FILE)) + _FILE + b"{}",
        _frame_head(len(_FILE), repo_id=[1, 2]) + _FILE,
        _frame_head(len(_FILE), path=[]) + _FILE,
        _frame_head(len(_FILE), labels={"1": {"2": "func F"}}) + _FILE,
        _frame_head(3) + b"[1]",
        b"[1]\n",
    ],
    ids=[
        "no-head-end",
        "file-outside",
        "file-not-an-object",
        "bytes-past-the-last-file",
        "ids-differ",
        "columns-differ",
        "labels-of-no-file",
        "file-not-an-object-at-all",
        "head-not-object",
    ],
)
def test_a_broken_frame_is_refused(body: bytes) -> None:
    with pytest.raises((ValueError, KeyError)):
        decode_results(decode_answer(FRAMED_MEDIA_TYPE, body))


def test_a_well_formed_frame_of_those_reads() -> None:
    # The broken frames above differ from this one in one thing each: what they break is what fails them.
    results, repo_ids, _ = decode_results(decode_answer(FRAMED_MEDIA_TYPE, _frame_head(len(_FILE)) + _FILE))
    assert (repo_ids, [f.path for f in results.files], results.files[0].line_count) == ([1], ["p"], 0)
    assert orjson.dumps(results.to_json(fragments=True)["files"]) == b"[" + _FILE + b"]"


def test_the_internal_credential_depends_on_the_instance_secret() -> None:
    assert internal_token(b"a" * 32) == internal_token(b"a" * 32)
    assert internal_token(b"a" * 32) != internal_token(b"b" * 32)
    assert len(internal_token(b"a" * 32)) == 64


def test_definitions_are_cut_to_the_limit_over_all_replicas() -> None:
    defs = [_file(f"org/{c}", "s.go", 1, (0, 1, 4, "s.go"), labels={1: "func F"}) for c in "abcd"]
    a = _answer("s1", [(defs[0], 1), (defs[2], 3)])
    b = _answer("s2", [(defs[1], 2), (defs[3], 4)])
    files, count, cut = merge_files([a, b], {}, 3, 3)
    assert [f.repo for f in files] == ["org/a", "org/b", "org/c"]
    assert (count, cut) == (3, True)


def test_the_command_line_asks_replicas_where_the_replicas_answer() -> None:
    # `codewell searcher` keeps its own copy of the prefix so that its --help imports no service.
    assert searcher_cli.INTERNAL_PREFIX == INTERNAL_PREFIX
