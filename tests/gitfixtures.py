"""Builders of real git repositories for tests (git CLI in tmp_path), shared by every capability.

    repo = make_repo(tmp_path / "src", {"README.md": "hello\\n", "img/logo.png": PNG_BYTES},
                     branches={"feature": {"new.txt": "x\\n"}}, tags=["v1.0"], annotated_tags={"v2.0": "release"})
    commit(repo, {"a.txt": "changed\\n"}, message="second", delete=["old.txt"], rename={"b.txt": "c.txt"})
    register_local_repo(runtime, repo, "local/src")   # registers + mirrors synchronously

Commits are deterministic (fixed author, committer and dates), so SHAs are stable within a test run.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from codewell.repos.service import register_local_repo as register

if TYPE_CHECKING:
    from codewell.repos.service import Repo
    from codewell.runtime import Runtime

Files = Mapping[str, str | bytes]

# The first bytes of a real PNG (signature + IHDR) plus NULs: binary by any heuristic.
PNG_BYTES = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489") + b"\x00" * 64

_counter = {"tick": 0}


def _env(date: str | None = None) -> dict[str, str]:
    _counter["tick"] += 1
    when = date or f"2024-01-01T00:00:{_counter['tick'] % 60:02d}+00:00"
    return {
        **os.environ,
        "GIT_AUTHOR_NAME": "Ada Lovelace",
        "GIT_AUTHOR_EMAIL": "ada@example.com",
        "GIT_COMMITTER_NAME": "Ada Lovelace",
        "GIT_COMMITTER_EMAIL": "ada@example.com",
        "GIT_AUTHOR_DATE": when,
        "GIT_COMMITTER_DATE": when,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }


def git(repo: Path, *args: str, date: str | None = None) -> str:
    """Run git in `repo` and return its stdout (raises CalledProcessError with stderr on failure)."""
    result = subprocess.run(
        ["git", *args], cwd=repo, env=_env(date), capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL
    )
    if result.returncode != 0:
        raise subprocess.CalledProcessError(result.returncode, ["git", *args], result.stdout, result.stderr)
    return result.stdout


def write_files(repo: Path, files: Files) -> None:
    for relpath, content in files.items():
        target = repo / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")


def commit(
    repo: Path,
    files: Files | None = None,
    *,
    message: str = "update",
    delete: Iterable[str] = (),
    rename: Mapping[str, str] | None = None,
    date: str | None = None,
    author: tuple[str, str] | None = None,
) -> str:
    """Write/delete/rename files in the work tree, commit everything, and return the new commit SHA."""
    for old, new in (rename or {}).items():
        (repo / new).parent.mkdir(parents=True, exist_ok=True)
        git(repo, "mv", old, new)
    for relpath in delete:
        git(repo, "rm", "-q", "-r", relpath)
    write_files(repo, files or {})
    git(repo, "add", "-A")
    extra = ["--author", f"{author[0]} <{author[1]}>"] if author else []
    git(repo, "commit", "-q", "--allow-empty", "-m", message, *extra, date=date)
    return git(repo, "rev-parse", "HEAD").strip()


def make_repo(
    path: Path,
    files: Files,
    *,
    branches: Mapping[str, Files] | Iterable[str] | None = None,
    tags: Iterable[str] = (),
    annotated_tags: Mapping[str, str] | None = None,
    default_branch: str = "main",
    message: str = "initial commit",
) -> Path:
    """A work-tree repository at `path` with one commit of `files` on `default_branch`.

    `branches`: a mapping gives each branch one more commit of its files on top of the first commit; a list
    of names creates branches at the first commit (the default branch stays checked out). `tags` are
    lightweight, `annotated_tags` map names to messages; both point at the default branch's commit.
    """
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", default_branch)
    commit(path, files, message=message)
    for name in tags:
        git(path, "tag", name)
    for name, tag_message in (annotated_tags or {}).items():
        git(path, "tag", "-a", name, "-m", tag_message)
    if branches is not None and not isinstance(branches, Mapping):
        for branch in branches:
            git(path, "branch", branch)
        branches = None
    for branch, branch_files in (branches or {}).items():
        git(path, "checkout", "-q", "-b", branch)
        commit(path, branch_files, message=f"work on {branch}")
        git(path, "checkout", "-q", default_branch)
    return path


def make_bare(path: Path, source: Path) -> Path:
    """A bare clone of `source` at `path` (for file:// URL and bare-directory tests)."""
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(source), str(path)], check=True, env=_env(), capture_output=True
    )
    return path


def big_text(lines: int = 5000, width: int = 60) -> str:
    """Numbered text lines, `lines` of them, each about `width` characters (5000 x 60 ≈ 300 KB > 128 KB)."""
    return "".join(f"line {n:06d} " + "x" * (width - 12) + "\n" for n in range(1, lines + 1))


def deep_files(depth: int = 12, name: str = "leaf.txt") -> dict[str, str]:
    """One file nested `depth` directories deep (d1/d2/.../leaf.txt)."""
    parts = [f"d{n}" for n in range(1, depth + 1)]
    return {"/".join([*parts, name]): "deep\n"}


def sample_repo(path: Path) -> Path:
    """The standard fixture: text, binary, >128 KB, deep tree, a rename, branches, light and annotated tags.

    main: README.md, src/app.py, src/util.py, docs/guide.md, assets/logo.png, big.txt, d1/.../d12/leaf.txt,
    old_name.py renamed to new_name.py in a second commit; tags v1.0 (light) and v2.0 (annotated) on the
    first commit, v3.0 (annotated) on the second; branch `feature` adds feature.txt on top of main.
    """
    make_repo(
        path,
        {
            "README.md": "# Sample\n\nA sample repository.\n",
            "src/app.py": "import util\n\n\ndef main():\n    return util.helper()\n",
            "src/util.py": "def helper():\n    return 42\n",
            "docs/guide.md": "Guide\n",
            "assets/logo.png": PNG_BYTES,
            "big.txt": big_text(),
            "old_name.py": "print('renamed')\n",
            **deep_files(),
        },
        tags=["v1.0"],
        annotated_tags={"v2.0": "release 2.0"},
    )
    commit(
        path,
        {"src/app.py": "import util\n\n\ndef main():\n    return util.helper() + 1\n"},
        message="rename",
        rename={"old_name.py": "new_name.py"},
    )
    git(path, "tag", "-a", "v3.0", "-m", "release 3.0")
    git(path, "checkout", "-q", "-b", "feature")
    commit(path, {"feature.txt": "feature work\n"}, message="feature")
    git(path, "checkout", "-q", "main")
    return path


def register_local_repo(runtime: Runtime, path: Path, name: str, *, private: bool = False) -> Repo:
    """Register the repository at `path` as `name` and mirror it synchronously; return the ready Repo."""

    return register(runtime, path, name, private=private)
