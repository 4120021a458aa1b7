"""The native term counter (nls/_tokenize.c) and the BM25 model assembled from its arrays.

setup.py builds `_tokenize` as optional: without a C compiler the install still succeeds and index.py tokenizes
in Python (`chunk_tokens`) and lets bm25s count. Both paths give the same bm25s model: the same score for every
(chunk, term), bit for bit (tests/unit/nls/test_tokenize.py builds both and compares them).

The native path: the C counter extracts each chunk's identifiers from the blob's bytes, splits and lower-cases
them and counts their terms; a word's term comes from `word_token` (index.py's stop list and Snowball stemming),
called once per distinct word. The score matrix is then computed here with numpy in bulk, with exactly the
operations and dtypes bm25s's own `index` uses (its per-document Python loop and `Counter` were most of its
time), and handed to bm25s in its own format, so the query side stays bm25s.
"""

from __future__ import annotations

import json
import logging
import math
import zlib
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from types import ModuleType

import bm25s
import numpy as np

_tokenize: ModuleType | None
try:
    from codewell.nls import _tokenize as _module

    _tokenize = _module
except ImportError:  # installed without a C compiler
    _tokenize = None

__all__ = ["ENABLED", "NativeCorpus", "available", "chunk_file"]

log = logging.getLogger(__name__)
# Tests switch the native path off to compare it with the Python one.
ENABLED = True


def available() -> bool:
    """Is the native counter built and switched on."""
    return ENABLED and _built()


@lru_cache(maxsize=1)
def _built() -> bool:
    if _tokenize is None:
        log.warning("codewell.nls._tokenize is not built (no C compiler at install?): nls indexing runs in Python")
    return _tokenize is not None


def chunk_file(data: bytes | memoryview, spans: Sequence[tuple[int, int, str]]) -> list[tuple[int, int, int, int, int]]:
    """index.py's `chunk_file` + `_chunk_bytes` in C, on the file's bytes: per chunk (first line, last line, byte
    start, byte end, the index of its definition in `spans`, or -1 for a window, -2 for a small file's one
    chunk). What `NativeCorpus.add_source` chunks by."""
    assert _tokenize is not None, "check available() first"
    chunks: list[tuple[int, int, int, int, int]] = _tokenize.chunk_file(data, spans)
    return chunks


# bm25s's vocabulary (a JSON object of every term and its id: 118 MB for the 4M terms of the Linux tree) as nls
# stores it since index format 5: deflated (zlib), read back by index.load. Level 1: the terms compress about as well
# at 1 as at 6, for a third of the CPU.
PACKED_VOCAB = "vocab.index.json.z"
VOCAB_LEVEL = 1


def pack_vocab(folder: Path) -> None:
    """Replace the vocabulary bm25s saved in `folder` by its deflated copy (PACKED_VOCAB)."""
    plain = folder / "vocab.index.json"
    (folder / PACKED_VOCAB).write_bytes(zlib.compress(plain.read_bytes(), VOCAB_LEVEL))
    plain.unlink()


def narrow_indptr(indptr: np.ndarray) -> np.ndarray:
    """bm25s's column pointers as nls stores them (index format 5): int32 when every one fits, where bm25s writes
    int64 (4M terms on the Linux tree: 16 MB less); bm25s slices with either."""
    return indptr.astype(np.int32) if len(indptr) and int(indptr[-1]) < 1 << 31 else indptr


class NativeCorpus:
    """Chunks' term counts, added file by file, then one bm25s model of them all."""

    def __init__(self, word_token: Callable[[str], str | None], empty_token: str) -> None:
        assert _tokenize is not None, "check available() first"
        self._empty_token = empty_token
        self._counter = _tokenize.TermCounter(word_token)

    def add_file(
        self,
        data: bytes,
        bounds: Sequence[tuple[int, int]],
        path: str,
        symbols: Sequence[str],
        weights: tuple[int, int, int],
    ) -> None:
        """One chunk per (byte start, byte end) of `data`, with the chunk's symbol names joined by spaces.

        `weights`: extra counts of comment words, path words and symbol-name words (on top of the body's one).
        """
        assert _tokenize is not None
        # Identifiers are ASCII: surrogatepass keeps any other character a non-identifier byte, and never fails.
        names = [s.encode("utf-8", "surrogatepass") for s in symbols]
        self._counter.add_file(data, bounds, path.encode("utf-8", "surrogatepass"), names, *weights)

    def add_source(
        self,
        data: bytes | memoryview,
        spans: Sequence[tuple[int, int, str]],
        path: str,
        file_id: int,
        first_row: int,
        weights: tuple[int, int, int],
    ) -> tuple[bytes, list[tuple[int, tuple[str, ...]]]]:
        """Chunk one file as index.py's `chunk_file` does (on its bytes: nothing decoded) and add its chunks.

        Returns the chunk table's rows of the file (int64: file_id, first and last line, byte start and end; empty
        when the file has no lines, and then nothing is added) and, for the chunks with symbol names, their row
        number (from `first_row`) and names, as the build writes them to files.json.
        """
        assert _tokenize is not None
        found: tuple[bytes, list[tuple[int, tuple[str, ...]]]] = self._counter.add_source(
            data, spans, path.encode("utf-8", "surrogatepass"), file_id, first_row, *weights
        )
        return found

    def save(self, folder: Path) -> None:
        """Write the bm25s model of every chunk added into `folder` (for `bm25s.BM25.load`): the files that
        `bm25s.BM25().index(tokens)` (defaults) then `save` write, every score bit for bit the same."""
        assert _tokenize is not None
        n_docs, n_pairs, _, known = self._counter.sizes()
        doc_len = np.empty(n_docs, dtype=np.int64)
        self._counter.lengths(doc_len)
        empty = doc_len == 0
        # A chunk without terms gets the one empty token, as chunk_tokens gives it; then bm25s adds the "" token
        # (index(create_empty_token=True)), last and outside the score matrix. The vocabulary is written by the
        # counter: a dict of a few million terms cost more than the matrix.
        # The identifier and word tables first: the vocabulary's JSON (118 MB on the Linux tree) came on top of them
        # at the build's peak.
        self._counter.finish_counting()
        vocab, ids = self._counter.vocab_json([self._empty_token, ""] if empty.any() else [""])
        n_vocab = self._counter.sizes()[3] - (1 if ids[-1] >= known else 0)
        # The build's memory peaks below (the pairs and the score matrix at once): the identifier tables and the
        # vocabulary's JSON (hundreds of MB on the Linux tree) are let go of first.
        self._counter.seal()
        folder.mkdir(parents=True, exist_ok=True)
        (folder / PACKED_VOCAB).write_bytes(zlib.compress(vocab, VOCAB_LEVEL))
        del vocab
        empty_term = ids[0] if empty.any() else -1
        doc_len[empty] = 1
        model = bm25s.BM25()
        # bm25s.BM25.build_index_from_ids (method and idf "lucene"), dtypes included: the float32 idf from
        # math.log per distinct document frequency, the per-document float64 length normalisation; the counter
        # then computes each score with numpy's operations on those (see _tokenize.c's bm25). Same bits.
        avg_doc_len = doc_len.mean()
        df = np.empty(n_vocab, dtype=np.int64)
        self._counter.frequencies(df, empty_term)
        distinct, which = np.unique(df, return_inverse=True)
        idf_of = [math.log(1 + (n_docs - d + 0.5) / (d + 0.5)) if d else 0.0 for d in distinct.tolist()]
        idf = np.asarray(idf_of, dtype=model.dtype)[which]
        k1, b = model.k1, model.b
        norm = k1 * ((1 - b) + b * doc_len.astype(np.float64) / avg_doc_len)
        n_scores = n_pairs + int(empty.sum())
        indptr = np.empty(n_vocab + 1, dtype=np.int64)
        indices = np.empty(n_scores, dtype=np.int32)
        data = np.empty(n_scores, dtype=model.dtype)
        self._counter.bm25(empty_term, norm, idf, indptr, indices, data)
        # What bm25s.BM25.save writes (no corpus, no non-occurrence array: method "lucene"; the vocabulary above).
        np.save(folder / "data.csc.index.npy", data)
        np.save(folder / "indices.csc.index.npy", indices)
        np.save(folder / "indptr.csc.index.npy", narrow_indptr(indptr))
        params = {
            "k1": model.k1,
            "b": model.b,
            "delta": model.delta,
            "method": model.method,
            "idf_method": model.idf_method,
            "dtype": model.dtype,
            "int_dtype": model.int_dtype,
            "num_docs": n_docs,
            "version": bm25s.__version__,
            "backend": model.backend,
        }
        with (folder / "params.index.json").open("w") as f:
            json.dump(params, f, indent=4)
