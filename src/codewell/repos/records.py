"""Values the repos service returns (repositories, contents, refs, sync outcomes) and the service's limits.

Plain frozen dataclasses: other capabilities receive these, never the repos tables' rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

# Limits of the spec (Limits table) and of issue #3.
MAX_FILE_BYTES = 128 * 1024
TRUNCATED_LINES = 200
MAX_LIST_FILES = 1000
LIST_REPOS_DEFAULT, LIST_REPOS_MAX = 50, 10000
LIST_REFS_DEFAULT, LIST_REFS_MAX = 100, 500
# Exponential back-off after failed syncs: 30 s, 60 s, 120 s, ... capped at 6 hours.
BACKOFF_BASE_SECONDS = 30
BACKOFF_MAX_SECONDS = 6 * 3600
SYNC_STATES = ("new", "cloning", "ready", "failed")
# Repository names are at most this long (the repos table's column); longer queries cannot match.
MAX_NAME_CHARS = 512
NOT_FOUND_HINT = "check the name with list_repos (names look like github.com/org/repo)"


@dataclass(frozen=True)
class Repo:
    id: int
    name: str
    description: str
    default_branch: str | None
    private: bool
    fork: bool
    archived: bool
    stars: int | None
    clone_url: str
    mirror_path: Path
    sync_state: str
    last_error: str | None
    last_fetched_at: datetime | None
    size_bytes: int | None
    extra_branches: tuple[str, ...]
    kind: str = "git"
    source: str = "manual"
    sync_interval_seconds: int = 3600
    next_sync_at: datetime | None = None
    failures: int = 0

    @property
    def cloned(self) -> bool:
        """True when the mirror exists on disk (it can be read even while a later sync failed)."""
        return self.mirror_path.is_dir()


@dataclass(frozen=True)
class RepoPage:
    repos: list[Repo]
    has_more: bool


@dataclass(frozen=True)
class ResolvedRevision:
    repo: Repo
    revision: str  # as asked, or the default branch when none was asked
    commit: str  # full 40-hex SHA


@dataclass(frozen=True)
class FileContent:
    """A file's lines at a commit (or, for binary files, only its size and type)."""

    repo: str
    path: str
    revision: str
    commit: str
    url: str
    size_bytes: int
    binary: bool = False
    content_type: str = "text/plain"
    lines: list[str] = field(default_factory=list)
    start_line: int = 1  # line number of lines[0]
    total_lines: int = 0
    truncated: bool = False
    notice: str | None = None

    @property
    def end_line(self) -> int:
        return self.start_line + len(self.lines) - 1


@dataclass(frozen=True)
class FileEntry:
    path: str  # repo-relative; directories end with "/"
    kind: str  # "dir" | "file" | "symlink" | "submodule"


@dataclass(frozen=True)
class FileListing:
    repo: str
    path: str
    revision: str
    commit: str
    entries: list[FileEntry]
    total: int
    truncated: bool
    notice: str | None = None


@dataclass(frozen=True)
class RefInfo:
    name: str  # full name: refs/heads/main, refs/tags/v1.0
    short_name: str
    kind: str  # "branch" | "tag"
    commit: str
    annotated: bool
    default: bool


@dataclass(frozen=True)
class RefList:
    repo: str
    refs: list[RefInfo]
    total: int
    has_more: bool


@dataclass(frozen=True)
class SyncOutcome:
    repo: Repo
    ok: bool
    changed: bool
    cloned: bool
    error: str | None = None


@dataclass
class ReconcileReport:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


RepoListener = Callable[[Repo], None]


@dataclass(frozen=True, slots=True)
class NewRepo:
    """A repository to register in bulk (`RepoService.add_repos`): a clone URL without credentials."""

    name: str
    clone_url: str
    private: bool = False
    fork: bool = False
    archived: bool = False
    description: str = ""
    credentials_env: str | None = None
    sync_interval_seconds: int = 3600


class RepoRef(NamedTuple):
    """The few facts about a readable repository other capabilities' queries need (history, search).

    Cheaper than `Repo` (three columns read); `mirror_path` is the bare mirror to open read-only. A named
    tuple with the mirror path built on demand, not a dataclass with a `Path` field: a visibility listing
    makes thousands of these per request, and the frozen dataclass plus the path cost ~6 µs each (a third
    of a 5,000-repository listing), the tuple ~0.4 µs.
    """

    id: int
    name: str
    default_branch: str | None
    mirror_root: Path

    @property
    def mirror_path(self) -> Path:
        return self.mirror_root / f"{self.name}.git"
