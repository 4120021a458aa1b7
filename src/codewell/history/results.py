"""What the history service returns: commits, diff matches, comparisons, contributor repositories."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from codewell.history import diffs


@dataclass(frozen=True, slots=True)
class CommitInfo:
    """One indexed commit as returned to callers."""

    repo: str
    sha: str
    parents: tuple[str, ...]
    author_name: str
    author_email: str
    authored_at: datetime
    committed_at: datetime
    subject: str
    message: str
    paths: tuple[str, ...]
    # Branches (full ref names) whose history contains the commit.
    refs: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CommitSearchResult:
    commits: list[CommitInfo]
    limit_hit: bool  # more commits match than were returned
    timed_out: bool  # the content scan stopped at its time budget; there may be more matches
    unknown_repos: list[str]  # entries of `repos` that name no readable repository
    # unknown entry -> the one readable repository it probably means ("did you mean")
    suggestions: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DiffMatch:
    """A commit whose diff matched, with the matching hunks (each carrying its file path)."""

    commit: CommitInfo
    hunks: list[tuple[str, diffs.DiffHunk]]


@dataclass(frozen=True, slots=True)
class DiffSearchResult:
    matches: list[DiffMatch]
    limit_hit: bool
    timed_out: bool
    unknown_repos: list[str]
    suggestions: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Comparison:
    repo: str
    base: str
    head: str
    base_commit: str
    head_commit: str
    files: list[diffs.FileDiff]  # this page, ordered by path
    total_files: int
    total_added: int
    total_deleted: int
    has_next_page: bool
    end_cursor: str | None
    offset: int = 0  # position of files[0] among all changed files (ordered by path)


@dataclass(frozen=True, slots=True)
class ContributorRepo:
    repo: str
    commit_count: int
    last_commit_at: datetime
