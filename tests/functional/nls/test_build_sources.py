"""The nls build reads a commit's files from search's shard, and git only for what the shard leaves out.

Whichever it reads, the index is the same: built once from the shard just indexed and once from git alone
(a commit the shard does not hold), every file of the two indexes is byte for byte equal.
"""

from __future__ import annotations

import os
from pathlib import Path

import pygit2
import pytest

from codewell.codenav.service import CodeNavService
from codewell.core.actors import INTERNAL
from codewell.nls import service as nls_service
from codewell.nls.service import NlsService
from codewell.repos.service import Repo, RepoService
from codewell.runtime import Runtime
from codewell.search.service import SearchService
from tests.gitfixtures import commit, make_repo, register_local_repo

BODY = "".join(f"static int helper_{i}(int value)\n{{\n\treturn value * {i};\n}}\n\n" for i in range(40))
FILES: dict[str, str | bytes] = {
    "mm/slab.c": "/* Frees the slab object. */\n" + BODY,
    "docs/crlf.txt": "Windows line\r\n" * 120,
    "lib/latin1.c": b"/* caf\xe9 */ int x;\n" * 90,
    # A NUL after the first 8000 bytes: search calls the file binary (no bytes in its shard), nls indexes it.
    "data/late_nul.txt": "a line of words\n" * 600 + "\x00 tail words\n",
    "data/binary.bin": b"\x00\x01\x02 head",
    "data/big.txt": "word " * (1 << 18) + "!\n",  # over 1 MiB: neither indexes its content
    "empty.txt": "",
}


def _build(runtime: Runtime, repo: Repo, commit_sha: str) -> dict[str, bytes]:
    nls = runtime.get(NlsService)
    folder = nls.folder(repo, commit_sha)
    assert nls.index_revision(repo, commit_sha) > 0
    files = {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
    for p in sorted(folder.rglob("*"), reverse=True):
        p.unlink() if p.is_file() else p.rmdir()
    folder.rmdir()
    return files


@pytest.fixture
def repo(runtime: Runtime, tmp_path: Path) -> Repo:
    work = make_repo(tmp_path / "work", FILES)
    os.symlink("mm/slab.c", work / "slab_link.c")  # a symbolic link: its blob is the target path
    commit(work, message="link")
    return register_local_repo(runtime, work, "acme/kernel")


def test_index_from_the_shard_equals_the_index_from_git(
    runtime: Runtime, repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    search = runtime.get(SearchService)
    search.index(repo)
    sha = runtime.get(RepoService).resolve(INTERNAL, "acme/kernel").commit
    stored = search.revision_files(repo, sha)
    assert stored is not None

    mirror = pygit2.Repository(str(repo.mirror_path))
    read = {f.path: f.data for f in nls_service._source_files(mirror, sha, stored, {})}
    shard_read = sorted(path for path, data in read.items() if isinstance(data, memoryview))
    assert shard_read == ["docs/crlf.txt", "empty.txt", "lib/latin1.c", "mm/slab.c"]
    # Git for what the shard holds no bytes of (binary by search's rule) or does not hold (the link); the file
    # over 1 MiB is read from neither.
    assert sorted(set(read) - set(shard_read)) == ["data/binary.bin", "data/late_nul.txt", "slab_link.c"]
    assert bytes(read["slab_link.c"]) == b"mm/slab.c"

    from_shard = _build(runtime, repo, sha)
    monkeypatch.setattr(SearchService, "revision_files", lambda self, repo, commit: None)
    from_git = _build(runtime, repo, sha)
    assert from_shard.keys() == from_git.keys()
    assert {name for name, data in from_shard.items() if data != from_git[name]} == set()
    assert b"data/late_nul.txt" in from_shard["files.json"]
    assert b"data/big.txt" not in from_shard["files.json"]
    assert b"helper_7" in from_shard["files.json"]  # codenav's definitions, fetched for the whole revision


def test_definition_blocks_are_symbols_in_per_path(runtime: Runtime, tmp_path: Path) -> None:
    # What nls read per path before (symbols_in, filtered to definitions), now one query for the revision.
    files = {
        "pkg/shapes.py": (
            "class Shape:\n    def area(self):\n        return 0\n\n    def name(self):\n        return 's'\n\n"
            "def area(shape):\n    return shape.area()\n\nCONSTANT = 1\n"
        ),
        "mm/slab.c": "struct slab { int n; };\nenum state { ON, OFF };\n" + BODY,
        "README.md": "# nothing defined here\n",
    }
    repo = register_local_repo(runtime, make_repo(tmp_path / "defs", files), "acme/defs")
    sha = runtime.get(RepoService).resolve(INTERNAL, "acme/defs").commit
    symbols = runtime.get(CodeNavService).index_revision(repo, sha)
    try:
        kinds = nls_service._DEFINITION_KINDS
        blocks = symbols.definition_blocks(kinds)
        per_path = {
            path: [
                (s.def_line, s.def_end_line, f"{s.container}.{s.name}" if s.container else s.name)
                for s in symbols.symbols_in(path)
                if s.kind in kinds
            ]
            for path in files
        }
    finally:
        symbols.close()
    assert blocks == {path: spans for path, spans in per_path.items() if spans}
    assert "Shape.area" in {name for *_, name in blocks["pkg/shapes.py"]}
    assert len(blocks["mm/slab.c"]) == 42
