"""Small git repositories with controlled authors and dates, built with the git CLI, for history tests."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from codewell.core.actors import INTERNAL
from codewell.history.service import HistoryService
from codewell.repos.service import Repo, RepoService
from codewell.runtime import Runtime


@dataclass
class RepoBuilder:
    """A working repository; `commit` writes files and commits with the given identity and date."""

    path: Path
    shas: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str, env: dict[str, str] | None = None) -> str:
        identity = {"GIT_COMMITTER_NAME": "Tagger", "GIT_COMMITTER_EMAIL": "tagger@example.com"}
        full_env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(self.path), **identity, **(env or {})}
        out = subprocess.run(["git", *args], cwd=self.path, env=full_env, capture_output=True, text=True, check=True)
        return out.stdout.strip()

    def commit(
        self,
        message: str,
        files: dict[str, str | None],
        *,
        author: str = "Alice Example <alice@example.com>",
        date: str = "2024-01-01T12:00:00Z",
        label: str | None = None,
    ) -> str:
        """Write (or delete, when None) files and commit them; return the new SHA."""
        for name, content in files.items():
            target = self.path / name
            if content is None:
                target.unlink()
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
        self.git("add", "-A")
        name, email = author.rstrip(">").split(" <")
        env = {
            "GIT_AUTHOR_NAME": name,
            "GIT_AUTHOR_EMAIL": email,
            "GIT_AUTHOR_DATE": date,
            "GIT_COMMITTER_NAME": name,
            "GIT_COMMITTER_EMAIL": email,
            "GIT_COMMITTER_DATE": date,
        }
        self.git("commit", "-q", "--allow-empty", "-m", message, env=env)
        sha = self.git("rev-parse", "HEAD")
        if label:
            self.shas[label] = sha
        return sha


def register(runtime: Runtime, path: Path, name: str, *, private: bool = False) -> Repo:
    """Register a local repository, clone it and index its commits (what the history.index job does after a
    sync in a wired process) and return it."""
    repos = runtime.get(RepoService)
    repos.add_repo(INTERNAL, str(path), name=name, private=private)
    outcome = repos.sync_repo(INTERNAL, name)
    assert outcome.ok, outcome.error
    history(runtime).index_repo(outcome.repo)
    return outcome.repo


def resync(runtime: Runtime, name: str) -> None:
    outcome = runtime.get(RepoService).sync_repo(INTERNAL, name)
    assert outcome.ok, outcome.error
    history(runtime).index_repo(outcome.repo)


def history(runtime: Runtime) -> HistoryService:
    return runtime.get(HistoryService)


BIG = ("big/a.txt", "big/b.txt", "big/c.txt")


def _lines(prefix: str, count: int) -> str:
    return "".join(f"{prefix} line {i:04d} " + "x" * 80 + "\n" for i in range(count))


def build_release(runtime: Runtime, tmp_path: Path) -> RepoBuilder:
    """v1 → v2: 36 small changes and 3 files whose diffs are each larger than the output budget alone."""
    work = RepoBuilder(tmp_path / "rel")
    files: dict[str, str | None] = {f"small/{i:02d}.txt": "old\n" for i in range(36)}
    files.update({name: _lines("old", 900) for name in BIG})
    work.commit("v1", files)
    work.git("tag", "v1")
    changed: dict[str, str | None] = {f"small/{i:02d}.txt": "new\n" for i in range(36)}
    # Every 10th line changes: 90 separate hunks (3 lines of context each side) per big file.
    edited = "".join(
        line if i % 10 else line.replace("old", "new") for i, line in enumerate(_lines("old", 900).splitlines(True))
    )
    changed.update(dict.fromkeys(BIG, edited))
    work.commit("v2", changed)
    work.git("tag", "v2")
    register(runtime, work.path, "rel.example/r")
    return work
