"""What a mirror holds on disk: git's objects and refs, none of its template files (thousands of mirrors)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from codewell.repos.sync import clone_mirror
from tests.gitfixtures import make_repo


def test_a_mirror_has_no_template_files_and_still_reads(tmp_path: Path) -> None:
    source = make_repo(tmp_path / "src", {"a.txt": "hello\n"})
    mirror = tmp_path / "mirrors" / "a.git"
    clone_mirror(str(source), mirror)
    assert not (mirror / "hooks").exists()
    assert not (mirror / "description").exists()
    shown = subprocess.run(
        ["git", "--git-dir", str(mirror), "show", "HEAD:a.txt"], capture_output=True, text=True, check=True
    )
    assert shown.stdout == "hello\n"
