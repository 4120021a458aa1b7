"""A shard whose files were truncated or deleted under it is recognised before anything reads its mappings
(codewell.search.index.integrity): a read past the end of a truncated mapped file is SIGBUS."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from codewell.search.index.builder import SourceDoc, build_shard, skip_reason
from codewell.search.index.integrity import mapped_files, mapping_problem
from codewell.search.index.shard import Shard

FILES = {f"src/file{i}.c": (f"int function_{i}(void) {{ return {i}; }}\n" * 200).encode() for i in range(20)}


def shard_of(tmp_path: Path) -> Shard:
    docs = [SourceDoc(p, d, len(d), frozenset({"main"}), skip_reason(d, len(d))) for p, d in FILES.items()]
    return Shard.open(build_shard(tmp_path / "s", {"repo": "r"}, docs))


def test_an_intact_shard_has_no_problem_and_every_mapping_is_checked(tmp_path: Path) -> None:
    shard = shard_of(tmp_path)
    names = {name for name, _ in mapped_files(shard)}
    assert {"content.bin", "postings.bin", "tri_raw.npy"} <= names
    assert mapping_problem(shard) is None


def test_a_truncated_file_is_named_with_its_sizes(tmp_path: Path) -> None:
    shard = shard_of(tmp_path)
    mapped = len(shard.content)
    assert mapped > 4096
    with (shard.path / "content.bin").open("r+b") as f:
        f.truncate(100)
    assert mapping_problem(shard) == f"content.bin truncated from {mapped} to 100 bytes"


def test_a_deleted_file_is_named(tmp_path: Path) -> None:
    shard = shard_of(tmp_path)
    (shard.path / "postings.bin").unlink()
    assert mapping_problem(shard) == "postings.bin deleted"
    assert len(bytes(shard.postings[:10])) == 10  # the mapping itself is still valid: the inode lives on


def test_reading_a_truncated_mapping_is_sigbus_which_is_why_the_check_exists(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from codewell.search.index.shard import Shard
        shard = Shard.open(Path(sys.argv[1]))
        with (shard.path / "content.bin").open("r+b") as f:
            f.truncate(0)
        bytes(shard.content[len(shard.content) - 10 :])
        """
    )
    shard = shard_of(tmp_path)
    src = Path(__file__).resolve().parents[3] / "src"
    result = subprocess.run(
        [sys.executable, "-c", script, str(shard.path)],
        env={"PYTHONPATH": str(src)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == -7, (result.returncode, result.stderr[-2000:])
