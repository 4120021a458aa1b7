"""Dense ranking of nls (site config `search.nls.dense`): chunk embeddings fused with BM25 by reciprocal rank.

Build: after a revision's chunk index exists, every chunk (its path, symbol names and first lines, cut at
`CHUNK_TOKENS` tokens) is embedded by all-MiniLM-L6-v2 (nls/encoder.py) in slices, and the vectors are written as
float16 into `dense.npy` in the index folder (written to a temporary name and renamed, so its presence means it
is complete; removed with the folder). Query: the question's content words are embedded, cosine against every
chunk (memory-mapped, in blocks), and the top `CANDIDATES` of BM25 and of cosine are fused by reciprocal rank
(1/(RRF_K + rank) each); nls's boosts then apply to the fused score as they do to BM25's.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar, Generic, TypeVar

import numpy as np
import pygit2

from codewell.core.errors import Unavailable
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

    @classmethod
    def has_vectors(cls, folder: Path) -> bool:
        return (folder / cls.VECTORS_FILE).is_file()

    @contextmanager
    def _build(self, folder: Path) -> Iterator[NlsIndex | None]:
        """The chunk index in `folder` to embed, or None when there is nothing to do: no index, its vectors
        already written, or another thread writing them now."""
        index = load(folder)
        if index is None or self.has_vectors(folder):
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
            mirror = pygit2.Repository(str(mirror_path))
            tmp = folder / (VECTORS + ".tmp")
            vectors = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float16, shape=(len(index), DIMENSIONS))
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
                vectors[first : first + len(texts)] = encoder.encode(texts, max_tokens=CHUNK_TOKENS)
                done = first + len(texts)
                if progress is not None:
                    progress(done, len(index))
                log.info(
                    "nls dense vectors",
                    extra={"chunks": done, "of": len(index), "seconds": round(time.perf_counter() - started, 1)},
                )
            vectors.flush()
            del vectors
            tmp.rename(folder / VECTORS)
            return len(index)

    @staticmethod
    def _read(mirror: pygit2.Repository, blob: str) -> bytes:
        if not blob:  # the placeholder row of an empty index
            return b""
        data: bytes = mirror.odb.read(pygit2.Oid(hex=blob))[1]
        return data

    def cosines(self, folder: Path, index: NlsIndex, question: str) -> np.ndarray | None:
        """Cosine of `question` with every chunk of the index in `folder`, or None without (matching) vectors."""
        if not self.has_vectors(folder):
            return None
        vectors = np.load(folder / VECTORS, mmap_mode="r")
        if vectors.shape != (len(index), DIMENSIONS):  # vectors of an older index of the same folder
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
            tmp = folder / (STATIC_VECTORS + ".tmp.npy")
            np.save(tmp, vectors.astype(np.float16))
            tmp.rename(folder / STATIC_VECTORS)
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

    def _vectors(self, folder: Path, index: NlsIndex) -> np.ndarray | None:
        if not self.has_vectors(folder):
            return None
        vectors = np.load(folder / STATIC_VECTORS, mmap_mode="r")
        return vectors if vectors.shape == (len(index), STATIC_DIMENSIONS) else None

    def cosines(self, folder: Path, index: NlsIndex, question: str) -> np.ndarray | None:
        """Cosine of `question` with every chunk of the index in `folder`, or None without (matching) vectors or
        without a term in the question."""
        vectors = self._vectors(folder, index)
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
            vectors = self._vectors(folder, index)
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
