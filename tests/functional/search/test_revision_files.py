"""SearchService.revision_files: the index listeners read a commit's files from the shard, exactly as git has them."""

from __future__ import annotations

from pathlib import Path

import pygit2
from tests.gitfixtures import make_repo, register_local_repo

from codewell.runtime import Runtime
from codewell.search.service import SearchService


def test_revision_files_are_the_git_bytes(tmp_path: Path, runtime: Runtime) -> None:
    files: dict[str, str | bytes] = {
        "a.c": "int a;\n",
        "no_newline.py": "x = 1",  # the shard adds a final newline; the git bytes have none
        "dir/bin.dat": b"\x00\x01\x02",
        "dir/empty.txt": "",
        "big.txt": "y" * (1 << 20) + "\n",  # over the shard's size cap: path only
    }
    work = make_repo(tmp_path / "work", files)
    repo = register_local_repo(runtime, work, "local/files")
    service = runtime.get(SearchService)
    service.index(repo)
    mirror = pygit2.Repository(str(repo.mirror_path))
    head = str(mirror.head.peel(pygit2.Commit).id)

    found = service.revision_files(repo, head)
    assert found is not None
    by_path = {found.path(doc): doc for doc in found.docs}
    assert sorted(by_path) == sorted(files)
    assert bytes(found.data(by_path["no_newline.py"])) == b"x = 1"
    assert bytes(found.data(by_path["a.c"])) == b"int a;\n"
    assert bytes(found.data(by_path["dir/empty.txt"])) == b""
    assert found.skipped(by_path["dir/bin.dat"]) == "binary"
    assert bytes(found.data(by_path["dir/bin.dat"])) == b""
    assert found.skipped(by_path["big.txt"]) == "too large"
    assert found.size(by_path["big.txt"]) == (1 << 20) + 1
    offset, length = found.span(by_path["a.c"])
    assert found.content_path.read_bytes()[offset : offset + length] == b"int a;\n"

    assert service.revision_files(repo, "0" * 40) is None, "a commit the shard does not hold"
