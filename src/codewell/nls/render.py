"""The text of an nls_search answer, in keyword_search's block format (shared by the tool, REST and the CLI).

Agents pay for every character, so an answer has a budget (ANSWER_CHARS, about 2,000 tokens, unless count:
asks for more files): the best files first, each with its best chunks (3 for the first file, 2 after), every
chunk cut to the lines that hold the question's terms; files that do not fit are listed by path and lines, and
a last line says how to see more. Every shortening is marked so that an agent never takes a cut for the file's
text: a line cut for length ends with `…(+N chars)`, and lines of a chunk left out are one `…` line.
"""

from __future__ import annotations

from codewell.nls.service import FILES_PER_PAGE, MAX_COUNT, NlsHit, NlsResults, shown_hits

__all__ = ["ANSWER_CHARS", "CHUNK_CHARS", "LINE_CHARS", "MAX_ANSWER_CHARS", "cap_line", "render"]

# The default answer's size: 15 files at ~530 characters each, on average, once the best ones are quoted.
ANSWER_CHARS = 8_000
# With count: above the default, the budget grows with the files asked for, up to keyword_search's page budget.
MAX_ANSWER_CHARS = 24_000
CHUNK_CHARS = 600
LINE_CHARS = 200
# Notes (fallbacks, skipped repositories) shown before the files, at most.
NOTES_CHARS = 1_500
SKIPPED = "…"
ALSO = "Also matching, not quoted for length (read_file them, or narrow with repo: or file:):"


def cap_line(line: str, limit: int = LINE_CHARS) -> str:
    """`line` unchanged, or its first `limit` characters and `…(+N chars)`: N characters were left out."""
    if len(line) <= limit:
        return line
    return f"{line[:limit]}…(+{len(line) - limit} chars)"


def _budget(results: NlsResults) -> int:
    if not results.count_given or results.limit <= FILES_PER_PAGE:
        return ANSWER_CHARS
    return min(MAX_ANSWER_CHARS, ANSWER_CHARS * results.limit // FILES_PER_PAGE)


def _window(rendered: list[str], weights: list[int], limit: int) -> tuple[int, int]:
    """The lines [start, end) to quote: within `limit` characters, the most matching lines, the earliest such
    window on ties (a chunk's first lines say what it is)."""
    best = (0, 0, 0)  # (weight, start, end)
    start = size = weight = 0
    for end, line in enumerate(rendered):
        size += len(line) + 1
        weight += weights[end]
        while size > limit and start <= end:
            size -= len(rendered[start]) + 1
            weight -= weights[start]
            start += 1
        if end + 1 > start and (weight > best[0] or best[2] == 0):
            best = (weight, start, end + 1)
    return best[1], best[2]


def _chunk(hit: NlsHit, needles: list[str], limit: int) -> str:
    """The chunk's `<line>: <text>` lines, cut to `limit` characters around the lines holding the question's
    terms; a `…` line stands for lines left out (line numbers alone would not show a cut at the chunk's end)."""
    rendered = [f"{hit.start + i}: {cap_line(line)}" for i, line in enumerate(hit.lines)]
    if sum(len(line) + 1 for line in rendered) <= limit + 1:
        return "\n".join(rendered)
    # Stems are prefixes of the words they stand for (`expir` of `expired`), so a substring test finds them.
    weights = [sum(1 for n in needles if n in line.lower()) for line in hit.lines]
    start, end = _window(rendered, weights, limit)
    quoted = rendered[start:end]
    if start > 0:
        quoted.insert(0, SKIPPED)
    if end < len(rendered):
        quoted.append(SKIPPED)
    return "\n".join(quoted)


def _block(repo: str, path: str, hits: list[NlsHit], needles: list[str]) -> str:
    body = "\n\n".join(_chunk(h, needles, CHUNK_CHARS) for h in sorted(hits, key=lambda h: h.start))
    return f"# {repo} – {path}\n{body}"


def _head(results: NlsResults) -> str:
    """The terms line and the notes; notes past NOTES_CHARS (one per unsearchable repository can be thousands)
    are counted, not shown."""
    lines = [f"Searched for: {' '.join(results.terms)}"]
    used = 0
    for shown, note in enumerate(results.notes):
        if used + len(note) > NOTES_CHARS:
            lines.append(f"({len(results.notes) - shown} more notes left out.)")
            break
        lines.append(note)
        used += len(note) + 2
    return "\n\n".join(lines)


def render(results: NlsResults) -> str:
    """First line: the terms searched for; then notes; then the first `limit` files, best first: as many as the
    budget holds with their best chunks in line order, the rest by path and lines; then how to see more."""
    files: dict[tuple[str, str], list[NlsHit]] = {}
    for hit in shown_hits(results.hits, results.limit):
        files.setdefault((hit.repo, hit.path), []).append(hit)
    head = _head(results)
    if not files:
        return f"{head}\n\nNo results. Try other words, or keyword_search for exact identifiers."
    more = len({(h.repo, h.path) for h in results.hits}) - len(files)
    hint = ""
    if more > 0 and results.limit < MAX_COUNT:
        wider = min(MAX_COUNT, results.limit + max(FILES_PER_PAGE, more))
        hint = f"({more} more files matched among the best candidates: count:{wider} lists them.)"
    needles = [t for t in results.terms if len(t) > 1]
    entries = [
        f"- {repo} – {path}: lines {', '.join(f'{h.start}-{h.end}' for h in sorted(hits, key=lambda h: h.start))}"
        for (repo, path), hits in files.items()
    ]
    # What the files after the i-th cost if they are only listed: a file is quoted only if they still fit.
    listed_after = [0] * len(entries)
    for i in range(len(entries) - 2, -1, -1):
        listed_after[i] = listed_after[i + 1] + len(entries[i + 1]) + 1
    room = _budget(results) - len(head) - len(hint) - len(ALSO) - 6
    blocks: list[str] = []
    listed: list[str] = []
    for rank, ((repo, path), hits) in enumerate(files.items()):
        block = None
        if not listed:  # once a file is only listed, the later (lower-ranked) ones are too: the order stays
            for shown in range(3 if rank == 0 else 2, 0, -1):
                candidate = _block(repo, path, hits[:shown], needles)
                if len(candidate) + 2 + listed_after[rank] <= room:
                    block = candidate
                    break
        if block is None:
            listed.append(entries[rank])
        else:
            blocks.append(block)
            room -= len(block) + 2
    parts = [head, *blocks]
    if listed:
        parts.append(ALSO + "\n" + "\n".join(listed))
    if hint:
        parts.append(hint)
    return "\n\n".join(parts)
