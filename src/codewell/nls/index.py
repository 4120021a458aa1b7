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
import mmap
import re
import shutil
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import bm25s
import numpy as np
import Stemmer

from codewell.nls.native import PACKED_VOCAB, NativeCorpus, available, narrow_indptr, pack_vocab

__all__ = [
    "Chunk",
    "ChunkTexts",
    "NlsIndex",
    "SourceFile",
    "build",
    "chunk_file",
    "exists",
    "indexable",
    "is_current",
    "load",
    "load_model",
    "source_lines",
    "terms",
]

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
# The build's: it stems each distinct word once (the C counter remembers the result), so PyStemmer's cache of
# recent words would only cost (its purges scanned it every few thousand new words: 3x the stemming itself).
_BUILD_STEMMER = Stemmer.Stemmer("english", 0)

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


def _word_token(word: str) -> str | None:
    """The token of one lower-cased identifier word; None for a stop word or a single letter (never indexed)."""
    return None if word in STOP_WORDS or len(word) <= 1 else str(_BUILD_STEMMER.stemWord(word))


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
        if any(map(str.strip, lines[line - 1 : stop])):  # map: the loop over the window's lines runs in C
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
_ROW_BYTES = 5 * 8
_WEIGHTS = (COMMENT_BOOST, PATH_BOOST, SYMBOL_BOOST)
# 3: every indexed file's bytes stored (`texts.bin` + `texts.npy`), so a query reads no blob: the boosts match the
# candidates' text, the answer shows the hits' lines. 4: the same bytes, each chunk's compressed on its own (raw
# deflate). 5: no texts stored: a query reads its candidates' bytes from search's shard, which holds every file of
# the indexed commit already (git for the few files it holds no bytes of, or when it no longer holds the commit),
# and the chunk table is int32 (every column is a line number, a byte offset within a file of at most 1 MiB, or a
# file number), as are bm25s's column pointers, and bm25s's vocabulary is deflated (native.PACKED_VOCAB). On the Linux
# tree the stored texts were 381 of format 4's 1,125 MB. Indexes of formats 2, 3 and 4
# are still read (a format 2 query reads the candidates' blobs, as before) and are rebuilt at the next indexing.
FORMAT = 5
_READABLE_FORMATS = frozenset({2, 3, 4, FORMAT})
_TABLE = "chunks.npy"
# bm25s's column pointers (one per term, 4M on the Linux tree): int32 since format 5, where bm25s writes int64.
_INDPTR = "indptr.csc.index.npy"
_FILES = "files.json"
_TEXTS = "texts.bin"
_TEXT_STARTS = "texts.npy"


def decode_lines(raw: bytes, count: int) -> list[str]:
    """The first `count` lines of a chunk's bytes, decoded (invalid UTF-8 replaced), without their CR."""
    return [line.removesuffix("\r") for line in raw.decode("utf-8", "replace").split("\n")][:count]


class ChunkTexts:
    """The text of every chunk, read from an index of format 3 or 4 instead of the blob (format 5 stores none).

    Format 4 stored every chunk's bytes compressed on its own (raw deflate), end to end in chunk order (`texts.bin`,
    memory-mapped when loaded), and where each chunk's starts (`texts.npy`, one more than chunks). Format 3 stored
    every indexed file's bytes uncompressed and `texts.npy` held where each file starts: a chunk's bytes were its
    file's start plus the chunk's byte range in the chunk table. `texts[i]` is chunk i's lower-cased text (its lines
    joined by newlines, UTF-8).
    """

    def __init__(self, data: mmap.mmap | bytes, starts: np.ndarray, table: np.ndarray, *, per_chunk: bool) -> None:
        self._data = data
        self.starts = starts
        self._table = table
        self._per_chunk = per_chunk

    def __len__(self) -> int:
        return len(self._table)

    def raw(self, chunk: int, file_id: int, byte_start: int, byte_end: int) -> bytes:
        """The bytes of chunk `chunk`: `byte_start:byte_end` of file `file_id` (its row of the chunk table)."""
        if self._per_chunk:
            return zlib.decompress(self._data[int(self.starts[chunk]) : int(self.starts[chunk + 1])], -15)
        base = int(self.starts[file_id])
        return self._data[base + byte_start : base + byte_end]

    def lines(self, chunk: int) -> list[str]:
        file_id, start, end, byte_start, byte_end = self._table[chunk].tolist()
        return decode_lines(self.raw(chunk, file_id, byte_start, byte_end), end - start + 1)

    def __getitem__(self, chunk: int) -> bytes:
        return "\n".join(self.lines(chunk)).lower().encode()

    @classmethod
    def open(cls, folder: Path, table: np.ndarray, *, per_chunk: bool = True) -> ChunkTexts:
        """The texts of the index in `folder` (`per_chunk`: of format 4; format 3 stored whole files)."""
        starts = np.load(folder / _TEXT_STARTS)
        with (folder / _TEXTS).open("rb") as f:
            # mmap cannot map an empty file (an index of empty files only).
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if starts[-1] else b""
        return cls(data, starts, table, per_chunk=per_chunk)


class NlsIndex:
    """A loaded index: the BM25 model and the chunk table (read-only, shared between threads)."""

    def __init__(
        self,
        model: bm25s.BM25,
        table: np.ndarray,
        paths: list[str],
        blobs: list[str],
        symbols: dict[int, tuple[str, ...]],
        texts: ChunkTexts | None = None,
        format: int = 5,
    ) -> None:
        self.model = model
        self.table = table
        self.paths = paths
        self.blobs = blobs
        self.symbols = symbols
        # None but for an index of format 3 or 4: format 5 reads the chunks' bytes from search's shard (the caller's:
        # nls/service.py), format 2 (read compatibly) from the candidates' blobs.
        self.texts = texts
        self.format = format
        self._path_terms: dict[int, frozenset[str]] = {}
        self._symbol_terms: dict[int, frozenset[str]] = {}

    def __len__(self) -> int:
        return len(self.table)

    @property
    def lower(self) -> ChunkTexts | None:
        """The chunks' lower-cased texts (`lower[i]`), when the index stores the texts (formats 3 and 4 only)."""
        return self.texts

    def chunk(self, i: int) -> Chunk:
        row = self.table[i]
        return Chunk(self.paths[int(row[PATH])], int(row[START]), int(row[END]), self.symbols.get(i, ()))

    def path_terms(self, file_id: int) -> frozenset[str]:
        """The index tokens of a file's path (computed once per file: every chunk of the file shares them)."""
        found = self._path_terms.get(file_id)
        if found is None:
            found = self._path_terms[file_id] = frozenset(terms(self.paths[file_id]))
        return found

    def symbol_terms(self, chunk: int) -> frozenset[str]:
        """The index tokens of a chunk's symbol names (computed once per chunk asked for)."""
        found = self._symbol_terms.get(chunk)
        if found is None:
            found = self._symbol_terms[chunk] = frozenset(terms(" ".join(self.symbols.get(chunk, ()))))
        return found

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
    data: bytes | memoryview  # the blob's bytes (a view of search's shard, or read from git)
    spans: list[tuple[int, int, str]]  # definitions: (start, end, qualified name), in codenav's order


def indexable(data: bytes | memoryview) -> bool:
    """Is a file's content indexed: not over MAX_FILE_BYTES, and no NUL in its first 8000 bytes (binary)."""
    return len(data) <= MAX_FILE_BYTES and b"\x00" not in bytes(data[:8000])


def source_lines(data: bytes | memoryview) -> list[str]:
    """A file's lines as chunking sees them: decoded (invalid UTF-8 replaced), split at \\n, a final empty line
    dropped, each without its CR."""
    lines = bytes(data).decode("utf-8", "replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _line_starts(data: bytes) -> np.ndarray:
    """Byte offset of the start of every line of `data`, plus len(data) at the end."""
    newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10) + 1
    return np.concatenate(([0], newlines[newlines < len(data)], [len(data)]))


def _chunk_bytes(data: bytes, lines: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Each chunk's (first line, last line) as the byte range of those lines in `data`, last newline included."""
    starts = _line_starts(data).tolist()
    return [(starts[first - 1], starts[last] if last < len(starts) else len(data)) for first, last in lines]


class _Chunks:
    """What the build collects file by file: the indexed files, the chunk table, the chunks' symbol names, and
    the terms counted, by the C counter (`native`) or as token lists for bm25s (the Python path)."""

    def __init__(self, native: NativeCorpus | None, symbols: TextIO) -> None:
        self.native = native
        self.paths: list[str] = []
        self.blobs: list[str] = []
        # The chunks' symbol names, (row, names) as files.json lists them, written out file by file as JSON list
        # items: kept to the end they were ~0.2 GB of the Linux build's peak (a million tuples of strings).
        self._symbols = symbols
        self._symbols_written = False
        self.rows = 0
        self._table: list[bytes] = []  # native: per file the rows the counter returns (int32 here, 5 columns)
        self._rows: list[tuple[int, int, int, int, int]] = []  # Python
        self.corpus: list[list[str]] = []  # Python

    def add(self, f: SourceFile) -> bool:
        """Chunk and count file `f`; False when it has no chunk (nothing added)."""
        if self.native is not None:
            # One call chunks the file on its bytes (chunk_file's rules) and counts the chunks' terms.
            raw, named = self.native.add_source(f.data, f.spans, f.path, len(self.paths), self.rows, _WEIGHTS)
            if not raw:
                return False
            self._table.append(np.frombuffer(raw, dtype=np.int64).astype(np.int32).tobytes())
            self._write_symbols(named)
            self.rows += len(raw) // _ROW_BYTES
        else:
            lines = source_lines(f.data)
            chunks = chunk_file(f.path, lines, f.spans)
            if not chunks:
                return False
            ranges = _chunk_bytes(bytes(f.data), [(chunk.start, chunk.end) for chunk in chunks])
            self._write_symbols([(self.rows + k, chunk.symbols) for k, chunk in enumerate(chunks) if chunk.symbols])
            for chunk, (byte_start, byte_end) in zip(chunks, ranges, strict=True):
                self._rows.append((len(self.paths), chunk.start, chunk.end, byte_start, byte_end))
                self.corpus.append(chunk_tokens(chunk, lines))
                self.rows += 1
        self.paths.append(f.path)
        self.blobs.append(f.blob)
        return True

    def _write_symbols(self, named: list[tuple[int, tuple[str, ...]]]) -> None:
        """(row, names) of a file's chunks that have names, as items of files.json's `symbols` list (json.dumps's
        separators, so the file reads as if the whole list had been dumped at once)."""
        if named:
            self._symbols.write((", " if self._symbols_written else "") + json.dumps(named)[1:-1])
            self._symbols_written = True

    def add_placeholder(self) -> None:
        """The one empty chunk of an index without any (bm25s needs a document)."""
        self.paths.append("")
        self.blobs.append("")
        self._rows.append((0, 1, 0, 0, 0))
        self._table.append(np.asarray(self._rows, dtype=np.int32).tobytes())
        self.corpus.append(["\x00empty"])
        if self.native is not None:
            self.native.add_file(b"", [(0, 0)], "", [""], _WEIGHTS)
        self.rows = 1

    def table(self) -> np.ndarray:
        """The chunk table as stored: int32 (format 5; the counter's rows are int64)."""
        if self.native is not None:
            return np.frombuffer(b"".join(self._table), dtype=np.int32).reshape(-1, 5)
        return np.asarray(self._rows, dtype=np.int32).reshape(-1, 5)

    def save(self, folder: Path) -> None:
        """The BM25 model of the chunks, written as bm25s saves it (but for `_INDPTR`'s type: see there)."""
        if self.native is not None:
            self.native.save(folder)
            return
        model = bm25s.BM25()
        model.index(self.corpus, show_progress=False)
        model.save(str(folder))
        np.save(folder / _INDPTR, narrow_indptr(np.load(folder / _INDPTR)))
        pack_vocab(folder)


def build(folder: Path, files: Iterable[SourceFile]) -> int:
    """Write the index of `files` into `folder` atomically (files that are not `indexable` left out); returns the
    number of chunks."""
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    symbols = tmp / "symbols.part"
    with symbols.open("w") as symbols_out:
        # The C counter when built (nls/native.py): the same model as chunk_tokens + bm25s, ~10x cheaper.
        chunks = _Chunks(NativeCorpus(_word_token, "\x00empty") if available() else None, symbols_out)
        for f in files:
            if indexable(f.data):
                chunks.add(f)
        if not chunks.rows:
            chunks.add_placeholder()
    chunks.save(tmp / "bm25")
    np.save(tmp / _TABLE, chunks.table())
    # Written last: its presence says the index is complete. The same text as json.dumps of the whole object.
    with (tmp / "files.part").open("w") as out, symbols.open() as items:
        out.write(json.dumps({"format": FORMAT, "paths": chunks.paths, "blobs": chunks.blobs})[:-1] + ', "symbols": [')
        shutil.copyfileobj(items, out)
        out.write("]}")
    symbols.unlink()
    (tmp / "files.part").rename(tmp / _FILES)
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    return chunks.rows


def exists(folder: Path) -> bool:
    return (folder / _FILES).is_file()


def _format(folder: Path) -> object:
    return json.loads((folder / _FILES).read_text()).get("format")


def is_current(folder: Path) -> bool:
    """Is there a complete index in `folder` written in this format (an older one is rebuilt by the indexer)."""
    return exists(folder) and _format(folder) == FORMAT


def load_model(folder: Path) -> bm25s.BM25:
    """The bm25s model in `folder`, its arrays memory-mapped; its vocabulary deflated (format 5) or as bm25s saves
    it (older formats)."""
    packed = folder / PACKED_VOCAB
    if not packed.exists():
        return bm25s.BM25.load(str(folder), mmap=True)
    model = bm25s.BM25.load(str(folder), mmap=True, load_vocab=False)
    # What bm25s.BM25.load sets from the vocabulary it reads.
    model.vocab_dict = json.loads(zlib.decompress(packed.read_bytes()))
    model.unique_token_ids_set = set(model.vocab_dict.values())
    return model


def load(folder: Path) -> NlsIndex | None:
    """The index in `folder`, or None when it is missing or written in a format this version cannot read."""
    if not exists(folder):
        return None
    raw = json.loads((folder / _FILES).read_text())
    if raw.get("format") not in _READABLE_FORMATS:
        return None
    model = load_model(folder / "bm25")
    table = np.load(folder / _TABLE, mmap_mode="r")
    symbols = {int(i): tuple(names) for i, names in raw["symbols"]}
    texts = ChunkTexts.open(folder, table, per_chunk=raw["format"] == 4) if raw["format"] in (3, 4) else None
    return NlsIndex(model, table, raw["paths"], raw["blobs"], symbols, texts, raw["format"])
