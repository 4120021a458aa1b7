"""history's git processes get repos' small environment, never the server's (issue #33 item 6)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from codewell.history import gitlog
from tests.gitfixtures import make_bare, make_repo


def test_git_log_children_never_see_the_servers_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = shutil.which("git")
    assert real is not None
    mirror = make_bare(tmp_path / "m.git", make_repo(tmp_path / "w", {"a.txt": "a\n"}))
    # A `git` first on PATH that saves the environment it was started with, then runs the real git.
    records = tmp_path / "environs"
    records.mkdir()
    (tmp_path / "bin").mkdir()
    wrapper = tmp_path / "bin" / "git"
    wrapper.write_text(f'#!/bin/sh\ncat /proc/$$/environ > "{records}/$$"\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CW_PLANTED_TOKEN", "planted-secret-value")

    tips = gitlog.list_ref_tips(mirror)
    assert [tip.name for tip in tips] == ["refs/heads/main"]
    commits = list(gitlog.log_commits(mirror, [tips[0].commit]))
    assert len(commits) == 1
    assert list(gitlog.rev_list(mirror, [tips[0].commit])) == [tips[0].commit]
    assert gitlog.is_ancestor(mirror, tips[0].commit, tips[0].commit)

    environs = [path.read_bytes() for path in records.iterdir()]
    assert len(environs) == 4
    for raw in environs:
        assert b"planted-secret-value" not in raw
        assert b"CW_PLANTED_TOKEN" not in raw
        assert b"\0PATH=" in b"\0" + raw
