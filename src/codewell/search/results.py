"""Search result types returned by SearchService (see the interfaces contract)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

__all__ = ["FileMatch", "IndexStatus", "LineMatch", "SearchResults"]


@dataclass(frozen=True, slots=True)
class LineMatch:
    """One matching line: 1-based number, its text, and match ranges as byte offsets in the line."""

    line_number: int
    line: str
    ranges: list[tuple[int, int]]


@dataclass(slots=True)
class FileMatch:
    """A matching file; `line_matches` is empty for path-only matches."""

    repo: str
    path: str
    commit: str
    language: str
    line_matches: list[LineMatch] = field(default_factory=list)
    path_match: bool = False
    score: float = 0.0
    # type:symbol matches: line number → what the line defines (`method Config.load`); empty for text matches.
    labels: dict[int, str] = field(default_factory=dict)


@dataclass(slots=True)
class SearchResults:
    """Ranked file matches; `limit_hit`/`timed_out` say the results are partial, `skipped` says why."""

    files: list[FileMatch]
    match_count: int
    limit_hit: bool
    timed_out: bool
    skipped: list[str]
    duration_ms: float = 0.0
    # The query said count:N or count:all: the text rendering then shows every collected match (render.py).
    count_given: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "matchCount": self.match_count,
            "limitHit": self.limit_hit,
            "timedOut": self.timed_out,
            "skipped": self.skipped,
            "durationMs": round(self.duration_ms, 2),
            "files": [
                {
                    "repository": f.repo,
                    "path": f.path,
                    "commit": f.commit,
                    "language": f.language,
                    "pathMatch": f.path_match,
                    **({"symbols": {str(n): label for n, label in f.labels.items()}} if f.labels else {}),
                    "lineMatches": [
                        {"lineNumber": m.line_number, "line": m.line, "ranges": [list(r) for r in m.ranges]}
                        for m in f.line_matches
                    ],
                }
                for f in self.files
            ],
        }


@dataclass(frozen=True, slots=True)
class IndexStatus:
    """Index state of one repository: indexed branches → commits, and what is happening now."""

    repo: str
    state: str  # "indexed" | "indexing" | "not indexed" | "failed"
    branches: dict[str, str]
    documents: int = 0
    content_bytes: int = 0
    index_bytes: int = 0
    indexed_at: datetime | None = None
    error: str | None = None
