"""The query path of nls_search: the texts stored in the index (no blob read), only the hits shown decoded."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from codewell.core.actors import INTERNAL
from codewell.nls import service as nls_service
from codewell.nls.index import SourceFile, build, decode_lines, is_current, load
from codewell.nls.service import NlsResults, NlsService, _searchable
from codewell.repos.service import Repo, RepoService
from codewell.runtime import Runtime
from tests.gitfixtures import make_repo, register_local_repo

# Each file is one chunk holding the question's words; `tcp_retransmit_timer` and the phrase "retransmission
# timer" appear (in any case: the boosts ignore it) in some only, so those boosts decide part of the order.
PHRASES = ("retransmission timer", "Retransmission Timer", "retransmission clock")
IDENTIFIERS = ("tcp_retransmit_timer", "TCP_RETRANSMIT_TIMER", "tcp_retransmit")
FILES = {
    f"net/ipv4/tcp_{i:02d}.c": (
        f"/* Arm the {PHRASES[i % 3]} of socket {i}. */\n"
        f"static void arm_{i}(struct sock *sk)\n{{\n"
        f"\t{IDENTIFIERS[i % 4 % 3]}(sk);\n"
        "\tsk->timer = jiffies + HZ * " + "1" * (i + 1) + ";\n}\n"
    )
    for i in range(24)
}
QUESTION = "where is tcp_retransmit_timer, the retransmission timer? repo:acme/net"


def _downgrade_to_format_2(folder: Path) -> None:
    """What an index written before the stored texts looks like: no texts.* files, format 2."""
    (folder / "texts.bin").unlink()
    (folder / "texts.npy").unlink()
    raw = json.loads((folder / "files.json").read_text())
    (folder / "files.json").write_text(json.dumps({**raw, "format": 2}))


def _ranked(results: NlsResults) -> list[tuple[str, int, float]]:
    return sorted(((h.path, h.start, round(h.score, 9)) for h in results.hits), key=lambda t: (-t[2], t[0]))


@pytest.fixture
def indexed(runtime: Runtime, tmp_path: Path) -> tuple[Repo, Path]:
    repo = register_local_repo(runtime, make_repo(tmp_path / "net", FILES), "acme/net")
    commit = runtime.get(RepoService).resolve(INTERNAL, "acme/net").commit
    nls = runtime.get(NlsService)
    assert nls.index_revision(repo, commit) == len(FILES)
    return repo, nls.folder(repo, commit)


def test_stored_texts_round_trip(tmp_path: Path) -> None:
    # CRLF, non-ASCII capitals (lower-cased as text, not bytes), a last line without a newline, and two files.
    lines = [f"Line {i} ÉTÉ\r" if i % 2 else f"MixedCase_{i} Über" for i in range(1, 200)]
    data = "\n".join(lines).encode()
    decoded = [line.removesuffix("\r") for line in data.decode().split("\n")]
    small = SourceFile("b.py", "e" * 40, b"X = 1\n", [])
    build(tmp_path / "ix", [SourceFile("a.c", "f" * 40, data, [(101, 130, "fn")]), small])
    index = load(tmp_path / "ix")
    assert index is not None
    assert index.texts is not None
    assert index.lower is index.texts
    assert is_current(tmp_path / "ix")
    assert len(index.texts) == len(index) > 3
    for i in range(len(index)):
        chunk = index.chunk(i)
        source = decoded if chunk.path == "a.c" else ["X = 1"]
        assert index.texts.lines(i) == source[chunk.start - 1 : chunk.end]
        assert index.texts[i] == "\n".join(source[chunk.start - 1 : chunk.end]).lower().encode()
    assert "mixedcase_2 über".encode() in index.texts[0]
    assert index.texts[len(index) - 1] == b"x = 1"


def test_empty_index_has_empty_texts(tmp_path: Path) -> None:
    build(tmp_path / "ix", [SourceFile("empty.txt", "0" * 40, b"", [])])
    index = load(tmp_path / "ix")
    assert index is not None
    assert index.texts is not None
    assert [index.texts[i] for i in range(len(index))] == [b""]


def test_stored_texts_rank_as_the_blobs_did(runtime: Runtime, indexed: tuple[Repo, Path]) -> None:
    # The same index read as format 2 (its re-scoring decodes the candidates' blobs) ranks exactly alike.
    _, folder = indexed
    nls = runtime.get(NlsService)
    stored = nls.search(INTERNAL, QUESTION)
    # The boosts did their part: a holder of the identifier and the phrase (in either case) comes first.
    top = FILES[stored.hits[0].path].lower()
    assert "tcp_retransmit_timer" in top
    assert "retransmission timer" in top
    _downgrade_to_format_2(folder)
    assert not is_current(folder)
    old = NlsService(runtime, nls.root)  # a fresh cache
    index = load(folder)
    assert index is not None
    assert index.texts is None
    from_blobs = old.search(INTERNAL, QUESTION)
    assert _ranked(from_blobs) == _ranked(stored)
    assert [(h.path, h.lines) for h in from_blobs.hits] == [(h.path, h.lines) for h in stored.hits]


def _downgrade_to_format_3(folder: Path) -> None:
    """What an index written before the per-chunk compression looks like: every file's bytes whole, format 3."""
    raw = json.loads((folder / "files.json").read_text())
    with (folder / "texts.bin").open("wb") as out:
        starts = [0]
        for path in raw["paths"]:
            data = FILES[path].encode()
            out.write(data)
            starts.append(starts[-1] + len(data))
    np.save(folder / "texts.npy", np.asarray(starts, dtype=np.int64))
    (folder / "files.json").write_text(json.dumps({**raw, "format": 3}))


def test_texts_compressed_per_chunk_rank_as_the_whole_files_did(runtime: Runtime, indexed: tuple[Repo, Path]) -> None:
    _, folder = indexed
    nls = runtime.get(NlsService)
    stored = nls.search(INTERNAL, QUESTION)
    assert (folder / "texts.bin").stat().st_size < sum(len(text.encode()) for text in FILES.values())
    _downgrade_to_format_3(folder)
    assert not is_current(folder)
    index = load(folder)
    assert index is not None
    assert index.texts is not None
    whole = NlsService(runtime, nls.root).search(INTERNAL, QUESTION)  # a fresh cache
    assert _ranked(whole) == _ranked(stored)
    assert [(h.path, h.lines) for h in whole.hits] == [(h.path, h.lines) for h in stored.hits]


def test_older_format_is_rebuilt_at_the_next_indexing(runtime: Runtime, indexed: tuple[Repo, Path]) -> None:
    repo, folder = indexed
    _downgrade_to_format_2(folder)
    nls = runtime.get(NlsService)
    nls.on_indexed(repo, {"main": folder.name})
    assert is_current(folder)
    index = load(folder)
    assert index is not None
    assert index.texts is not None


def test_no_blob_is_read_and_only_the_hits_shown_are_decoded(
    runtime: Runtime, indexed: tuple[Repo, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, folder = indexed
    reads: list[str] = []
    read = nls_service._Blobs.read

    def counting(blobs: nls_service._Blobs, blob: str) -> bytes:
        reads.append(blob)
        return read(blobs, blob)

    monkeypatch.setattr(nls_service._Blobs, "read", counting)
    nls = runtime.get(NlsService)
    found = nls.search(INTERNAL, QUESTION + " count:3")
    assert len(found.hits) == len(FILES)  # every file is a candidate
    # One chunk per file: the first three hits are the three files shown, decoded by the search; no other is.
    shown, others = found.hits[:3], found.hits[3:]
    assert all(h.text.loaded for h in shown)
    assert not any(h.text.loaded for h in others)
    for hit in found.hits:  # the others decoded when asked for
        assert hit.lines == FILES[hit.path].rstrip("\n").split("\n")[hit.start - 1 : hit.end]
    assert reads == []
    # An index of format 2 reads the blobs: the candidates' (the boosts need their text), each once.
    _downgrade_to_format_2(folder)
    from_blobs = NlsService(runtime, nls.root).search(INTERNAL, QUESTION + " count:3")
    assert len(reads) == len(set(reads)) == len(FILES)
    assert [h.lines for h in from_blobs.hits] == [h.lines for h in found.hits]


@pytest.mark.parametrize(
    "raw",
    [
        b"Parse_Config(x);\r\n  the Retransmission  Timer\r\nend\n",
        "Kelvin: \u212a_limit and caf\u00e9 TIMER\n".encode(),  # str.lower() maps KELVIN SIGN to k
        b"bad \xff\xfe utf-8 parse_config\nretransmission timer",
    ],
)
def test_boost_text_matches_as_the_decoded_lines_do(raw: bytes) -> None:
    reference = "\n".join(decode_lines(raw, raw.count(b"\n") + 1)).lower()
    for needle in ("parse_config", "retransmission timer", "k_limit", "timer", "retransmission  timer", "end"):
        assert (needle.encode() in _searchable(raw)) == (needle in reference), needle


def test_ties_at_the_last_candidate_place_keep_the_first_chunks(
    runtime: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    same = {f"src/f{i:02d}.c": "int retransmit_timer;\n" for i in range(12)}
    repo = register_local_repo(runtime, make_repo(tmp_path / "same", same), "acme/same")
    nls = runtime.get(NlsService)
    nls.index_revision(repo, runtime.get(RepoService).resolve(INTERNAL, "acme/same").commit)
    monkeypatch.setattr(nls_service, "_CANDIDATES", 5)
    for _ in range(3):
        found = nls.search(INTERNAL, "retransmit timer")
        assert [h.path for h in found.hits] == sorted(same)[:5]
