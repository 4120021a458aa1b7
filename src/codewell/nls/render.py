"""The text of an nls_search answer, in keyword_search's block format (shared by the tool, REST and the CLI)."""

from __future__ import annotations

from codewell.nls.service import NlsHit, NlsResults, shown_hits

CHUNK_CHARS = 1024


def _chunk(hit: NlsHit) -> str:
    text = "\n".join(f"{hit.start + i}: {line[:300]}" for i, line in enumerate(hit.lines))
    if len(text) > CHUNK_CHARS:
        text = text[:CHUNK_CHARS].rsplit("\n", 1)[0]
    return text


def render(results: NlsResults) -> str:
    """First line: the terms searched for; then up to `limit` files, each with its best chunks in line order."""
    files: dict[tuple[str, str], list[NlsHit]] = {}
    for hit in shown_hits(results.hits, results.limit):
        files.setdefault((hit.repo, hit.path), []).append(hit)
    blocks = [f"Searched for: {' '.join(results.terms)}", *results.notes]
    for (repo, path), hits in files.items():
        body = "\n\n".join(_chunk(h) for h in sorted(hits, key=lambda h: h.start))
        blocks.append(f"# {repo} – {path}\n{body}")
    if not files:
        blocks.append("No results. Try other words, or keyword_search for exact identifiers.")
    return "\n\n".join(blocks)
