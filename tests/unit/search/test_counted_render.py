"""A count: page reads only what it shows: chunks from line numbers, texts up to the budget, no match ranges."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from codewell.search import render
from codewell.search.render import CHUNK_CHARS, CHUNKS_PER_FILE, FILES_PER_PAGE, render_results
from codewell.search.results import FileMatch, LineMatch, SearchResults


class CountingLines:
    """A LineSource over fixed lines that counts what is read."""

    def __init__(self, numbers: list[int], texts: list[str]) -> None:
        self.numbers, self.texts_ = numbers, texts
        self.read: set[int] = set()
        self.matches = 0

    def __len__(self) -> int:
        return len(self.numbers)

    def number(self, i: int) -> int:
        return self.numbers[i]

    def text(self, i: int) -> str:
        self.read.add(i)
        return self.texts_[i]

    def texts(self) -> list[str]:
        self.read.update(range(len(self.numbers)))
        return list(self.texts_)

    def match(self, i: int) -> LineMatch:
        self.matches += 1
        return LineMatch(self.numbers[i], self.texts_[i], [(0, 1)])

    def first_range(self, i: int) -> tuple[bytes, int, int] | None:
        return None


def _previous_order(f: FileMatch, index: int) -> tuple[list[int], str]:
    """The page order and chunk text as rendering computed them from every LineMatch (before #30)."""
    if index >= FILES_PER_PAGE:
        return [m.line_number for m in f.line_matches], ""
    chunks = sorted(render._chunks(f)[:CHUNKS_PER_FILE], key=lambda c: c[0].line_number)
    texts: list[str] = []
    chosen: list[LineMatch] = []
    for chunk in chunks:
        text = render._render_chunk(chunk)
        texts.append(text)
        chosen.extend(chunk[: text.count("\n") + 1])
    ids = {id(m) for m in chosen}
    order = [*chosen, *(m for m in f.line_matches if id(m) not in ids)]
    return [m.line_number for m in order], "\n\n".join(texts)


gaps = st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=40)
lengths = st.lists(st.integers(min_value=0, max_value=700), min_size=40, max_size=40)


@settings(max_examples=200, deadline=None)
@given(gaps, lengths, st.integers(min_value=0, max_value=FILES_PER_PAGE))
def test_the_page_order_and_chunks_equal_those_of_every_line_match(
    steps: list[int], sizes: list[int], index: int
) -> None:
    numbers = [sum(steps[: k + 1]) for k in range(len(steps))]
    texts = [f"{'y' * sizes[k]}{n}\r" for k, n in enumerate(numbers)]
    f = FileMatch("r", "a.c", "0" * 40, "C", [LineMatch(n, t, [(0, 1)]) for n, t in zip(numbers, texts, strict=True)])
    order, chunk_text, held = render._file_order(f, index, first_page=True)
    want_order, want_text = _previous_order(f, index)
    assert [numbers[i] for i in order if i is not None] == want_order
    assert chunk_text == want_text
    assert held == (want_text.count("\n") + 1 - want_text.count("\n\n") if want_text else 0)


def test_a_count_page_reads_no_ranges_and_only_the_lines_it_shows() -> None:
    # One file with 20,000 matches in one long chunk, then files beyond the page.
    big = CountingLines(list(range(1, 20_001)), [f"hit {n}" for n in range(1, 20_001)])
    later = [CountingLines([5], ["hit"]) for _ in range(50)]
    files = [FileMatch("r", "big.c", "0" * 40, "C", source=big)]
    files += [FileMatch("r", f"f{k}.c", "0" * 40, "C", source=s) for k, s in enumerate(later)]
    page = render_results(SearchResults(files, 20_050, False, False, [], count_given=True), "hit count:all")
    assert page.cursor is not None
    assert big.matches == 0
    # The chunk stops reading at CHUNK_CHARS, the compact lines at the output budget: ~2,500 of 20,000.
    assert 0 < len(big.read) < 3_000
    assert len(big.read) >= page.matches_shown
    assert all(not s.read and not s.matches for s in later)
    assert page.text.count("\n") > CHUNK_CHARS // 20
