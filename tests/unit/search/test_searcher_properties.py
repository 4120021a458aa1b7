"""Property tests: the indexed searcher equals a brute-force line-by-line reference on random corpora."""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import contextmanager
from multiprocessing import get_context
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codewell.search import literal_scan, native, parallel, searcher, selection, verify
from codewell.search.index.builder import PAGE_SHIFT, UNIT_BYTES, SourceDoc, build_shard
from codewell.search.index.shard import Shard
from codewell.search.parallel import _share
from codewell.search.query.parser import And, Node, Not, Or, Pattern, Query
from codewell.search.searcher import file_matches, search_shard

ALPHABET = "abcAB_( x\n"
_ANY = {"branch": "main", "limit": None, "deadline": float("inf")}
text = st.text(alphabet=ALPHABET, max_size=120)
corpus = st.lists(text, min_size=1, max_size=6)
literal = st.text(alphabet="abcAB_( x", min_size=1, max_size=5)
# Regexes on which Python's re and RE2 agree (per line, ASCII).
REGEXES = [
    "a+b",
    "^a",
    "b$",
    "^$",
    "[ab]c",
    "a.c",
    "(ab|ba)x",
    "x?_",
    r"\(a",
    "A[^a]B",
    r"\bab\b",
    "c{2,}",
    "b*",
    r"a*b_\(ab",
    r".b_ab",
    r"[ab]+x_ab\b",
    r"\bab",
    r"\b_a|b\b",
    r"\b[ab]+c",
]
regex = st.sampled_from(REGEXES)
# (unit_bytes, page_shift): the production geometry, and tiny units and newline pages so that random
# corpora cross unit and page boundaries (units of a few lines, lines longer than a page).
# The third value chooses the engines: the native kernels (search/_scan.c, with Hyperscan for regexes),
# Hyperscan without them (Python line mapping), or RE2 alone.
ENGINES = ["native", "hyperscan", "re2"]
geometry = st.tuples(
    st.sampled_from([(UNIT_BYTES, PAGE_SHIFT), (8, 2), (16, 3), (32, 4), (1, 1)]), st.sampled_from(ENGINES)
).map(lambda t: (t[0][0], t[0][1], t[1]))
Shape = tuple[int, int, str]


@contextmanager
def verifier(shape: Shape) -> Iterator[None]:
    """Run the searcher with the engines that `shape` chooses.

    With tiny units, the batches are tiny too and nothing takes the direct path: documents then straddle
    batches, which must still report each document once, in order, with all its lines.
    """
    assert literal_scan.available(), "hyperscan must be installed for the search tests"
    assert native._scan is not None, "the native kernels must be built for the search tests (pip install -e .)"
    saved = (native.ENABLED, verify.USE_HYPERSCAN, searcher._FIRST_BATCH_BYTES, selection._DIRECT_UNITS)
    native.ENABLED, verify.USE_HYPERSCAN = shape[2] == "native", shape[2] != "re2"
    if shape[0] < 64:
        searcher._FIRST_BATCH_BYTES, selection._DIRECT_UNITS = shape[0], 0
    try:
        yield
    finally:
        native.ENABLED, verify.USE_HYPERSCAN, searcher._FIRST_BATCH_BYTES, selection._DIRECT_UNITS = saved


def leaf() -> st.SearchStrategy[Node]:
    return st.one_of(
        literal.map(lambda s: Pattern(re.escape(s), s, False, 0)),
        regex.map(lambda r: Pattern(r, r, True, 0)),
    )


tree: st.SearchStrategy[Node] = st.recursive(
    leaf(),
    lambda children: st.one_of(
        st.lists(children, min_size=2, max_size=3).map(lambda c: And(tuple(c))),
        st.lists(children, min_size=2, max_size=3).map(lambda c: Or(tuple(c))),
        st.tuples(leaf(), children).map(lambda c: And((c[0], Not(c[1])))),
    ),
    max_leaves=4,
)


def lines_of(data: str) -> list[str]:
    """Lines as ripgrep sees them: split on \\n, no phantom line after a final newline."""
    if not data:
        return []
    parts = data.split("\n")
    return parts[:-1] if data.endswith("\n") else parts


def reference(node: Node, lines: list[str], flags: int) -> tuple[bool, set[int]]:
    """(does the document match, its reported 1-based lines) by direct evaluation with Python's re."""
    if isinstance(node, Pattern):
        rx = re.compile(node.value, flags)
        found = {i + 1 for i, line in enumerate(lines) if rx.search(line)}
        return bool(found), found
    if isinstance(node, Not):
        ok, _ = reference(node.child, lines, flags)
        return not ok, set()
    results = [reference(c, lines, flags) for c in node.children]
    if isinstance(node, And):
        if all(ok for ok, _ in results):
            return True, set().union(*(found for _, found in results))
        return False, set()
    matched = [found for ok, found in results if ok]
    return bool(matched), set().union(*matched) if matched else set()


def run(
    docs: list[str], node: Node, case_sensitive: bool, shape: Shape = (UNIT_BYTES, PAGE_SHIFT, "native")
) -> tuple[dict[str, set[int]], dict[str, set[int]]]:
    with tempfile.TemporaryDirectory() as tmp:
        sources = [SourceDoc(f"f{i}.txt", d.encode(), len(d), frozenset({"main"})) for i, d in enumerate(docs)]
        shard = Shard.open(
            build_shard(Path(tmp) / "s", {"repo": "r"}, sources, unit_bytes=shape[0], page_shift=shape[1])
        )
        q = Query(expr=node, case_sensitive=case_sensitive)
        with verifier(shape):
            result = search_shard(shard, q, branch="main", limit=None, deadline=time.monotonic() + 30)
        got = {shard.paths[h.doc]: {line - int(shard.line_base[h.doc]) + 1 for line in h.lines} for h in result.hits}
    flags = 0 if case_sensitive else re.IGNORECASE
    want: dict[str, set[int]] = {}
    for i, d in enumerate(docs):
        ok, found = reference(node, lines_of(d), flags)
        if ok and (found or _has_negation_only_match(node)):
            want[f"f{i}.txt"] = found
    return got, want


def _has_negation_only_match(node: Node) -> bool:
    return not isinstance(node, Pattern)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpus, tree, st.booleans(), geometry)
def test_searcher_equals_brute_force(docs: list[str], node: Node, case_sensitive: bool, shape: Shape) -> None:
    got, want = run(docs, node, case_sensitive, shape)
    assert got == want


@settings(max_examples=60, deadline=None)
@given(corpus, geometry)
def test_line_text_and_line_index_round_trip(docs: list[str], shape: Shape) -> None:
    """Every stored line reads back exactly, and every offset in it maps back to it, whatever the page size."""
    with tempfile.TemporaryDirectory() as tmp:
        sources = [SourceDoc(f"f{i}.txt", d.encode(), len(d), frozenset({"main"})) for i, d in enumerate(docs)]
        shard = Shard.open(
            build_shard(Path(tmp) / "s", {"repo": "r"}, sources, unit_bytes=shape[0], page_shift=shape[1])
        )
        for doc, data in enumerate(docs):
            lines = lines_of(data)
            base = int(shard.line_base[doc])
            assert int(shard.line_base[doc + 1]) - base == len(lines)
            for k, line in enumerate(lines):
                assert shard.line_text(doc, base + k) == line.encode()
                start, end = shard.line_span(doc, base + k)
                for offset in range(start, end + 1):
                    assert shard.line_index(doc, offset) == base + k
        # Units tile the content exactly and start at line starts.
        starts = shard.unit_starts.tolist()
        assert starts[-1] == int(shard.starts[-1])
        assert all(s == 0 or shard.content[s - 1 : s] == b"\n" for s in starts[:-1])


@settings(max_examples=30, deadline=None)
@given(corpus, literal, st.integers(min_value=1, max_value=5), geometry)
def test_limit_returns_a_prefix(docs: list[str], needle: str, limit: int, shape: Shape) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        sources = [SourceDoc(f"f{i}.txt", d.encode(), len(d), frozenset({"main"})) for i, d in enumerate(docs)]
        shard = Shard.open(
            build_shard(Path(tmp) / "s", {"repo": "r"}, sources, unit_bytes=shape[0], page_shift=shape[1])
        )
        q = Query(expr=Pattern(re.escape(needle), needle, False, 0))
        with verifier(shape):
            full = search_shard(shard, q, branch="main", limit=None, deadline=time.monotonic() + 30)
            part = search_shard(shard, q, branch="main", limit=limit, deadline=time.monotonic() + 30)
    flat_full = [(h.doc, line) for h in full.hits for line in h.lines]
    flat_part = [(h.doc, line) for h in part.hits for line in h.lines]
    assert flat_part == flat_full[:limit]
    assert part.limit_hit == (len(flat_full) >= limit)


def test_parallel_verification_equals_sequential(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = [
        SourceDoc(f"d{i:03}.c", f"int x{i};\nreturn {i % 7};\n".encode(), 0, frozenset({"main"})) for i in range(300)
    ]
    shard = Shard.open(build_shard(tmp_path / "s", {"repo": "r"}, docs))
    q = Query(expr=Pattern(re.escape("return 3"), "return 3", False, 0))
    sequential = search_shard(shard, q, branch="main", limit=None, deadline=time.monotonic() + 30)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        split = parallel.search_shard_parallel(
            shard, q, branch="main", limit=None, deadline=time.monotonic() + 30, pool=pool, parts=2
        )
    assert [(h.doc, h.lines) for h in split.hits] == [(h.doc, h.lines) for h in sequential.hits]
    assert split.match_count == sequential.match_count == 43


def test_fan_out_over_shards_equals_sequential(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shards = []
    for k in range(3):
        docs = [
            SourceDoc(f"s{k}/d{i}.c", f"x {i % 5} y\n".encode(), 0, frozenset({"main"})) for i in range(40 * (k + 1))
        ]
        shards.append(Shard.open(build_shard(tmp_path / f"s{k}", {"repo": f"r{k}"}, docs)))
    q = Query(expr=Pattern(re.escape("x 3 y"), "x 3 y", False, 0))
    deadline = time.monotonic() + 30
    sequential = [search_shard(s, q, branch="main", limit=None, deadline=deadline) for s in shards]
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        fanned = parallel.search_many([(s, "main") for s in shards], q, deadline=deadline, pool=pool, parts=2)
    assert [[(h.doc, h.lines) for h in r.hits] for r in fanned] == [
        [(h.doc, h.lines) for h in r.hits] for r in sequential
    ]
    assert [r.match_count for r in fanned] == [8, 16, 24]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpus, tree, st.booleans(), geometry)
def test_vectorized_line_mapping_equals_brute_force(
    docs: list[str], node: Node, case_sensitive: bool, shape: Shape
) -> None:
    """The vectorized offset → line search (used for many matches) agrees with the reference too."""
    saved = verify._FEW_OFFSETS
    verify._FEW_OFFSETS = 0
    try:
        got, want = run(docs, node, case_sensitive, shape)
    finally:
        verify._FEW_OFFSETS = saved
    assert got == want


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpus, tree, st.booleans(), st.sampled_from(["^d0/", "^d1/", "f1", "d0/f[02]"]), geometry)
def test_file_filter_then_trigrams_equals_brute_force(
    docs: list[str], node: Node, case_sensitive: bool, file_regex: str, shape: Shape
) -> None:
    """A file: filter narrows the documents before content work; results are the reference's, filtered."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = [f"d{i % 2}/f{i}.txt" for i in range(len(docs))]
        sources = [SourceDoc(p, d.encode(), len(d), frozenset({"main"})) for p, d in zip(paths, docs, strict=True)]
        shard = Shard.open(
            build_shard(Path(tmp) / "s", {"repo": "r"}, sources, unit_bytes=shape[0], page_shift=shape[1])
        )
        q = Query(expr=node, case_sensitive=case_sensitive, files=(file_regex,))
        with verifier(shape):
            result = search_shard(shard, q, branch="main", limit=None, deadline=time.monotonic() + 30)
        got = {shard.paths[h.doc]: {line - int(shard.line_base[h.doc]) + 1 for line in h.lines} for h in result.hits}
    flags = 0 if case_sensitive else re.IGNORECASE
    want: dict[str, set[int]] = {}
    for path, d in zip(paths, docs, strict=True):
        if not re.search(file_regex, path, flags):
            continue
        ok, found = reference(node, lines_of(d), flags)
        if ok and (found or _has_negation_only_match(node)):
            want[path] = found
    assert got == want


class _NoPool:
    """A pool that fails the test if anything is submitted to it."""

    def submit(self, *args: object) -> None:
        raise AssertionError("a selective query was sent to the process pool")


def test_selective_queries_skip_the_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Filters and trigram candidates are applied before the parallel split: small selections stay local."""
    docs = [
        SourceDoc(
            f"{'fs/ext4' if i < 3 else 'drivers'}/d{i:03}.c",
            f"int x{i};\nmutex_lock(&m{i % 4});\n".encode(),
            0,
            frozenset({"main"}),
        )
        for i in range(300)
    ]
    shard = Shard.open(build_shard(tmp_path / "s", {"repo": "r"}, docs))
    # The whole shard is "big", but the filtered selection (3 small documents) is not.
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 1000)
    deadline = time.monotonic() + 30
    filtered = Query(expr=Pattern(re.escape("mutex_lock"), "mutex_lock", False, 0), files=("^fs/ext4/",))
    found = parallel.search_shard_parallel(
        shard, filtered, branch="main", limit=None, deadline=deadline, pool=_NoPool(), parts=2
    )
    assert [shard.paths[h.doc] for h in found.hits] == ["fs/ext4/d000.c", "fs/ext4/d001.c", "fs/ext4/d002.c"]
    assert found.match_count == 3
    rare = Query(expr=Pattern(re.escape("x42;"), "x42;", False, 0))
    many = parallel.search_many([(shard, "main"), (shard, "main")], rare, deadline=deadline, pool=_NoPool(), parts=2)
    assert [[shard.paths[h.doc] for h in r.hits] for r in many] == [["drivers/d042.c"], ["drivers/d042.c"]]
    # An unselective pattern (more candidate units than a direct scan takes) goes to the pool.
    monkeypatch.setattr(selection, "_DIRECT_UNITS", 100)
    with pytest.raises(AssertionError, match="process pool"):
        parallel.search_shard_parallel(
            shard,
            Query(expr=Pattern("int", "int", False, 0)),
            branch="main",
            limit=None,
            deadline=deadline,
            pool=_NoPool(),
            parts=2,
        )


@given(st.lists(st.integers(min_value=0, max_value=1000), min_size=1, max_size=40), st.integers(2, 4))
def test_fan_out_shares_cover_every_piece_once(weights: list[int], parts: int) -> None:
    """This process takes about 1/parts of the work; the pool's groups take the rest, each piece once."""
    local, remote = _share(weights, parts)
    assigned = local + [k for group in remote for k in group]
    assert sorted(assigned) == list(range(len(weights)))
    total = sum(weights)
    mine = sum(weights[k] for k in local)
    # At most one piece beyond the fair share, and never everything while other pieces have weight.
    assert mine - max((weights[k] for k in local), default=0) < total / parts or total == 0
    if len(weights) > 1 and total and all(weights):
        assert remote


def test_split_filtered_search_reports_each_line_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A filtered, selective query over a shard split into document ranges: every piece scans its own range."""

    docs = [
        SourceDoc(f"{'keep' if i % 2 else 'drop'}/d{i:03}.c", f"x {i % 5} y\n".encode(), 0, frozenset({"main"}))
        for i in range(120)
    ]
    shards = [Shard.open(build_shard(tmp_path / f"s{k}", {"repo": f"r{k}"}, docs)) for k in range(2)]
    q = Query(expr=Pattern(re.escape("x 3 y"), "x 3 y", False, 0), files=("^keep/",))
    deadline = time.monotonic() + 30
    sequential = [search_shard(s, q, branch="main", limit=None, deadline=deadline) for s in shards]
    assert [r.match_count for r in sequential] == [12, 12]
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        fanned = parallel.search_many([(s, "main") for s in shards], q, deadline=deadline, pool=pool, parts=2)
    assert [[(h.doc, h.lines) for h in r.hits] for r in fanned] == [
        [(h.doc, h.lines) for h in r.hits] for r in sequential
    ]


def test_concurrent_filtered_searches_share_the_filter_memo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads searching under many filters at once (memo evicting all the time) all get exact results."""

    docs = [SourceDoc(f"d{i % 7}/f{i}.c", f"x {i % 5} y\n".encode(), 0, frozenset({"main"})) for i in range(140)]
    shard = Shard.open(build_shard(tmp_path / "s", {"repo": "r"}, docs))
    monkeypatch.setattr(selection, "_FILTER_CACHE", 2)

    def run_one(k: int) -> tuple[int, list[str]]:
        q = Query(expr=Pattern(re.escape("x 3 y"), "x 3 y", False, 0), files=(f"^d{k % 7}/",))
        found = search_shard(shard, q, branch="main", limit=None, deadline=time.monotonic() + 30)
        return k, [shard.paths[h.doc] for h in found.hits]

    with ThreadPoolExecutor(8) as threads:
        for k, found in threads.map(run_one, range(400)):
            want = [f"d{k % 7}/f{i}.c" for i in range(140) if i % 7 == k % 7 and i % 5 == 3]
            assert found == want
    assert len(shard.filter_cache) <= 2


@pytest.mark.parametrize("engine", ENGINES)
def test_a_literal_with_a_newline_matches_no_line(tmp_path: Path, engine: str) -> None:
    """Matching is per line (like ripgrep): a phrase spanning two lines of the file is not a match."""
    docs = [SourceDoc("a.c", b"int\nfoo\nint foo\n", 0, frozenset({"main"}))]
    shard = Shard.open(build_shard(tmp_path / "s", {"repo": "r"}, docs))
    with verifier((UNIT_BYTES, PAGE_SHIFT, engine)):
        across = search_shard(shard, Query(expr=Pattern("int\\\nfoo", "int\nfoo", False, 0)), **_ANY)
        within = search_shard(shard, Query(expr=Pattern("int\\ foo", "int foo", False, 0)), **_ANY)
    assert across.hits == []
    assert [(h.doc, h.lines) for h in within.hits] == [(0, [2])]


def reference_ranges(patterns: list[Pattern], line: str, flags: int) -> list[tuple[int, int]]:
    """Every positive pattern's non-empty matches in the line, as Python's finditer steps (ASCII: bytes)."""
    found = {m.span() for p in patterns for m in re.finditer(p.value, line, flags) if m.end() > m.start()}
    return sorted(found)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpus, tree, st.booleans(), geometry)
def test_verification_reports_the_match_ranges(docs: list[str], node: Node, case_sensitive: bool, shape: Shape) -> None:
    """The ranges verification returns equal a separate finditer of every positive pattern on each line (#15)."""
    q = Query(expr=node, case_sensitive=case_sensitive)
    flags = 0 if case_sensitive else re.IGNORECASE
    with tempfile.TemporaryDirectory() as tmp:
        sources = [SourceDoc(f"f{i}.txt", d.encode(), len(d), frozenset({"main"})) for i, d in enumerate(docs)]
        shard = Shard.open(
            build_shard(Path(tmp) / "s", {"repo": "r"}, sources, unit_bytes=shape[0], page_shift=shape[1])
        )
        with verifier(shape):
            result = search_shard(shard, q, branch="main", limit=None, deadline=time.monotonic() + 30)
        matches = file_matches(shard, result, q, origin=lambda _doc: ("r", "c"))
    for hit, fm in zip(result.hits, matches, strict=True):
        lines = lines_of(docs[hit.doc])
        assert [m.line for m in fm.line_matches] == [lines[m.line_number - 1] for m in fm.line_matches]
        for m in fm.line_matches:
            assert m.ranges == reference_ranges(q.patterns(), m.line, flags), (m.line, q.patterns())
