"""Commit and revision diffs read in-process with pygit2 (one libgit2 call per commit, no subprocess)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pygit2
from pygit2.enums import DiffFind

STATUS = {"A": "added", "M": "modified", "D": "deleted", "R": "renamed", "C": "copied", "T": "modified"}


@dataclass(slots=True)
class DiffLine:
    origin: str  # "+", "-" or " "
    text: str  # without the trailing newline
    old_lineno: int  # -1 when the line is not in the old side
    new_lineno: int
    # Byte offsets (start, end) of the pattern's matches in `text`, for diff_search.
    ranges: list[tuple[int, int]] = field(default_factory=list)


@dataclass(slots=True)
class DiffHunk:
    old_start: int
    old_lines: int
    new_start: int
    new_lines: int
    section: str  # the text after the second @@ (the enclosing function, when git finds one)
    lines: list[DiffLine]

    @property
    def header(self) -> str:
        return f"@@ -{self.old_start},{self.old_lines} +{self.new_start},{self.new_lines} @@ {self.section}".rstrip()

    def body(self) -> str:
        return "".join(f"{line.origin}{line.text}\n" for line in self.lines)


@dataclass(slots=True)
class FileDiff:
    path: str
    old_path: str
    status: str  # added | modified | deleted | renamed | copied
    added: int
    deleted: int
    binary: bool
    hunks: list[DiffHunk]
    truncated: bool = False


class MirrorCache:
    """A few open pygit2 repositories per thread, reused across calls (opening one maps its packfiles).

    Per thread because libgit2 objects must not be used from several threads at once; tool handlers run
    in a thread pool, so each worker keeps its own handles. Large enough for a query over a few hundred
    repositories: candidates come newest first across repositories, so a small cache would thrash.
    """

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._local = threading.local()

    def open(self, path: Path) -> pygit2.Repository:
        repos: OrderedDict[Path, pygit2.Repository] | None = getattr(self._local, "repos", None)
        if repos is None:
            repos = self._local.repos = OrderedDict()
        repo = repos.pop(path, None)
        if repo is None:
            repo = pygit2.Repository(str(path))
        repos[path] = repo
        while len(repos) > self._size:
            repos.popitem(last=False)
        return repo


def commit_diff(repo: pygit2.Repository, sha: str, *, context_lines: int = 3) -> Any | None:
    """The diff a non-merge commit introduces (None for merges and missing commits, like `git log -p`).

    Renames are detected as `git log -p` does by default (50% similarity): a moved file shows only its
    edits, so its unchanged lines are neither added nor removed for diff_search and contentTerms.
    """
    try:
        commit: Any = repo[sha]
    except (KeyError, ValueError):
        return None
    if not isinstance(commit, pygit2.Commit):
        return None
    parents = commit.parent_ids
    if len(parents) > 1:
        return None
    if not parents:
        return commit.tree.diff_to_tree(swap=True, context_lines=context_lines)
    diff = repo[parents[0]].tree.diff_to_tree(commit.tree, context_lines=context_lines)
    # Explicit flags: the default (diff.renames from the mirror's config) could differ per repository.
    diff.find_similar(flags=DiffFind.FIND_RENAMES)
    return diff


def changed_lines(diff: Any) -> Iterator[tuple[str, str]]:
    """(origin, text) of every added and removed line of a diff.

    Reads libgit2's rendered patch text instead of per-line Python objects (several times faster), tracking
    where hunks start so that file headers (`--- a/x`, `+++ b/x`) are never mistaken for changed lines.
    """
    in_hunk = False
    for line in (diff.patch or "").split("\n"):
        if line.startswith("diff --git "):
            in_hunk = False
        elif line.startswith("@@"):
            in_hunk = True
        elif in_hunk and line[:1] in ("+", "-"):
            yield line[0], line[1:]


def file_diffs(diff: Any, *, max_lines_per_file: int) -> Iterator[FileDiff]:
    """Every file of a diff with its status, line counts and hunks (bodies capped per file)."""
    for patch in diff:
        if patch is None:
            continue
        delta = patch.delta
        added, deleted = (0, 0) if delta.is_binary else patch.line_stats[1:]
        hunks: list[DiffHunk] = []
        emitted, truncated = 0, False
        if not delta.is_binary:
            for hunk in patch.hunks:
                if emitted >= max_lines_per_file:
                    truncated = True
                    break
                lines = [
                    DiffLine(line.origin, line.content.rstrip("\n"), line.old_lineno, line.new_lineno)
                    for line in hunk.lines
                    if line.origin in "+- "
                ]
                emitted += len(lines)
                section = hunk.header.split("@@", 2)[-1].strip() if hunk.header.count("@@") >= 2 else ""
                hunks.append(DiffHunk(hunk.old_start, hunk.old_lines, hunk.new_start, hunk.new_lines, section, lines))
        yield FileDiff(
            path=delta.new_file.path,
            old_path=delta.old_file.path,
            status=STATUS.get(delta.status_char(), "modified"),
            added=added,
            deleted=deleted,
            binary=bool(delta.is_binary),
            hunks=hunks,
            truncated=truncated,
        )
