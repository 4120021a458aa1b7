"""Dense ranking of nls (site config `search.nls.dense`): chunk embeddings fused with BM25 by reciprocal rank.

Build: after a revision's chunk index exists, every chunk (its path, symbol names and first lines, cut at
`CHUNK_TOKENS` tokens) is embedded by all-MiniLM-L6-v2 (nls/encoder.py) in slices, and the vectors are written as
float16 into `dense.npy` in the index folder (removed with the folder). Query: the question's content words are
embedded, cosine against every chunk (memory-mapped, in blocks), and the top `CANDIDATES` of BM25 and of cosine
are fused by reciprocal rank (1/(RRF_K + rank) each); nls's boosts then apply to the fused score as they do to
BM25's.

Storage (both rankers' files, `write_vectors` and `open_vectors`): a vectors file is written with plain writes,
never through a writable memory map (a page of a map the full disk cannot back is SIGBUS, which kills the
process with nothing in its log), to a temporary name that is synced and renamed only once complete; the free
space is checked before the (long) embedding starts. A full or read-only disk raises `StorageUnavailable` (the
job is retried later) and leaves no file behind. A file is read only when its size is exactly its header plus
its rows: one of another size (cut short by a crash, or changed under the server) is deleted, logged and built
again, never mapped (reading past the end of a mapped file is SIGBUS too).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar, Generic, TypeVar

import numpy as np
import pygit2

from codewell.core.errors import StorageUnavailable, Unavailable
from codewell.core.storage import storage_error
from codewell.nls.encoder import DIMENSIONS, Encoder
from codewell.nls.index import BYTE_END, BYTE_START, PATH, NlsIndex, load, terms
from codewell.nls.static import STATIC_DIMENSIONS, StaticEncoder, chunk_vectors

__all__ = [
    "CANDIDATES",
    "CHUNK_TOKENS",
    "RRF_K",
    "STATIC_VECTORS",
    "VECTORS",
    "DenseRanker",
    "StaticRanker",
    "chunk_text",
    "fuse_ranks",
    "open_vectors",
    "write_vectors",
]

log = logging.getLogger(__name__)

VECTORS = "dense.npy"
RRF_K = 60
CANDIDATES = 200
# Tokens embedded per chunk (the model takes 256): the cost of a chunk grows with its length, and the first lines
# (signature, leading comment) say the most about what it does. Measured in docs/nls.md, "Dense ranking".
CHUNK_TOKENS = 128
# Chunks read and embedded at a time: bounds the texts held in memory on a big revision.
SLICE = 2048
# Rows of the vector file converted to float32 at a time when scoring a question.
_BLOCK = 1 << 16


def chunk_text(path: str, symbols: tuple[str, ...], body: str) -> str:
    """What is embedded for a chunk: its path and symbol names, then its text."""
    head = f"{path} {' '.join(symbols)}".strip()
    return f"{head}\n{body}"


def fuse_ranks(lexical: np.ndarray, dense: np.ndarray, candidates: int = CANDIDATES) -> np.ndarray:
    """Reciprocal-rank fusion of two score vectors: each one's top `candidates` (lexical: scores > 0) add
    1/(RRF_K + rank); every other chunk scores 0."""
    fused = np.zeros(len(lexical), dtype=np.float32)
    for scores, positive_only in ((lexical, True), (dense, False)):
        top = min(candidates, len(scores))
        if top == 0:
            continue
        picked = np.argpartition(-scores, top - 1)[:top] if top < len(scores) else np.arange(len(scores))
        order = picked[np.argsort(-scores[picked], kind="stable")]
        order = order[scores[order] > 0] if positive_only else order[np.isfinite(scores[order])]
        fused[order] += (1.0 / (RRF_K + np.arange(1, len(order) + 1))).astype(np.float32)
    return fused


_Encoder = TypeVar("_Encoder")


_DTYPE = np.dtype("<f2")
# Room left beside a vectors file when checking free space: the header, and file system metadata.
_SLACK = 1 << 16


def _header(rows: int, dimensions: int) -> bytes:
    """The .npy header (format 1.0) of a C-ordered float16 array of shape (rows, dimensions)."""
    header = {"descr": np.lib.format.dtype_to_descr(_DTYPE), "fortran_order": False, "shape": (rows, dimensions)}
    buffer = _Buffer()
    np.lib.format.write_array_header_1_0(buffer, header)
    return bytes(buffer.data)


class _Buffer:
    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> int:
        self.data += data
        return len(data)


def _expected_size(rows: int, dimensions: int) -> int:
    return len(_header(rows, dimensions)) + rows * dimensions * _DTYPE.itemsize


def check_room(folder: Path, rows: int, dimensions: int) -> None:
    """StorageUnavailable when the file system of `folder` has no room for a vectors file of `rows` rows (checked
    before the embedding, which takes minutes on a big revision, rather than after it)."""
    needed = _expected_size(rows, dimensions) + _SLACK
    free = shutil.disk_usage(folder).free
    if free < needed:
        raise StorageUnavailable(
            "data directory: no space left on device",
            f"nls vectors need {needed} bytes in {folder.name}, {free} free",
            retry_after=30,
        )


def write_vectors(path: Path, rows: int, dimensions: int, blocks: Iterator[np.ndarray]) -> None:
    """Write the float16 vectors `blocks` (consecutive row blocks, `rows` rows in all) as the .npy file `path`:
    plain writes to `<path>.tmp`, fsync, then rename, so that `path` exists only complete. A storage fault (full,
    read-only, I/O error) raises StorageUnavailable and leaves neither file; any other error leaves neither too."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        check_room(path.parent, rows, dimensions)
        written = 0
        with tmp.open("wb") as out:
            out.write(_header(rows, dimensions))
            for block in blocks:
                data = np.ascontiguousarray(block, dtype=_DTYPE)
                if data.ndim != 2 or data.shape[1] != dimensions:
                    raise ValueError(f"a block of shape {data.shape} in vectors of {dimensions} dimensions")
                out.write(data.tobytes())
                written += len(data)
            if written != rows:
                raise ValueError(f"{written} rows of vectors written, {rows} expected")
            out.flush()
            os.fsync(out.fileno())
        tmp.rename(path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        fault = storage_error(exc, path.parent) if isinstance(exc, OSError) else None
        if fault is not None:
            raise fault from None
        raise


def open_vectors(path: Path, rows: int, dimensions: int) -> np.ndarray | None:
    """The vectors file `path` memory-mapped read-only, or None when it is missing or was written for another
    index (another shape). A file whose size is not its header plus `rows` rows is deleted (and logged): it is
    cut short or grown under us, and mapping it could read past its end (SIGBUS); the next build writes it again."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return None
    try:
        vectors = np.load(path, mmap_mode="r")
    except (ValueError, OSError, EOFError) as exc:
        vectors, problem = None, f"unreadable ({exc})"
    else:
        if vectors.shape != (rows, dimensions) or vectors.dtype != _DTYPE:
            return None  # vectors of an older index of the same folder
        expected = int(vectors.offset) + rows * dimensions * _DTYPE.itemsize
        problem = "" if size == expected else f"{size} bytes where {expected} were written"
    if not problem:
        mapped: np.ndarray = vectors
        return mapped
    del vectors
    log.warning("nls vectors file refused and removed: %s", problem, extra={"path": str(path)})
    with contextlib.suppress(OSError):
        path.unlink()
    return None


class _VectorRanker(Generic[_Encoder]):
    """What both rankers share: an encoder loaded at first use, one vectors file (`VECTORS_FILE`) per index
    folder, and at most one build of it at a time."""

    VECTORS_FILE: ClassVar[str]

    def __init__(self, encoder_factory: Callable[[], _Encoder]) -> None:
        self._encoder_factory = encoder_factory
        self._encoder: _Encoder | None = None
        self._guard = threading.Lock()
        self._building: set[Path] = set()

    def encoder(self) -> _Encoder:
        """The encoder (loaded once, under a second); Unavailable when the model package is not installed."""
        with self._guard:
            if self._encoder is None:
                self._encoder = self._encoder_factory()
            return self._encoder

    DIMENSIONS: ClassVar[int]

    @classmethod
    def has_vectors(cls, folder: Path) -> bool:
        return (folder / cls.VECTORS_FILE).is_file()

    @classmethod
    def vectors(cls, folder: Path, index: NlsIndex) -> np.ndarray | None:
        """The vectors of `index` in `folder` (memory-mapped), or None: missing, of another index, or refused."""
        return open_vectors(folder / cls.VECTORS_FILE, len(index), cls.DIMENSIONS)

    @contextmanager
    def _build(self, folder: Path) -> Iterator[NlsIndex | None]:
        """The chunk index in `folder` to embed, or None when there is nothing to do: no index, its vectors
        already written (a refused file counts as none), or another thread writing them now."""
        index = load(folder)
        if index is None or self.vectors(folder, index) is not None:
            yield None
            return
        with self._guard:
            if folder in self._building:
                claimed = False
            else:
                self._building.add(folder)
                claimed = True
        if not claimed:
            yield None
            return
        try:
            yield index
        finally:
            with self._guard:
                self._building.discard(folder)


def _block_cosines(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    """`vectors @ query` a block at a time (float16 rows of a memory map, read as float32 block by block)."""
    out = np.empty(len(vectors), dtype=np.float32)
    for start in range(0, len(vectors), _BLOCK):
        out[start : start + _BLOCK] = np.asarray(vectors[start : start + _BLOCK], dtype=np.float32) @ query
    return out


class DenseRanker(_VectorRanker[Encoder]):
    """Builds and reads the chunk vectors of nls indexes; holds the encoder, loaded at first use."""

    VECTORS_FILE = VECTORS
    DIMENSIONS = DIMENSIONS

    def __init__(self, encoder_factory: Callable[[], Encoder] = Encoder.load) -> None:
        super().__init__(encoder_factory)

    def embed(self, folder: Path, mirror_path: Path, progress: Callable[[int, int], None] | None = None) -> int:
        """Write the vectors of the chunk index in `folder` unless they exist (or it does not); the number of
        chunks embedded. The chunks' text comes from the index's stored texts, or for an index of format 2 from
        the blobs of the mirror at `mirror_path`."""
        with self._build(folder) as index:
            if index is None:
                return 0
            encoder = self.encoder()
            check_room(folder, len(index), DIMENSIONS)  # before minutes of embedding, not after
            mirror = pygit2.Repository(str(mirror_path))
            write_vectors(folder / VECTORS, len(index), DIMENSIONS, self._slices(index, encoder, mirror, progress))
            return len(index)

    def _slices(
        self,
        index: NlsIndex,
        encoder: Encoder,
        mirror: pygit2.Repository,
        progress: Callable[[int, int], None] | None,
    ) -> Iterator[np.ndarray]:
        """The vectors of the index's chunks, SLICE chunks at a time."""
        started = time.perf_counter()
        blob: tuple[int, bytes] = (-1, b"")
        for first in range(0, len(index), SLICE):
            texts: list[str] = []
            for i in range(first, min(len(index), first + SLICE)):
                if index.lower is not None:
                    # The stored lower-cased text: the model lower-cases anyway (an uncased BERT).
                    body = index.lower[i].decode("utf-8", "replace")
                else:
                    row = index.table[i].tolist()
                    if blob[0] != row[PATH]:
                        blob = (row[PATH], self._read(mirror, index.blobs[row[PATH]]))
                    body = blob[1][row[BYTE_START] : row[BYTE_END]].decode("utf-8", "replace")
                chunk = index.chunk(i)
                texts.append(chunk_text(chunk.path, chunk.symbols, body))
            yield encoder.encode(texts, max_tokens=CHUNK_TOKENS)
            done = first + len(texts)
            if progress is not None:
                progress(done, len(index))
            log.info(
                "nls dense vectors",
                extra={"chunks": done, "of": len(index), "seconds": round(time.perf_counter() - started, 1)},
            )

    @staticmethod
    def _read(mirror: pygit2.Repository, blob: str) -> bytes:
        if not blob:  # the placeholder row of an empty index
            return b""
        data: bytes = mirror.odb.read(pygit2.Oid(hex=blob))[1]
        return data

    def cosines(self, folder: Path, index: NlsIndex, question: str) -> np.ndarray | None:
        """Cosine of `question` with every chunk of the index in `folder`, or None without (matching) vectors."""
        vectors = self.vectors(folder, index)
        if vectors is None:
            return None
        return _block_cosines(vectors, self.encoder().encode([question])[0])

    def fuse(
        self, folder: Path, index: NlsIndex, question: str, scores: np.ndarray, file: re.Pattern[str] | None
    ) -> np.ndarray:
        """BM25 `scores` (already restricted to `file:`) fused with the question's cosines; `scores` unchanged
        when the index has no vectors, or when the model package is gone (logged: BM25 still answers)."""
        try:
            cosines = self.cosines(folder, index, question)
        except Unavailable as exc:
            log.warning("nls dense ranking skipped: %s", exc)
            return scores
        if cosines is None:
            return scores
        if file is not None:
            cosines = np.where(index.path_mask(file), cosines, -np.inf)
        return fuse_ranks(scores, cosines)


STATIC_VECTORS = "static.npy"
# The static ranking's share of a fused score (BM25 scaled to the best chunk's 1.0, plus STATIC_WEIGHT times the
# cosine when positive), and the BM25 candidates it re-ranks: measured by bench/nls_bench.py --dense (docs/nls.md).
STATIC_WEIGHT = 0.75
STATIC_CANDIDATES = 2000


def _term_text(term: str) -> str:
    """What is embedded for an index term: a stem as it is, a whole snake_case identifier as its words."""
    return term.replace("_", " ").strip() or term


class StaticRanker(_VectorRanker[StaticEncoder]):
    """Hybrid ranking with static embeddings (nls/static.py): chunk vectors built from the BM25 matrix's terms, a
    question embedded from its own terms; same interface as DenseRanker (the service holds one or the other)."""

    VECTORS_FILE = STATIC_VECTORS
    DIMENSIONS = STATIC_DIMENSIONS

    def __init__(self, encoder_factory: Callable[[], StaticEncoder] = StaticEncoder.load) -> None:
        super().__init__(encoder_factory)
        self.weight = STATIC_WEIGHT
        self.candidates = STATIC_CANDIDATES
        self.compounds = True

    def embed(self, folder: Path, mirror_path: Path, progress: Callable[[int, int], None] | None = None) -> int:
        """Write the vectors of the chunk index in `folder` unless they exist (or it does not); the number of
        chunks embedded. Reads the index's BM25 matrix only (`mirror_path` is not needed: DenseRanker's shape)."""
        with self._build(folder) as index:
            if index is None:
                return 0
            encoder = self.encoder()
            check_room(folder, len(index), STATIC_DIMENSIONS)
            started = time.perf_counter()
            matrix = index.model.scores
            # A column per term id; the matrix may have a column no term names (a zero vector, then).
            words = [""] * (len(matrix["indptr"]) - 1)
            for term, term_id in index.model.vocab_dict.items():
                # Whole compound identifiers (`buffer_head_uptodate`: 4 in 5 of a kernel's terms) cost most of the
                # build; `compounds` off leaves them at zero (their words are terms of the same chunks), at some
                # quality (bench/nls_bench.py: recall@10 0.752 instead of 0.760).
                if int(term_id) < len(words) and (self.compounds or "_" not in str(term)):
                    words[int(term_id)] = _term_text(str(term))
            term_vectors = np.zeros((len(words), STATIC_DIMENSIONS), dtype=np.float32)
            named = [i for i, word in enumerate(words) if word]
            term_vectors[named] = encoder.encode([words[i] for i in named])
            vectors = chunk_vectors(matrix["data"], matrix["indices"], matrix["indptr"], term_vectors, len(index))
            write_vectors(folder / STATIC_VECTORS, len(index), STATIC_DIMENSIONS, iter([vectors]))
            if progress is not None:
                progress(len(index), len(index))
            log.info(
                "nls static vectors",
                extra={"chunks": len(index), "terms": len(words), "seconds": round(time.perf_counter() - started, 1)},
            )
            return len(index)

    def question_vector(self, question: str) -> np.ndarray | None:
        """The question's vector: the mean of its index terms' vectors (the chunks' vectors are made of the same
        kind of terms), or None when it has no term."""
        words = [_term_text(t) for t in terms(question)]
        if not words:
            return None
        vectors = self.encoder().encode(words)
        mean = vectors.mean(axis=0)
        norm = float(np.linalg.norm(mean))
        return None if norm == 0 else (mean / norm).astype(np.float32)

    def cosines(self, folder: Path, index: NlsIndex, question: str) -> np.ndarray | None:
        """Cosine of `question` with every chunk of the index in `folder`, or None without (matching) vectors or
        without a term in the question."""
        vectors = self.vectors(folder, index)
        if vectors is None:
            return None
        query = self.question_vector(question)
        return None if query is None else _block_cosines(vectors, query)

    def fuse(
        self, folder: Path, index: NlsIndex, question: str, scores: np.ndarray, file: re.Pattern[str] | None
    ) -> np.ndarray:
        """BM25 `scores` (already restricted to `file:`) re-ranked by the static vectors: the best
        `self.candidates` chunks by BM25 score `bm25 / best + weight * max(cosine, 0)`, the other matching chunks
        `bm25 / best`; `scores` unchanged without vectors or without the model package (logged: BM25 answers).

        Static vectors alone rank far below BM25 (bag-of-terms vectors know little BM25 does not), so they do not
        add candidates of their own as the MiniLM fusion does: they reorder BM25's, and only the best ones, whose
        rows are read from the memory-mapped file (a Linux-sized index has 1.3M rows; a few thousand are read)."""
        matching = np.flatnonzero(scores > 0)
        if len(matching) == 0:
            return scores
        try:
            vectors = self.vectors(folder, index)
            query = None if vectors is None else self.question_vector(question)
        except Unavailable as exc:
            log.warning("nls hybrid ranking skipped: %s", exc)
            return scores
        if vectors is None or query is None:
            return scores
        best = float(scores[matching].max())
        fused = np.zeros(len(scores), dtype=np.float32)
        fused[matching] = scores[matching] / best
        top = matching
        if len(matching) > self.candidates:
            top = matching[np.argpartition(-scores[matching], self.candidates - 1)[: self.candidates]]
        top = np.sort(top)  # rows in file order: the memory map reads forward
        cosines = np.asarray(vectors[top], dtype=np.float32) @ query
        fused[top] += np.float32(self.weight) * np.maximum(cosines, 0)
        return fused
