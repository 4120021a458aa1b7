"""Render search results in the reference keyword_search text format (behaviour-notes §1)."""

from __future__ import annotations

from dataclasses import dataclass

from codewell.search.results import FileMatch, LineMatch, SearchResults

__all__ = ["CHUNKS_PER_FILE", "CHUNK_CHARS", "FILES_PER_PAGE", "LINE_CAP", "OUTPUT_BUDGET", "render_results"]

FILES_PER_PAGE = 15
CHUNKS_PER_FILE = 3
CHUNK_CHARS = 1024
LINE_CAP = 256
CONTEXT_LINES = 1
# Total characters of rendered text; agents pay for every token, so a page never exceeds this.
OUTPUT_BUDGET = 24_000
TRUNCATED = " ... [line truncated]"


@dataclass(frozen=True, slots=True)
class Rendered:
    text: str
    files_shown: int
    files_omitted: int
    chunks_omitted: int


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
    text = "\n".join(lines)
    if len(text) > CHUNK_CHARS:
        text = text[:CHUNK_CHARS].rsplit("\n", 1)[0] if "\n" in text[:CHUNK_CHARS] else text[:CHUNK_CHARS]
    return text


def render_file(f: FileMatch) -> tuple[str, int]:
    """One block `# repo – path` plus its top chunks; returns (text, chunks left out)."""
    header = f"# {f.repo} – {f.path}"
    chunks = _chunks(f)
    shown = sorted(chunks[:CHUNKS_PER_FILE], key=lambda c: c[0].line_number)
    body = "\n\n".join(_render_chunk(c) for c in shown)
    return (header + ("\n" + body if body else "")), max(0, len(chunks) - CHUNKS_PER_FILE)


def render_results(results: SearchResults, query: str) -> Rendered:
    """The text agents read: file blocks within the page and budget, then notes on what was left out."""
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
