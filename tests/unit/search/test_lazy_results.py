"""Exhaustive answers read only what is looked at: lazy line matches, the definition prefilter, GC pauses."""

from __future__ import annotations

import gc
import pickle
import threading
import time
from pathlib import Path

import pytest

from codewell.search.index.builder import SourceDoc, build_shard, skip_reason
from codewell.search.index.shard import Shard
from codewell.search.query.parser import Pattern, parse_query
from codewell.search.ranking import DEFINITIONS, _any_form, definition_spans, rank
from codewell.search.render import render_results
from codewell.search.results import FileMatch, LineMatch, SearchResults
from codewell.search.searcher import file_matches, gc_paused, search_shard
from codewell.search.verify import match_ranges

SOURCE = Path(__file__).resolve().parents[3] / "src" / "codewell"


def shard_of(tmp_path: Path, files: dict[str, bytes]) -> Shard:
    docs = [SourceDoc(p, d, len(d), frozenset({"main"}), skip_reason(d, len(d))) for p, d in files.items()]
    return Shard.open(build_shard(tmp_path / "s", {"repo": "r"}, docs))


def matches_of(shard: Shard, query: str) -> list[FileMatch]:
    q = parse_query(query)
    found = search_shard(shard, q, branch="main", limit=None, deadline=time.monotonic() + 10)
    return file_matches(shard, found, q, origin=lambda doc: ("r", "0" * 40))


def expected_lines(data: bytes, needle: bytes) -> list[tuple[int, str, list[tuple[int, int]]]]:
    """Line number, text and every case-insensitive match range of `needle`, straight from the bytes."""
    out = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        lowered, ranges, at = raw.lower(), [], raw.lower().find(needle)
        while at >= 0:
            ranges.append((at, at + len(needle)))
            at = lowered.find(needle, at + len(needle))
        if ranges:
            out.append((number, raw.decode(), ranges))
    return out


def test_lazy_lines_read_on_demand_equal_the_content(tmp_path: Path) -> None:
    files = {
        "a.c": b"int lock;\n\tmutex_lock(&a); MUTEX_LOCK(&b);\nnothing\nvoid mutex_lock(struct m *x)\n",
        "b.c": b"x\n" * 500 + b"mutex_lock_nested(a, mutex_lock)\n",
        "c.txt": b"no match here\n",
    }
    shard = shard_of(tmp_path, files)
    found = matches_of(shard, "mutex_lock count:all")
    assert [f.path for f in found] == ["a.c", "b.c"]
    for f in found:
        want = expected_lines(files[f.path], b"mutex_lock")
        # Counts, numbers and texts are answered without reading ranges; then the whole list agrees.
        assert f.line_count == len(want)
        assert [f.line_number(i) for i in range(f.line_count)] == [n for n, _t, _r in want]
        assert f.line_texts() == [t for _n, t, _r in want]
        assert f.line_match(f.line_count - 1) == LineMatch(*want[-1])
        assert f.line_matches == [LineMatch(*w) for w in want]
        assert f.line_count == len(want)


def test_first_range_is_the_first_range_of_an_ascii_line_and_absent_otherwise(tmp_path: Path) -> None:
    data = "x mutex_lock(a) mutex_lock(b)\n\tmutex_lockdep();\n// é mutex_lock\n".encode()
    shard = shard_of(tmp_path, {"a.c": data})
    (literal,) = matches_of(shard, "mutex_lock")
    for i in (0, 1):
        m = literal.line_match(i)
        assert literal.first_range(i) == (m.line.encode(), *m.ranges[0])
    assert literal.first_range(2) is None  # not ASCII: ranking reads the whole LineMatch
    (regex,) = matches_of(shard, "/mutex_l.ck/")
    assert regex.first_range(0) is None
    eager = FileMatch("r", "a.c", "0" * 40, "C", literal.line_matches)
    assert eager.first_range(0) is None


def test_lazy_file_match_compares_pickles_and_sorts_like_a_list_backed_one(tmp_path: Path) -> None:
    data = b"foo = 1\nbar(foo)\n"
    shard = shard_of(tmp_path, {"m.py": data})
    (lazy,) = matches_of(shard, "foo")
    eager = FileMatch("r", "m.py", "0" * 40, "Python", [LineMatch(*w) for w in expected_lines(data, b"foo")])
    assert lazy == eager
    assert pickle.loads(pickle.dumps(lazy)) == eager
    (lazy,) = matches_of(shard, "foo")
    rank([lazy], ["foo"])
    rank([eager], ["foo"])
    assert lazy.score == eager.score


def test_match_ranges_continue_from_the_first_match(tmp_path: Path) -> None:
    shard = shard_of(tmp_path, {"a.txt": b"head\nab AB xab\n"})
    first = shard.content.find(b"AB")
    pattern = parse_query("ab").expr
    assert isinstance(pattern, Pattern)
    start, end, ranges = match_ranges(shard.content, pattern, False, first)
    assert (start, end) == (5, 14)
    assert ranges == [(3, 5), (7, 9)]  # the match before `first` is not searched again


def test_a_count_page_reads_the_lines_of_the_files_it_shows_only(tmp_path: Path) -> None:
    files = {f"d/f{i:04}.c": b"\tcall(needle);\n" * 30 for i in range(300)}
    shard = shard_of(tmp_path, files)
    found = matches_of(shard, "needle count:all")
    rank(found, ["needle"])
    results = SearchResults(found, sum(f.line_count for f in found), False, False, [], count_given=True)
    rendered = render_results(results, "needle count:all")
    assert rendered.cursor is not None
    assert "of 9000" in rendered.text
    # The page shows a few files; the others still hold their lines unread (FileMatch._lines is None).
    unread = [f for f in found if f._lines is None]
    assert len(unread) >= len(found) - rendered.files_shown - 1
    assert len(unread) > 250


def source_lines() -> list[str]:
    lines = []
    for path in sorted(SOURCE.rglob("*.py"))[:40]:
        lines.extend(path.read_text().splitlines())
    return lines


@pytest.mark.parametrize("language", sorted(DEFINITIONS))
def test_definition_prefilter_matches_exactly_when_some_form_does(language: str) -> None:
    samples = [
        *source_lines(),
        "static int foo(void)",
        "int\tbar[4];",
        "struct baz {",
        "#define QUX 1",
        "typedef struct { int a; } t_t;",
        "} name_t;",
        "def f(x):",
        "class A:",
        "func (r *T) Do() {",
        "pub fn run() {",
        "public static void main(String[] args) {",
        "fun go() {",
        "export function f() {",
        "  method() {",
        "sub x {",
        "config FOO",
        "\tmutex_lock(&m);",
        "élan = 1",
        "\x1c int x;",
    ]
    any_form = _any_form(language)
    assert any_form is not None
    for line in samples:
        assert (any_form.match(line) is not None) == bool(definition_spans(language, line)), line


def test_gc_is_paused_during_searches_and_restored_after_the_last() -> None:
    assert gc.isenabled()
    inside = threading.Event()
    leave = threading.Event()

    def search() -> None:
        with gc_paused():
            inside.set()
            leave.wait(5)

    other = threading.Thread(target=search)
    other.start()
    inside.wait(5)
    with gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other search still runs
    leave.set()
    other.join(5)
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # switched off by someone else before: stays off
    finally:
        gc.enable()


def test_gc_is_restored_when_the_search_fails() -> None:
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


@pytest.mark.parametrize("query", ["foo", "FOO case:yes", "foo bar", "/fo+/", "foo OR bar"])
def test_ranking_lazy_files_equals_ranking_their_read_lines(tmp_path: Path, query: str) -> None:
    files = {
        "a.c": b"\tfoo_bar(x);\n\tx = foofoo;\n",
        "b.c": b"int foo(int x)\n{\n\treturn foo_x;\n}\n",
        "c.py": b"# caf\xc3\xa9 foo\nfoobar = 1\n",
        "d.c": b"\tfoo_x(); foo(y);\n",
        "e.md": b"the foo bar example, FOO\n",
        "f.c": b"\tbad \xff foo;\n\tFOO(1)\n",
        "g.go": b"func foo() {\n\tbar()\n}\n",
    }
    shard = shard_of(tmp_path, files)
    q = parse_query(query)
    terms = [p.text for p in q.patterns() if not p.regex]
    lazy = matches_of(shard, query)
    eager = [
        FileMatch(f.repo, f.path, f.commit, f.language, list(f.line_matches), f.path_match)
        for f in matches_of(shard, query)
    ]
    rank(lazy, terms, case_sensitive=q.case_sensitive)
    rank(eager, terms, case_sensitive=q.case_sensitive)
    assert [(f.path, f.score) for f in lazy] == [(f.path, f.score) for f in eager]
    assert len(lazy) >= 2
