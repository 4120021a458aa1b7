"""The lexical index of natural-language search: chunks of one repository revision, tokenized, scored by BM25.

A chunk is a function, method or class where codenav gives symbol boundaries, a window of ~40 lines elsewhere,
and a whole file when the file is small. Each chunk's tokens come from its fields, boosted by repetition
(bm25s has one field): symbol names and path count more than the body. Tokens are lower-cased identifier words
(`parseHTTPRequest` → parse http request), each Snowball-stemmed, plus each compound identifier kept whole.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import bm25s
import numpy as np
import Stemmer

__all__ = ["Chunk", "NlsIndex", "SourceFile", "build", "chunk_file", "exists", "load", "terms"]

WINDOW = 40
# Files up to this many lines are one chunk: splitting them loses more context than it gains precision.
SMALL_FILE_LINES = 80
MAX_FILE_BYTES = 1 << 20
# Field boosts, as repetitions of the field's tokens (symbol names and path above the body).
SYMBOL_BOOST = 3
PATH_BOOST = 2
COMMENT_BOOST = 1

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
# The rest of a line after its first comment mark; over a whole text, one match per line at most.
_COMMENT = re.compile(r"(?:#|//|/\*|\*|\"\"\"|''')[^\S\n]*(.*)")
_STEMMER = Stemmer.Stemmer("english")

# English function words plus words every program is full of (keywords, `self`): they carry no meaning here.
STOP_WORDS = frozenset(
    """a an and are as at be been but by can could do does did for from has have how i if in into is it its
    me my of on or should so than that the their them then there these they this those to was we were what
    when where which while who whom why will with would you your all any some not no yes also just only via
    def self cls return none null nil true false var let const func fn function class public private static
    void int str import include package else elif end begin new this use used using get set""".split()  # noqa: SIM905
)
QUESTION_WORDS = frozenset("what where which who whom whose why how when does do is are can find show".split())  # noqa: SIM905


def split_identifier(ident: str) -> list[str]:
    """`parseHTTPRequest` → [parse, http, request]; `snake_case` → [snake, case]."""
    return [w.lower() for part in ident.split("_") for w in _WORD.findall(part)]


def _stem(words: Iterable[str]) -> list[str]:
    return list(_STEMMER.stemWords(list(words)))


@functools.lru_cache(maxsize=1 << 18)
def _identifier_tokens(ident: str) -> tuple[str, ...]:
    # Cached: a code base repeats the same identifiers all over, and splitting + stemming is most of build time.
    words = split_identifier(ident)
    whole = (ident.lower(),) if len(words) > 1 else ()
    return whole + tuple(_stem(w for w in words if w not in STOP_WORDS and len(w) > 1))


def terms(text: str) -> list[str]:
    """Index tokens of `text`: stemmed identifier words, and compound identifiers whole (lower-cased)."""
    # map + chain: the per-identifier loop runs in C (the cache lookup is C too); this is the build's hot path.
    return list(itertools.chain.from_iterable(map(_identifier_tokens, _IDENT.findall(text))))


@dataclass(frozen=True, slots=True)
class Chunk:
    path: str
    start: int  # 1-based, inclusive
    end: int  # inclusive
    symbols: tuple[str, ...]


def _windows(start: int, end: int, lines: list[str]) -> Iterator[tuple[int, int]]:
    line = start
    while line <= end:
        stop = min(end, line + WINDOW - 1)
        if end - stop < WINDOW // 4:  # no tiny tail window: fold it into this one
            stop = end
        if any(lines[i - 1].strip() for i in range(line, stop + 1)):
            yield line, stop
        line = stop + 1


def chunk_file(path: str, lines: list[str], spans: list[tuple[int, int, str]]) -> list[Chunk]:
    """Chunks of one file from its definitions' (start, end, qualified name) spans (possibly none)."""
    if not lines:
        return []
    if len(lines) <= SMALL_FILE_LINES:
        return [Chunk(path, 1, len(lines), tuple(name for _, _, name in spans))]
    chunks: list[Chunk] = []
    covered = 0
    # Outermost definitions of up to ~3 windows become chunks; a bigger one (a long class) is split into its
    # members, which come next in the sorted spans.
    for start, end, name in sorted(spans):
        if start <= covered or end > len(lines):
            continue
        if end - start + 1 > 3 * WINDOW and any(s > start and e <= end for s, e, _ in spans):
            continue
        if start > covered + 1:
            chunks.extend(Chunk(path, a, b, ()) for a, b in _windows(covered + 1, start - 1, lines))
        chunks.append(Chunk(path, start, end, (name,)))
        covered = end
    if covered < len(lines):
        chunks.extend(Chunk(path, a, b, ()) for a, b in _windows(covered + 1, len(lines), lines))
    return chunks


def chunk_tokens(chunk: Chunk, lines: list[str]) -> list[str]:
    body = lines[chunk.start - 1 : chunk.end]
    text = "\n".join(body)
    comments = " ".join(_COMMENT.findall(text))
    tokens = terms(text)
    tokens += terms(comments) * COMMENT_BOOST
    tokens += terms(chunk.path) * PATH_BOOST
    tokens += terms(" ".join(chunk.symbols)) * SYMBOL_BOOST
    return tokens or ["\x00empty"]


# Columns of the chunk table (`chunks.npy`, int64, memory-mapped): the file (index into `paths`/`blobs`), the first
# and last line, and the chunk's byte range in the blob, so a query reads only the bytes of its candidates.
PATH, START, END, BYTE_START, BYTE_END = range(5)
FORMAT = 2
_TABLE = "chunks.npy"
_FILES = "files.json"


class NlsIndex:
    """A loaded index: the BM25 model and the chunk table (read-only, shared between threads)."""

    def __init__(
        self,
        model: bm25s.BM25,
        table: np.ndarray,
        paths: list[str],
        blobs: list[str],
        symbols: dict[int, tuple[str, ...]],
    ) -> None:
        self.model = model
        self.table = table
        self.paths = paths
        self.blobs = blobs
        self.symbols = symbols

    def __len__(self) -> int:
        return len(self.table)

    def chunk(self, i: int) -> Chunk:
        row = self.table[i]
        return Chunk(self.paths[int(row[PATH])], int(row[START]), int(row[END]), self.symbols.get(i, ()))

    def scores(self, query: list[str]) -> np.ndarray:
        known = [t for t in query if t in self.model.vocab_dict]
        if not known:
            return np.zeros(len(self.table), dtype=np.float32)
        return np.asarray(self.model.get_scores(known), dtype=np.float32)

    def path_mask(self, pattern: re.Pattern[str]) -> np.ndarray:
        """Per chunk: does its path match `pattern` (each distinct path tested once)."""
        matching = np.fromiter((bool(pattern.search(p)) for p in self.paths), dtype=bool, count=len(self.paths))
        mask: np.ndarray = matching[self.table[:, PATH]]
        return mask


@dataclass(frozen=True, slots=True)
class SourceFile:
    path: str
    blob: str  # hex object id
    data: bytes
    lines: list[str]  # `data` decoded and split at \n (a final empty line dropped)
    spans: list[tuple[int, int, str]]  # definitions: (start, end, qualified name)


def _line_starts(data: bytes) -> np.ndarray:
    """Byte offset of the start of every line of `data`, plus len(data) at the end."""
    newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10) + 1
    return np.concatenate(([0], newlines[newlines < len(data)], [len(data)]))


def build(folder: Path, files: Iterable[SourceFile]) -> int:
    """Write the index of `files` into `folder` atomically; returns the number of chunks."""
    paths: list[str] = []
    blobs: list[str] = []
    rows: list[tuple[int, int, int, int, int]] = []
    symbols: list[tuple[int, list[str]]] = []
    corpus: list[list[str]] = []
    for f in files:
        chunks = chunk_file(f.path, f.lines, f.spans)
        if not chunks:
            continue
        file_id = len(paths)
        paths.append(f.path)
        blobs.append(f.blob)
        starts = _line_starts(f.data)
        for chunk in chunks:
            if chunk.symbols:
                symbols.append((len(rows), list(chunk.symbols)))
            end = int(starts[chunk.end]) if chunk.end < len(starts) else len(f.data)
            rows.append((file_id, chunk.start, chunk.end, int(starts[chunk.start - 1]), end))
            corpus.append(chunk_tokens(chunk, f.lines))
    if not corpus:
        corpus.append(["\x00empty"])
        paths.append("")
        blobs.append("")
        rows.append((0, 1, 0, 0, 0))
    model = bm25s.BM25()
    model.index(corpus, show_progress=False)
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.save(str(tmp / "bm25"))
    np.save(tmp / _TABLE, np.asarray(rows, dtype=np.int64).reshape(-1, 5))
    # Written last: its presence says the index is complete.
    (tmp / _FILES).write_text(json.dumps({"format": FORMAT, "paths": paths, "blobs": blobs, "symbols": symbols}))
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    return len(rows)


def exists(folder: Path) -> bool:
    return (folder / _FILES).is_file()


def load(folder: Path) -> NlsIndex | None:
    """The index in `folder`, or None when it is missing or written in another format."""
    if not exists(folder):
        return None
    raw = json.loads((folder / _FILES).read_text())
    if raw.get("format") != FORMAT:
        return None
    model = bm25s.BM25.load(str(folder / "bm25"), mmap=True)
    table = np.load(folder / _TABLE, mmap_mode="r")
    symbols = {int(i): tuple(names) for i, names in raw["symbols"]}
    return NlsIndex(model, table, raw["paths"], raw["blobs"], symbols)
