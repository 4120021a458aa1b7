"""Required-literal planning (table-driven) and the keyword_search text format."""

from __future__ import annotations

import pytest

from codewell.core.errors import InvalidInput
from codewell.search.query.regex import TRUE, Lit, LitAnd, LitOr, required_literals
from codewell.search.render import LINE_CAP, OUTPUT_BUDGET, make_cursor, read_cursor, render_results
from codewell.search.results import FileMatch, LineMatch, SearchResults

PLANS = [
    ("mutex_lock", Lit(b"mutex_lock")),
    ("Mutex_Lock", Lit(b"mutex_lock")),
    ("spin_lock_irq(save|restore)", LitOr((Lit(b"spin_lock_irqrestore"), Lit(b"spin_lock_irqsave")))),
    (r"[a-z]+_init_[a-z]+\(", Lit(b"_init_")),
    (r"\bdma_\w+_coherent\b", LitAnd((Lit(b"dma_"), Lit(b"_coherent")))),
    ("foo.*bar|baz", LitOr((LitAnd((Lit(b"foo"), Lit(b"bar"))), Lit(b"baz")))),
    ("ab", TRUE),
    ("a.b", TRUE),
    ("(foo)?bar", Lit(b"bar")),
    ("x*", TRUE),
    ("[[:alpha:]]+foo", TRUE),  # POSIX classes read differently by Python's parser: no help, never wrong
    (r"\pLfoo", TRUE),
    ("caf\u00e9", Lit(b"caf")),  # bytes RE2 may case-fold are cut out of the literal
]


@pytest.mark.parametrize(("regex", "formula"), PLANS)
def test_required_literals(regex: str, formula: object) -> None:
    assert required_literals(regex) == formula


def test_hex_class_becomes_an_or_of_trigrams() -> None:
    formula = required_literals(r"\b0x[0-9a-fA-F]{12,}\b")
    assert isinstance(formula, LitOr)
    assert {c.value for c in formula.children if isinstance(c, Lit)} == {f"0x{d}".encode() for d in "0123456789abcdef"}


def results(files: list[FileMatch], **flags: bool) -> SearchResults:
    return SearchResults(
        files, sum(len(f.line_matches) for f in files), flags.get("limit_hit", False), flags.get("timed_out", False), []
    )


def test_render_blocks_chunks_and_line_cap() -> None:
    long_line = "x" * 300
    f = FileMatch(
        "r",
        "a.c",
        "0" * 40,
        "C",
        [
            LineMatch(1, "one", [(0, 3)]),
            LineMatch(2, "two", [(0, 3)]),
            LineMatch(10, long_line, [(0, 1)]),
            LineMatch(20, "a", []),
            LineMatch(30, "b", []),
        ],
    )
    text = render_results(results([f]), "q").text
    assert text.startswith("# r – a.c\n1: one\n2: two\n\n10: " + "x" * LINE_CAP + " ... [line truncated]")
    assert "30: b" not in text  # only the top 3 chunks
    assert "(1 more matching chunks in the files above are not shown.)" in text


def test_render_notes_what_was_left_out() -> None:
    files = [FileMatch("r", f"f{i}.py", "0" * 40, "Python", [LineMatch(1, "hit", [])]) for i in range(20)]
    text = render_results(results(files, limit_hit=True, timed_out=True), "hit").text
    assert text.count("# r – ") == 15
    assert "showing 15 of 20+ files" in text
    assert "file:<regex>" in text
    assert "timed out" in text
    assert render_results(results([]), "nothing").text == "No results for 'nothing'."


def counted(files: list[FileMatch], **flags: bool) -> SearchResults:
    found = results(files, **flags)
    found.count_given = True
    return found


def shown_matches(text: str) -> list[tuple[str, int]]:
    """(path, line) of every `N: text` line under its `# r – path` header."""
    out: list[tuple[str, int]] = []
    path = ""
    for line in text.splitlines():
        if line.startswith("# r – "):
            path = line.removeprefix("# r – ")
        elif line[:1].isdigit() and ": " in line:
            out.append((path, int(line.split(":", 1)[0])))
    return out


def test_count_shows_every_collected_match() -> None:
    """#22: `count:all` over 37 matching files shows all 37, not 15 and a note."""
    files = [FileMatch("r", f"f{i:02}.py", "0" * 40, "Python", [LineMatch(1, "hit", [(0, 3)])]) for i in range(37)]
    plain = render_results(results(files), "hit").text
    assert plain.count("# r – ") == 15
    text = render_results(counted(files), "hit count:all").text
    assert text.count("# r – ") == 37
    assert "not shown" not in text
    assert text.endswith("(Showing matches 1-37 of 37: all collected matches.)")


def test_count_lists_matches_beyond_the_chunks_one_line_each() -> None:
    lines = [LineMatch(n, f"hit {n}", [(0, 3)]) for n in range(1, 200, 10)]  # 20 chunks of one line
    f = FileMatch("r", "a.c", "0" * 40, "C", lines)
    text = render_results(counted([f]), "hit count:50").text
    assert shown_matches(text) == [("a.c", 1), ("a.c", 11), ("a.c", 21), *(("a.c", n) for n in range(31, 200, 10))]
    assert "\n\n31: hit 31\n41: hit 41\n" in text


def test_count_pages_by_cursor_until_every_match_was_shown() -> None:
    long = "x" * 200
    files = [
        FileMatch("r", f"d/f{i:03}.c", "0" * 40, "C", [LineMatch(n, f"{long} {n}", [(0, 1)]) for n in range(1, 40, 3)])
        for i in range(60)
    ]
    want = [(f.path, m.line_number) for f in files for m in f.line_matches]
    query = "x count:all"
    seen: list[tuple[str, int]] = []
    page = render_results(counted(files), query)
    pages = 1
    while page.cursor is not None:
        assert len(page.text) <= OUTPUT_BUDGET
        assert f'cursor "{page.cursor}"' in page.text
        seen.extend(shown_matches(page.text))
        page = render_results(counted(files), query, skip=read_cursor(query, page.cursor))
        pages += 1
    seen.extend(shown_matches(page.text))
    assert pages > 3
    assert sorted(seen) == sorted(want)  # every match exactly once over the pages
    assert len(seen) == len(want)
    with pytest.raises(InvalidInput, match="invalid cursor"):
        read_cursor("other query count:all", make_cursor(query, 10))
