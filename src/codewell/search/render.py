"""Render search results in the reference keyword_search text format (behaviour-notes §1).

Without `count:` a page is the reference's: up to 15 files, each with its top 3 chunks. With `count:N` or
`count:all` the caller asked for the matches themselves, so every collected match is shown: the first 15
files with their top chunks as usual, then one line per further match (the rest of those files' lines,
then every later file's), until the output budget. A page cut by the budget ends with a cursor: the same
query with that cursor continues with the next match (compact lines only).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from codewell.core.errors import InvalidInput
from codewell.search.results import FileMatch, IndexStatus, LineMatch, SearchResults

__all__ = [
    "CHUNKS_PER_FILE",
    "CHUNK_CHARS",
    "FILES_PER_PAGE",
    "LINE_CAP",
    "OUTPUT_BUDGET",
    "make_cursor",
    "read_cursor",
    "render_results",
]

FILES_PER_PAGE = 15
CHUNKS_PER_FILE = 3
CHUNK_CHARS = 1024
LINE_CAP = 256
CONTEXT_LINES = 1
# Total characters of rendered text; agents pay for every token, so a page never exceeds this.
OUTPUT_BUDGET = 24_000
TRUNCATED = " ... [line truncated]"
# Room kept under OUTPUT_BUDGET for the closing notes of a count: page (cursor, skipped repositories).
NOTES_RESERVE = 1_000


@dataclass(frozen=True, slots=True)
class Rendered:
    text: str
    files_shown: int
    files_omitted: int
    chunks_omitted: int
    # count: pages only: matches shown on this page, and the cursor of the next page (None: nothing left).
    matches_shown: int = 0
    cursor: str | None = None


def cap_line(text: str) -> str:
    """The line, cut at LINE_CAP characters with the reference's truncation marker."""
    return text if len(text) <= LINE_CAP else text[:LINE_CAP] + TRUNCATED


def _chunks(f: FileMatch) -> list[list[LineMatch]]:
    """Group matching lines that are close together into chunks, best (most matches) first."""
    groups: list[list[LineMatch]] = []
    for m in f.line_matches:
        if groups and m.line_number - groups[-1][-1].line_number <= 2 * CONTEXT_LINES + 1:
            groups[-1].append(m)
        else:
            groups.append([m])
    return sorted(groups, key=lambda g: -len(g))


def _render_chunk(chunk: list[LineMatch]) -> str:
    lines = [f"{m.line_number}: {cap_line(m.line.rstrip(chr(13)))}" for m in chunk]
    return _cut_chunk("\n".join(lines))


def _cut_chunk(text: str) -> str:
    """A chunk's text cut to CHUNK_CHARS, at a line end when it holds one."""
    if len(text) > CHUNK_CHARS:
        text = text[:CHUNK_CHARS].rsplit("\n", 1)[0] if "\n" in text[:CHUNK_CHARS] else text[:CHUNK_CHARS]
    return text


def render_file(f: FileMatch) -> tuple[str, int]:
    """One block `# repo – path` plus its top chunks; returns (text, chunks left out)."""
    header = f"# {f.repo} – {f.path}"
    if f.labels:
        # A symbol match: one chunk per definition, led by its kind and qualified name.
        shown_lines = f.line_matches[:CHUNKS_PER_FILE]
        body = "\n\n".join(f"({f.labels.get(m.line_number, 'symbol')})\n{_render_chunk([m])}" for m in shown_lines)
        return header + "\n" + body, max(0, len(f.line_matches) - CHUNKS_PER_FILE)
    chunks = _chunks(f)
    shown = sorted(chunks[:CHUNKS_PER_FILE], key=lambda c: c[0].line_number)
    body = "\n\n".join(_render_chunk(c) for c in shown)
    return (header + ("\n" + body if body else "")), max(0, len(chunks) - CHUNKS_PER_FILE)


def render_results(results: SearchResults, query: str, *, skip: int = 0) -> Rendered:
    """The text agents read: file blocks within the page and budget, then notes on what was left out.

    A query with count: gets every collected match (render_counted), from match `skip` on.
    """
    if results.count_given:
        return render_counted(results, query, skip)
    blocks: list[str] = []
    used = 0
    chunks_omitted = 0
    for f in results.files[:FILES_PER_PAGE]:
        block, omitted = render_file(f)
        if blocks and used + len(block) + 2 > OUTPUT_BUDGET:
            break
        blocks.append(block[:OUTPUT_BUDGET])
        used += len(block) + 2
        chunks_omitted += omitted
    files_omitted = len(results.files) - len(blocks)
    notes: list[str] = []
    if not results.files:
        notes.append(f"No results for {query!r}.")
    if files_omitted or results.limit_hit:
        more = "more" if results.limit_hit else str(files_omitted)
        notes.append(
            f"({more} matching files not shown; showing {len(blocks)} of {len(results.files)}"
            f"{'+' if results.limit_hit else ''} files. Narrow the query with file:<regex>, repo:<regex>, "
            "lang:<language> or more specific terms.)"
        )
    if chunks_omitted:
        notes.append(f"({chunks_omitted} more matching chunks in the files above are not shown.)")
    if results.timed_out:
        notes.append(
            "(The search timed out: results are partial. Narrow the query or raise timeout:, e.g. timeout:30s.)"
        )
    notes.extend(f"(Skipped {s})" for s in results.skipped)
    text = "\n\n".join(blocks + notes)
    return Rendered(text, len(blocks), files_omitted, chunks_omitted)


def make_cursor(query: str, skip: int) -> str:
    """The cursor of the page that starts after the first `skip` matches of `query`'s rendering."""
    return f"{skip}.{_digest(query)}"


def read_cursor(query: str, cursor: str) -> int:
    """The number of matches a cursor skips; InvalidInput when it is malformed or made for another query."""
    skip, _, digest = cursor.partition(".")
    if not skip.isdigit() or digest != _digest(query):
        raise InvalidInput(
            "invalid cursor for this query",
            hint="pass the cursor exactly as the previous page printed it, with the same query",
        )
    return int(skip)


def _digest(query: str) -> str:
    return hashlib.sha256(query.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def render_counted(results: SearchResults, query: str, skip: int = 0) -> Rendered:
    """A count: page: every collected match, compact after the first files' chunks, within the budget.

    Matches are taken in one fixed order, so a cursor (`skip`) continues exactly where a page stopped:
    files in rank order; in each of the first FILES_PER_PAGE files the lines of its top chunks, then its
    other lines; in later files their lines in line order. A file matched by its path alone is one match.
    Page 1 shows the first files' top chunks as blocks; every other match is one `N: text` line under its
    file's `# repo – path` header.
    """
    page = _Page(OUTPUT_BUDGET - NOTES_RESERVE)
    position = 0  # matches before the current file, in the fixed order
    for index, f in enumerate(results.files):
        # A file holds max(1, line_count) matches in the fixed order: files wholly before the page are
        # skipped on that count, without reading their lines.
        matches = max(1, f.line_count)
        if position + matches > skip:
            order, chunk_text, in_chunks = _file_order(f, index, first_page=skip == 0)
            page.add_file(f, order[max(0, skip - position) :], chunk_text if position >= skip else "", in_chunks)
            if page.full:
                break
        position += matches
    total = sum(max(1, f.line_count) for f in results.files)
    cursor = make_cursor(query, skip + page.shown) if page.full else None
    notes = _counted_notes(results, query, f"{skip + 1}-{skip + page.shown} of {total}", cursor)
    text = "\n\n".join(page.blocks + notes)
    return Rendered(text, page.files, len(results.files) - page.files, 0, page.shown, cursor)


class _Page:
    """File blocks of a count: page, added while they fit in `budget` characters."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.blocks: list[str] = []
        self.used = 0
        self.shown = 0
        self.files = 0
        self.full = False

    def add_file(self, f: FileMatch, order: list[int | None], chunk_text: str, in_chunks: int) -> None:
        """Add `f`'s block: its chunk text (when given, holding the first `in_chunks` of `order`), then lines.

        `order` holds line indices of `f` (None: a path-only match); a compact line reads only the line's
        number and text, and only while the page has room.
        """
        parts = [f"# {f.repo} – {f.path}"]
        size = len(parts[0]) + (2 if self.blocks else 0)
        rest = order
        taken = 0
        if chunk_text:
            size += len(chunk_text) + 2
            parts.append(chunk_text)
            rest, taken = order[in_chunks:], in_chunks
        if self.blocks and self.used + size > self.budget:
            self.full = True
            return
        compact: list[str] = []
        for i in rest:
            if i is not None:  # None: a path-only match, which the header says
                line = f"{f.line_number(i)}: {cap_line(f.line_text(i).rstrip(chr(13)))}"
                if self.used + size + len(line) + 1 > self.budget:
                    self.full = True
                    break
                compact.append(line)
                size += len(line) + 1
            taken += 1
        if compact:
            parts.append(("\n" if chunk_text else "") + "\n".join(compact))
        if taken:
            self.blocks.append("\n".join(parts))
            self.used += size
            self.files += 1
            self.shown += taken


def _counted_notes(results: SearchResults, query: str, span: str, cursor: str | None) -> list[str]:
    notes: list[str] = []
    if not results.files:
        notes.append(f"No results for {query!r}.")
    elif cursor is not None:
        notes.append(
            f"(Output budget reached: showing matches {span}{'+' if results.limit_hit else ''}. For the next "
            f'page, call again with the same query and cursor "{cursor}"; or narrow the query with '
            "file:<regex>, repo:<regex>, lang:<language>.)"
        )
    else:
        notes.append(f"(Showing matches {span}: all collected matches.)")
    if results.limit_hit:
        notes.append(
            f"(The search stopped after {results.match_count} matching lines as count: asked; there may be more: "
            "raise count:N or use count:all.)"
        )
    if results.timed_out:
        notes.append(
            "(The search timed out: results are partial. Narrow the query or raise timeout:, e.g. timeout:30s.)"
        )
    notes.extend(f"(Skipped {s})" for s in results.skipped)
    return notes


def _file_order(f: FileMatch, index: int, *, first_page: bool) -> tuple[list[int | None], str, int]:
    """(the file's line indices in page order, its chunk text, how many of them the chunk text holds).

    Only the first FILES_PER_PAGE files of the first page get chunks; the order is the same either way
    (chunk lines first), so that cursors count matches identically on every page. Chunks are found from
    line numbers alone and their text read only up to CHUNK_CHARS: a file of thousands of matches costs its
    page no more than the lines shown.
    """
    count = f.line_count
    if not count:
        return [None], "", 0
    if index >= FILES_PER_PAGE:
        return list(range(count)), "", 0
    chunks = sorted(_index_chunks(f)[:CHUNKS_PER_FILE], key=lambda c: c[0])
    texts: list[str] = []
    chunk_lines: list[int] = []
    for chunk in chunks:
        text, held = _index_chunk_text(f, chunk)
        texts.append(text)
        chunk_lines.extend(chunk[:held])
    chosen = set(chunk_lines)
    order: list[int | None] = [*chunk_lines, *(i for i in range(count) if i not in chosen)]
    if not first_page:
        return order, "", 0
    return order, "\n\n".join(texts), len(chunk_lines)


def _index_chunks(f: FileMatch) -> list[list[int]]:
    """`_chunks` as line indices of `f`, from its line numbers only (no texts or ranges read)."""
    groups: list[list[int]] = []
    previous = 0
    for i in range(f.line_count):
        number = f.line_number(i)
        if groups and number - previous <= 2 * CONTEXT_LINES + 1:
            groups[-1].append(i)
        else:
            groups.append([i])
        previous = number
    return sorted(groups, key=lambda g: -len(g))


def _index_chunk_text(f: FileMatch, chunk: list[int]) -> tuple[str, int]:
    """`_chunk_lines` of the chunk of line indices `chunk`: lines are read until CHUNK_CHARS is passed (the
    text is cut there anyway), so the result is the same as rendering every line of the chunk."""
    lines: list[str] = []
    size = -1
    for i in chunk:
        line = f"{f.line_number(i)}: {cap_line(f.line_text(i).rstrip(chr(13)))}"
        lines.append(line)
        size += len(line) + 1
        if size > CHUNK_CHARS:
            break
    text = _cut_chunk("\n".join(lines))
    return text, text.count("\n") + 1


def status_json(s: IndexStatus) -> dict[str, object]:
    """One repository's index status as GET /.api/search/status answers it (and `codewell index --status --json`)."""
    return {
        "repository": s.repo,
        "state": s.state,
        "branches": s.branches,
        "documents": s.documents,
        "contentBytes": s.content_bytes,
        "indexBytes": s.index_bytes,
        "indexedAt": s.indexed_at.isoformat() if s.indexed_at else None,
        "error": s.error,
    }
