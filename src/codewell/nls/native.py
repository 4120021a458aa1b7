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

import logging
import math
from collections.abc import Callable, Sequence
from functools import lru_cache
from types import ModuleType

import bm25s
import numpy as np

_tokenize: ModuleType | None
try:
    from codewell.nls import _tokenize as _module

    _tokenize = _module
except ImportError:  # installed without a C compiler
    _tokenize = None

__all__ = ["ENABLED", "NativeCorpus", "available", "chunk_bytes"]

log = logging.getLogger(__name__)
# Tests switch the native path off to compare it with the Python one.
ENABLED = True
_BLOCK = 1 << 22


def available() -> bool:
    """Is the native counter built and switched on."""
    return ENABLED and _built()


@lru_cache(maxsize=1)
def _built() -> bool:
    if _tokenize is None:
        log.warning("codewell.nls._tokenize is not built (no C compiler at install?): nls indexing runs in Python")
    return _tokenize is not None


def chunk_bytes(data: bytes, lines: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """index.py's `_chunk_bytes` in C (the same ranges; see _tokenize.c)."""
    assert _tokenize is not None, "check available() first"
    ranges: list[tuple[int, int]] = _tokenize.chunk_bytes(data, lines)
    return ranges


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

    def model(self) -> bm25s.BM25:
        """The bm25s model of every chunk added, as `bm25s.BM25().index(tokens)` builds it (defaults)."""
        assert _tokenize is not None
        n_docs, n_pairs, _ = self._counter.sizes()
        doc_len = np.empty(n_docs, dtype=np.int64)
        doc_pairs = np.empty(n_docs, dtype=np.int64)
        terms = np.empty(n_pairs, dtype=np.int32)
        counts = np.empty(n_pairs, dtype=np.int32)
        self._counter.export(doc_len, doc_pairs, terms, counts)
        vocab = {token: i for i, token in enumerate(self._counter.tokens())}
        empty = np.flatnonzero(doc_len == 0)
        if len(empty):  # a chunk without terms gets the one empty token, as chunk_tokens gives it
            token = vocab.setdefault(self._empty_token, len(vocab))
            at = (np.cumsum(doc_pairs) - doc_pairs)[empty]
            terms = np.insert(terms, at, token)
            counts = np.insert(counts, at, 1)
            doc_len[empty] = 1
            doc_pairs[empty] = 1
        model = bm25s.BM25()
        n_vocab = len(vocab)
        # Each step below mirrors bm25s.BM25.build_index_from_ids (method and idf "lucene"), dtypes included:
        # the per-document float64 length normalisation, the float32 idf from math.log, float64 products stored
        # as float32. The same inputs give the same bits.
        avg_doc_len = doc_len.mean()
        df = np.bincount(terms, minlength=n_vocab)
        distinct, which = np.unique(df, return_inverse=True)
        idf_of = [math.log(1 + (n_docs - d + 0.5) / (d + 0.5)) if d else 0.0 for d in distinct.tolist()]
        idf = np.asarray(idf_of, dtype=model.dtype)[which]
        k1, b = model.k1, model.b
        norm = k1 * ((1 - b) + b * doc_len.astype(np.float64) / avg_doc_len)
        rows = np.repeat(np.arange(n_docs, dtype=np.int32), doc_pairs)
        scores = np.empty(len(terms), dtype=model.dtype)
        for first in range(0, len(terms), _BLOCK):  # in blocks: float64 temporaries of every pair would be GBs
            block = slice(first, first + _BLOCK)
            tf = counts[block].astype(model.dtype).astype(np.float64)
            tfc = tf / (norm[rows[block]] + tf)
            scores[block] = (idf[terms[block]].astype(np.float64) * tfc).astype(model.dtype)
        del counts
        indptr = np.empty(n_vocab + 1, dtype=np.int64)
        indices = np.empty(len(terms), dtype=np.int32)
        data = np.empty(len(terms), dtype=model.dtype)
        _tokenize.csc(rows, terms, scores, n_vocab, indptr, indices, data)
        model.scores = {"data": data, "indices": indices, "indptr": indptr, "num_docs": n_docs}
        model.nonoccurrence_array = None
        if "" not in vocab:  # as bm25s.index(create_empty_token=True) adds it
            vocab[""] = max(vocab.values(), default=-1) + 1
        model.vocab_dict = vocab
        model.unique_token_ids_set = set(vocab.values())
        return model
