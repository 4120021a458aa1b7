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
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pygit2

from codewell.core.errors import Unavailable
from codewell.nls.encoder import DIMENSIONS, Encoder
from codewell.nls.index import BYTE_END, BYTE_START, PATH, NlsIndex, load

__all__ = ["CANDIDATES", "CHUNK_TOKENS", "RRF_K", "VECTORS", "DenseRanker", "chunk_text", "fuse_ranks"]

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


class DenseRanker:
    """Builds and reads the chunk vectors of nls indexes; holds the encoder, loaded at first use."""

    def __init__(self, encoder_factory: Callable[[], Encoder] = Encoder.load) -> None:
        self._encoder_factory = encoder_factory
        self._encoder: Encoder | None = None
        self._guard = threading.Lock()
        self._building: set[Path] = set()

    def encoder(self) -> Encoder:
        """The encoder (loaded once, ~0.5 s); Unavailable when the model package is not installed."""
        with self._guard:
            if self._encoder is None:
                self._encoder = self._encoder_factory()
            return self._encoder

    @staticmethod
    def has_vectors(folder: Path) -> bool:
        return (folder / VECTORS).is_file()

    def embed(self, folder: Path, mirror_path: Path, progress: Callable[[int, int], None] | None = None) -> int:
        """Write the vectors of the chunk index in `folder` unless they exist (or it does not); the number of
        chunks embedded. The chunks' text comes from the index's stored texts, or for an index of format 2 from
        the blobs of the mirror at `mirror_path`."""
        index = load(folder)
        if index is None or self.has_vectors(folder):
            return 0
        with self._guard:
            if folder in self._building:
                return 0
            self._building.add(folder)
        try:
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
        finally:
            with self._guard:
                self._building.discard(folder)

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
        query = self.encoder().encode([question])[0]
        out = np.empty(len(vectors), dtype=np.float32)
        for start in range(0, len(vectors), _BLOCK):
            out[start : start + _BLOCK] = np.asarray(vectors[start : start + _BLOCK], dtype=np.float32) @ query
        return out

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
