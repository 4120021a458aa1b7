"""The query path of nls_search: the chunks' bytes read from search's shard (format 5; no blob read), or from the
texts older indexes store (formats 3 and 4), or from the blobs (format 2); only the hits shown decoded."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pytest

from codewell.core.actors import INTERNAL
from codewell.nls import service as nls_service
from codewell.nls.index import BYTE_END, BYTE_START, PATH, SourceFile, build, decode_lines, is_current, load
from codewell.nls.service import NlsResults, NlsService, _searchable
from codewell.repos.service import Repo, RepoService
from codewell.runtime import Runtime
from codewell.search.service import SearchService
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
    raw = json.loads((folder / "files.json").read_text())
    (folder / "files.json").write_text(json.dumps({**raw, "format": 2}))


def _downgrade_to_format_4(folder: Path, files: dict[str, bytes]) -> None:
    """What an index of format 4 looks like: each chunk's bytes deflated on its own (`texts.bin`), where each starts
    (`texts.npy`), an int64 chunk table."""
    raw = json.loads((folder / "files.json").read_text())
    table = np.load(folder / "chunks.npy").astype(np.int64)
    starts = [0]
    with (folder / "texts.bin").open("wb") as out:
        for row in table.tolist():
            packed = zlib.compress(files[raw["paths"][row[PATH]]][row[BYTE_START] : row[BYTE_END]], 6, -15)
            out.write(packed)
            starts.append(starts[-1] + len(packed))
    np.save(folder / "texts.npy", np.asarray(starts, dtype=np.int64))
    np.save(folder / "chunks.npy", table)
    (folder / "files.json").write_text(json.dumps({**raw, "format": 4}))


def _ranked(results: NlsResults) -> list[tuple[str, int, float]]:
    return sorted(((h.path, h.start, round(h.score, 9)) for h in results.hits), key=lambda t: (-t[2], t[0]))


@pytest.fixture
def indexed(runtime: Runtime, tmp_path: Path) -> tuple[Repo, Path]:
    repo = register_local_repo(runtime, make_repo(tmp_path / "net", FILES), "acme/net")
    commit = runtime.get(RepoService).resolve(INTERNAL, "acme/net").commit
    runtime.get(SearchService).index(repo)  # the shard the queries read the chunks' bytes from
    nls = runtime.get(NlsService)
    assert nls.index_revision(repo, commit) == len(FILES)
    return repo, nls.folder(repo, commit)


def test_chunk_table_locates_each_chunks_bytes_and_no_text_is_stored(tmp_path: Path) -> None:
    # CRLF, non-ASCII capitals (lower-cased as text, not bytes), a last line without a newline, and two files.
    lines = [f"Line {i} ÉTÉ\r" if i % 2 else f"MixedCase_{i} Über" for i in range(1, 200)]
    data = "\n".join(lines).encode()
    decoded = [line.removesuffix("\r") for line in data.decode().split("\n")]
    files = {"a.c": data, "b.py": b"X = 1\n"}
    build(
        tmp_path / "ix",
        [SourceFile("a.c", "f" * 40, data, [(101, 130, "fn")]), SourceFile("b.py", "e" * 40, files["b.py"], [])],
    )
    index = load(tmp_path / "ix")
    assert index is not None
    assert is_current(tmp_path / "ix")
    assert (index.format, index.texts, index.lower) == (5, None, None)
    assert not (tmp_path / "ix" / "texts.bin").exists()
    assert index.table.dtype == np.int32
    assert len(index) > 3
    for i in range(len(index)):
        chunk = index.chunk(i)
        row = index.table[i].tolist()
        source = decoded if chunk.path == "a.c" else ["X = 1"]
        raw = files[chunk.path][row[BYTE_START] : row[BYTE_END]]
        assert decode_lines(raw, chunk.end - chunk.start + 1) == source[chunk.start - 1 : chunk.end]
    # Format 4 (texts stored, deflated per chunk) is still read: the same lines, lower-cased texts.
    _downgrade_to_format_4(tmp_path / "ix", files)
    old = load(tmp_path / "ix")
    assert old is not None
    assert old.texts is not None
    assert old.lower is old.texts
    assert not is_current(tmp_path / "ix")
    assert len(old.texts) == len(old) == len(index)
    for i in range(len(old)):
        chunk = old.chunk(i)
        source = decoded if chunk.path == "a.c" else ["X = 1"]
        assert old.texts.lines(i) == source[chunk.start - 1 : chunk.end]
        assert old.texts[i] == "\n".join(source[chunk.start - 1 : chunk.end]).lower().encode()
    assert "mixedcase_2 über".encode() in old.texts[0]
    assert old.texts[len(old) - 1] == b"x = 1"


def test_empty_index_has_one_empty_chunk(tmp_path: Path) -> None:
    build(tmp_path / "ix", [SourceFile("empty.txt", "0" * 40, b"", [])])
    index = load(tmp_path / "ix")
    assert index is not None
    assert len(index) == 1
    assert index.table.tolist() == [[0, 1, 0, 0, 0]]


def test_shard_bytes_rank_as_the_blobs_did(runtime: Runtime, indexed: tuple[Repo, Path]) -> None:
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


@pytest.mark.parametrize("older", [3, 4])
def test_stored_texts_of_older_formats_rank_as_the_shard_bytes_do(
    runtime: Runtime, indexed: tuple[Repo, Path], older: int
) -> None:
    _, folder = indexed
    nls = runtime.get(NlsService)
    from_shard = nls.search(INTERNAL, QUESTION)
    if older == 3:
        _downgrade_to_format_3(folder)
    else:
        _downgrade_to_format_4(folder, {path: text.encode() for path, text in FILES.items()})
        assert (folder / "texts.bin").stat().st_size < sum(len(text.encode()) for text in FILES.values())
    assert not is_current(folder)
    index = load(folder)
    assert index is not None
    assert index.texts is not None
    stored = NlsService(runtime, nls.root).search(INTERNAL, QUESTION)  # a fresh cache
    assert _ranked(stored) == _ranked(from_shard)
    assert [(h.path, h.lines) for h in stored.hits] == [(h.path, h.lines) for h in from_shard.hits]


@pytest.mark.parametrize("older", [2, 3, 4])
def test_older_format_is_rebuilt_at_the_next_indexing(runtime: Runtime, indexed: tuple[Repo, Path], older: int) -> None:
    repo, folder = indexed
    if older == 2:
        _downgrade_to_format_2(folder)
    elif older == 3:
        _downgrade_to_format_3(folder)
    else:
        _downgrade_to_format_4(folder, {path: text.encode() for path, text in FILES.items()})
    nls = runtime.get(NlsService)
    nls.on_indexed(repo, {"main": folder.name})
    assert is_current(folder)
    index = load(folder)
    assert index is not None
    assert (index.format, index.texts) == (5, None)
    assert not (folder / "texts.bin").exists()


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


def test_files_the_shard_holds_no_bytes_of_are_read_from_git(
    runtime: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A NUL past nls's 8000-byte test: binary for search (the shard stores no bytes), indexed by nls. And once the
    # shard no longer holds the indexed commit (its branch moved on, the index not yet replaced), every file.
    late = "/* the retransmission timer, late */\ntcp_retransmit_timer(sk);\n" + "/* pad */\n" * 1000 + "\0\n"
    files = {**FILES, "net/late.c": late}
    repo = register_local_repo(runtime, make_repo(tmp_path / "late", files), "acme/net")
    commit = runtime.get(RepoService).resolve(INTERNAL, "acme/net").commit
    search = runtime.get(SearchService)
    search.index(repo)
    nls = runtime.get(NlsService)
    nls.index_revision(repo, commit)
    reads: list[str] = []
    read = nls_service._Blobs.read

    def counting(blobs: nls_service._Blobs, blob: str) -> bytes:
        reads.append(blob)
        return read(blobs, blob)

    monkeypatch.setattr(nls_service._Blobs, "read", counting)
    found = nls.search(INTERNAL, QUESTION)
    assert "net/late.c" in [h.path for h in found.hits]
    index = load(nls.folder(repo, commit))
    assert index is not None
    assert reads == [index.blobs[index.paths.index("net/late.c")]]
    for hit in found.hits:
        assert hit.lines == files[hit.path].split("\n")[hit.start - 1 : hit.end]
    reads.clear()
    monkeypatch.setattr(SearchService, "shard", lambda _self, _repo: None)
    from_git = nls.search(INTERNAL, QUESTION)
    assert sorted(reads) == sorted({index.blobs[index.paths.index(h.path)] for h in found.hits})
    assert _ranked(from_git) == _ranked(found)
    assert [(h.path, h.lines) for h in from_git.hits] == [(h.path, h.lines) for h in found.hits]


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
