"""Static embeddings for nls (nls/static.py, StaticRanker in nls/dense.py): our numpy encoder against the model
package's own Rust encoder, the chunk vectors against the plain matrix product, and the ranker over a real index of
a real git repository through NlsService."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from codewell.capabilities import wire
from codewell.core.actors import INTERNAL
from codewell.core.errors import Unavailable
from codewell.nls.dense import STATIC_VECTORS, StaticRanker
from codewell.nls.index import load
from codewell.nls.service import NlsService
from codewell.nls.static import STATIC_DIMENSIONS, StaticEncoder, chunk_vectors, static_model_dir
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from tests.factories import set_site_config
from tests.gitfixtures import make_repo, register_local_repo

TEXTS = [
    "where are expired sessions cleaned up",
    "def parse_args(self, ctx, args):\n    return args",
    "static int ext4_readdir(struct file *file, struct dir_context *ctx)",
    "",
    "ünïcödé and 日本語 text",
]

FILES = {
    "auth/login.py": (
        "def verify_login(user, password):\n"
        "    digest = hash_secret(password, user.salt)\n"
        "    return compare_digest(digest, user.password_hash)\n"
    ),
    "auth/reset.py": (
        "def send_password_reset(user):\n"
        "    token = make_token(user)\n"
        "    mailer.send(user.email, 'reset your password', token)\n"
    ),
    "auth/store.py": (
        "def store_password(user, password):\n    user.password_hash = hash_secret(password, new_salt())\n"
    ),
    "kitchen/bake.py": "def bake_bread(flour, water, yeast):\n    return knead(flour + water + yeast)\n",
}
QUESTION = "how is the password of a user checked"


@pytest.fixture(scope="module")
def encoder() -> StaticEncoder:
    return StaticEncoder.load()


def test_vectors_equal_the_packages_own_encoder(encoder: StaticEncoder) -> None:
    # The package's Rust extension is the reference: the same files, its own tokenizer and pooling.
    reference_module = pytest.importorskip("static_model._static_model")
    reference = np.asarray(reference_module.encode_batch(str(static_model_dir()), TEXTS, 512), dtype=np.float32)
    ours = encoder.encode(TEXTS)
    assert ours.shape == (len(TEXTS), STATIC_DIMENSIONS)
    filled = np.linalg.norm(reference, axis=1) > 0
    assert not filled[3]  # the empty text has no token: a zero row on both sides
    np.testing.assert_allclose(ours[~filled], 0.0)
    cosines = (ours[filled] * reference[filled]).sum(axis=1) / np.linalg.norm(reference[filled], axis=1)
    assert cosines.min() > 0.9999
    np.testing.assert_allclose(np.linalg.norm(ours[filled], axis=1), 1.0, rtol=1e-5)
    # Batching changes nothing; similar texts score above unrelated ones.
    np.testing.assert_allclose(encoder.encode(TEXTS[1:2])[0], ours[1], atol=1e-6)
    a, b, c = encoder.encode(["remove expired sessions", "delete expired sessions", "bake bread with yeast"])
    assert a @ b > a @ c
    assert encoder.encode([]).shape == (0, STATIC_DIMENSIONS)


def test_chunk_vectors_are_the_weighted_sums_of_their_terms_vectors() -> None:
    rng = np.random.default_rng(3)
    dense = rng.random((7, 5)) * (rng.random((7, 5)) < 0.5)  # chunks × terms, BM25 weights
    dense[4] = 0.0  # a chunk without terms: a zero vector
    term_vectors = rng.standard_normal((5, STATIC_DIMENSIONS)).astype(np.float32)
    # The term-major (CSC) layout of bm25s: term t's chunks are indices[indptr[t]:indptr[t + 1]].
    indptr, indices, data = [0], [], []
    for t in range(5):
        rows = np.flatnonzero(dense[:, t])
        indices.extend(rows.tolist())
        data.extend(dense[rows, t].tolist())
        indptr.append(len(indices))
    got = chunk_vectors(
        np.array(data, dtype=np.float32), np.array(indices, dtype=np.int32), np.array(indptr), term_vectors, 7
    )
    expected = dense @ term_vectors
    norms = np.linalg.norm(expected, axis=1, keepdims=True)
    expected = np.divide(expected, norms, out=np.zeros_like(expected), where=norms > 0)
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert not got[4].any()


def test_static_ranker_reorders_bm25_matches_only(encoder: StaticEncoder, runtime: Runtime, tmp_path: Path) -> None:
    wire(runtime)
    nls = runtime.get(NlsService)
    ranker = StaticRanker(lambda: encoder)
    nls.dense = ranker
    set_site_config(runtime, {"search.nls.dense": True})
    repo = register_local_repo(runtime, make_repo(tmp_path / "app", FILES), "acme/app")  # indexed by the listeners
    commit = runtime.get(RepoService).resolve(INTERNAL, "acme/app").commit
    folder = nls.folder(repo, commit)
    index = load(folder)
    assert index is not None
    vectors = np.load(folder / STATIC_VECTORS)
    assert vectors.shape == (len(index), STATIC_DIMENSIONS)
    assert vectors.dtype == np.float16
    assert ranker.embed(folder, Path(repo.mirror_path)) == 0  # already built: not again

    lexical = index.scores(["password", "user", "check"])
    fused = ranker.fuse(folder, index, QUESTION, lexical, None)
    cosines = ranker.cosines(folder, index, QUESTION)
    assert cosines is not None
    matching = lexical > 0
    expected = np.where(matching, lexical / lexical.max() + ranker.weight * np.maximum(cosines, 0), 0.0)
    np.testing.assert_allclose(fused, expected, rtol=1e-3, atol=1e-3)
    assert not fused[~matching].any()  # static vectors add no candidate of their own
    # Only the best `candidates` BM25 matches are re-ranked; the others keep their scaled BM25 score.
    ranker.candidates = 1
    best = int(np.argmax(lexical))
    one = ranker.fuse(folder, index, QUESTION, lexical, None)
    others = matching & (np.arange(len(lexical)) != best)
    np.testing.assert_allclose(one[others], lexical[others] / lexical.max(), rtol=1e-6)
    ranker.candidates = 2000

    # Through the service: the switch on uses the vectors, hits only among BM25's; off, BM25's order.
    hybrid = nls.search(INTERNAL, f"{QUESTION} repo:acme/app")
    assert {h.path for h in hybrid.hits} <= {"auth/login.py", "auth/reset.py", "auth/store.py"}
    assert nls.search(INTERNAL, "knead the dough repo:acme/app").hits[0].path == "kitchen/bake.py"
    set_site_config(runtime, {"search.nls.dense": False})
    assert {h.path for h in nls.search(INTERNAL, f"{QUESTION} repo:acme/app").hits} == {h.path for h in hybrid.hits}

    # Without vectors, or without the model package, BM25's scores come back unchanged.
    (folder / STATIC_VECTORS).unlink()
    assert ranker.fuse(folder, index, QUESTION, lexical, None) is lexical

    def missing() -> StaticEncoder:
        raise Unavailable("no model package")

    ranker.embed(folder, Path(repo.mirror_path))
    assert StaticRanker(missing).fuse(folder, index, QUESTION, lexical, None) is lexical
