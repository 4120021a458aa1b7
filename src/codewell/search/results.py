"""Search result types returned by SearchService (see the interfaces contract)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import orjson

__all__ = ["FileMatch", "IndexStatus", "LineMatch", "LineSource", "RawFile", "RowLines", "SearchResults", "file_json"]


@dataclass(frozen=True, slots=True)
class LineMatch:
    """One matching line: 1-based number, its text, and match ranges as byte offsets in the line."""

    line_number: int
    line: str
    ranges: list[tuple[int, int]]


class LineSource(Protocol):
    """A file's matching lines before they are read: an exhaustive answer builds only what is looked at.

    Line texts and match ranges come from the shard's content on demand (search/searcher.py), so a
    `count:all` of a common word pays for the lines ranking and the rendered page read, not for all of them.
    """

    def __len__(self) -> int: ...

    def number(self, i: int) -> int:
        """The 1-based line number of the i-th matching line."""
        ...

    def text(self, i: int) -> str:
        """The i-th matching line's text."""
        ...

    def texts(self) -> list[str]:
        """Every matching line's text, in order (without match ranges)."""
        ...

    def match(self, i: int) -> LineMatch:
        """The i-th matching line with its match ranges."""
        ...

    def first_range(self, i: int) -> tuple[bytes, int, int] | None:
        """The i-th line's bytes and its first match range, when that is cheaper than `match` and the same
        as `match(i)`'s text encoded and first range (an ASCII line); None otherwise."""
        ...


class RowLines:
    """A LineSource over lines as JSON rows `[number, text, [[start, end], ...]]` (what a searcher replica sends,
    search/wire.py): the web tier renders them as they came, without a LineMatch per line in between."""

    __slots__ = ("rows",)

    def __init__(self, rows: list[list[Any]]) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def number(self, i: int) -> int:
        return int(self.rows[i][0])

    def text(self, i: int) -> str:
        return str(self.rows[i][1])

    def texts(self) -> list[str]:
        return [str(row[1]) for row in self.rows]

    def match(self, i: int) -> LineMatch:
        number, text, ranges = self.rows[i]
        return LineMatch(int(number), str(text), [(int(a), int(b)) for a, b in ranges])

    def first_range(self, i: int) -> tuple[bytes, int, int] | None:
        return None


class RawFile:
    """A LineSource over one file as the REST answer gives it (`{"repository", ..., "lineMatches"}`), as a searcher
    replica sent it (search/wire.py): the REST route copies the bytes into its answer (`FileMatch.rest_fragment`)
    without decoding them; anything that reads a line decodes the file once."""

    __slots__ = ("_rows", "count", "raw")

    def __init__(self, raw: bytes, count: int) -> None:
        self.raw = raw
        self.count = count
        self._rows: list[dict[str, Any]] | None = None

    def rows(self) -> list[dict[str, Any]]:
        if self._rows is None:
            whole = orjson.loads(self.raw)
            rows = whole.get("lineMatches") if isinstance(whole, dict) else None
            if not isinstance(rows, list) or len(rows) != self.count:
                raise ValueError("a replica's lines do not match their count")
            self._rows = rows
        return self._rows

    def __len__(self) -> int:
        return self.count

    def number(self, i: int) -> int:
        return int(self.rows()[i]["lineNumber"])

    def text(self, i: int) -> str:
        return str(self.rows()[i]["line"])

    def texts(self) -> list[str]:
        return [str(row["line"]) for row in self.rows()]

    def match(self, i: int) -> LineMatch:
        row = self.rows()[i]
        return LineMatch(int(row["lineNumber"]), str(row["line"]), [(int(a), int(b)) for a, b in row["ranges"]])

    def first_range(self, i: int) -> tuple[bytes, int, int] | None:
        return None


def lines_json(matches: list[LineMatch]) -> list[dict[str, Any]]:
    """Lines as the REST answer gives them (`lineMatches`)."""
    return [{"lineNumber": m.line_number, "line": m.line, "ranges": [list(r) for r in m.ranges]} for m in matches]


class FileMatch:
    """A matching file; `line_matches` is empty for path-only matches.

    Its lines are either a list or a `LineSource` that `line_matches` reads in full on first use; `line_count`,
    `line_number`, `line_text` and `line_match` answer without reading the other lines.
    """

    __slots__ = (
        "_lines",
        "_source",
        "commit",
        "labels",
        "language",
        "order",
        "path",
        "path_match",
        "repo",
        "score",
    )

    def __init__(
        self,
        repo: str,
        path: str,
        commit: str,
        language: str,
        line_matches: list[LineMatch] | None = None,
        path_match: bool = False,
        score: float = 0.0,
        labels: dict[int, str] | None = None,
        *,
        source: LineSource | None = None,
    ) -> None:
        self.repo = repo
        self.path = path
        self.commit = commit
        self.language = language
        self._lines: list[LineMatch] | None = line_matches if line_matches is not None or source is not None else []
        self._source = source if line_matches is None else None
        self.path_match = path_match
        self.score = score
        # type:symbol matches: line number → what the line defines (`method Config.load`); empty for text matches.
        self.labels: dict[int, str] = {} if labels is None else labels
        # The key its list was sorted by (ranking's tiers, or a symbol's closeness): answers from several
        # searcher replicas merge into the order one process would give (search/cluster.py).
        self.order: tuple[Any, ...] = ()

    @property
    def line_matches(self) -> list[LineMatch]:
        if self._lines is None:
            source = self._source
            assert source is not None
            self._lines = [source.match(i) for i in range(len(source))]
            self._source = None
        return self._lines

    @line_matches.setter
    def line_matches(self, value: list[LineMatch]) -> None:
        self._lines = value
        self._source = None

    @property
    def line_count(self) -> int:
        """How many matching lines, without reading them."""
        return len(self._lines) if self._lines is not None else len(self._source or ())

    def line_number(self, i: int) -> int:
        return self._lines[i].line_number if self._lines is not None else self._read().number(i)

    def line_text(self, i: int) -> str:
        return self._lines[i].line if self._lines is not None else self._read().text(i)

    def line_texts(self) -> list[str]:
        """Every matching line's text, without reading match ranges."""
        return [m.line for m in self._lines] if self._lines is not None else self._read().texts()

    def first_range(self, i: int) -> tuple[bytes, int, int] | None:
        """Line i's bytes and first match range when its source has them cheaply (`LineSource.first_range`)."""
        return None if self._lines is not None else self._read().first_range(i)

    def line_match(self, i: int) -> LineMatch:
        return self._lines[i] if self._lines is not None else self._read().match(i)

    def lines_json(self) -> list[dict[str, Any]]:
        """The lines as the REST answer gives them (`lineMatches`)."""
        if self._lines is None and isinstance(self._source, RowLines):
            return [{"lineNumber": n, "line": text, "ranges": ranges} for n, text, ranges in self._source.rows]
        if self._lines is None and isinstance(self._source, RawFile):
            return self._source.rows()
        return lines_json(self.line_matches)

    def rest_fragment(self) -> orjson.Fragment | None:
        """The whole file in the REST answer as a replica sent it (`RawFile`), for orjson: neither decoded nor
        encoded again here. None when its lines are not those bytes."""
        if self._lines is None and isinstance(self._source, RawFile):
            return orjson.Fragment(self._source.raw)
        return None

    def _read(self) -> LineSource:
        assert self._source is not None
        return self._source

    def _fields(self) -> tuple[Any, ...]:
        return (
            self.repo,
            self.path,
            self.commit,
            self.language,
            self.line_matches,
            self.path_match,
            self.score,
            self.labels,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FileMatch):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass it replaces

    def __repr__(self) -> str:
        return (
            f"FileMatch(repo={self.repo!r}, path={self.path!r}, commit={self.commit!r}, language={self.language!r}, "
            f"line_matches={self.line_matches!r}, path_match={self.path_match!r}, score={self.score!r}, "
            f"labels={self.labels!r})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled with its lines read: a LineSource holds a mapped shard, which does not travel.
        return (FileMatch, self._fields())


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
    # Readable repositories a searcher replica that did not answer holds: the answer is partial without them.
    unsearched: list[str] = field(default_factory=list)

    def to_json(self, *, fragments: bool = False) -> dict[str, Any]:
        """The REST answer. `fragments`: for orjson only, with a replica's files as the bytes it sent."""
        return {
            "matchCount": self.match_count,
            "limitHit": self.limit_hit,
            "timedOut": self.timed_out,
            "skipped": self.skipped,
            "durationMs": round(self.duration_ms, 2),
            **({"unsearched": self.unsearched} if self.unsearched else {}),
            "files": [
                fragment if fragments and (fragment := f.rest_fragment()) is not None else file_json(f)
                for f in self.files
            ],
        }


def file_json(f: FileMatch) -> dict[str, Any]:
    """One file of the REST answer (a replica frames each file so, search/wire.py)."""
    return {
        "repository": f.repo,
        "path": f.path,
        "commit": f.commit,
        "language": f.language,
        "pathMatch": f.path_match,
        **({"symbols": {str(n): label for n, label in f.labels.items()}} if f.labels else {}),
        "lineMatches": f.lines_json(),
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
