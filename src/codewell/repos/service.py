"""The repos service API: registered repositories, who may read them, their mirrors and their contents.

Every call takes the acting user and applies one visibility rule (`visibility_clause`): site admins and
INTERNAL read everything, users read public repositories and private ones granted to them, anonymous
visitors read public repositories only. A repository the actor may not read raises `NotFound` exactly
like a missing one.
"""

from __future__ import annotations

import logging
import mimetypes
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import pygit2
from sqlalchemy import ColumnElement, Integer, bindparam, delete, exists, false, select, true
from sqlalchemy.engine import Row
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from codewell.config.schema import SiteConfig
from codewell.core.actors import INTERNAL, Actor
from codewell.core.errors import Conflict, InvalidInput, NotFound, PermissionDenied, Unavailable
from codewell.db.base import utcnow
from codewell.repos import git, metrics
from codewell.repos.models import RepoPermission, RepoRow
from codewell.repos.sources import RepoSpec, check_name, discover, name_from_url, split_credentials
from codewell.repos.sync import Credentials, clone_mirror, ensure_head, fetch_mirror, remove_mirror

if TYPE_CHECKING:
    from codewell.runtime import Runtime

log = logging.getLogger(__name__)

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


def backoff_seconds(failures: int) -> int:
    """Seconds to wait before retrying after `failures` consecutive failed syncs (exponential, capped)."""
    return int(min(BACKOFF_MAX_SECONDS, BACKOFF_BASE_SECONDS * 2 ** max(0, failures - 1)))


def clean_path(path: str, *, required: bool) -> str:
    """A repo-relative path without `.`/empty parts; InvalidInput for NUL bytes, absolute paths and `..`."""
    if "\x00" in path:
        raise InvalidInput("path contains a NUL byte", hint="pass a plain repository-relative path")
    if path.startswith("/"):
        raise InvalidInput(
            f"path {path!r} is absolute", hint="paths are relative to the repository root, e.g. src/main.py"
        )
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise InvalidInput(f"path {path!r} contains '..'", hint="paths are relative to the repository root")
    if required and not parts:
        raise InvalidInput("path is required", hint="give a file path such as README.md; list_files shows them")
    return "/".join(parts)


def _sniff_type(path: str, data: bytes) -> str:
    signatures = (
        (b"\x89PNG", "image/png"),
        (b"\xff\xd8\xff", "image/jpeg"),
        (b"GIF8", "image/gif"),
        (b"%PDF", "application/pdf"),
        (b"PK\x03\x04", "application/zip"),
        (b"\x1f\x8b", "application/gzip"),
        (b"\x7fELF", "application/x-elf"),
    )
    for magic, kind in signatures:
        if data.startswith(magic):
            return kind
    guessed, _ = mimetypes.guess_type(path)
    return guessed or "application/octet-stream"


def _scope(actor: Actor) -> str:
    if actor.is_internal or actor.site_admin:
        return "all"
    if actor.is_user and actor.user_id is not None:
        return "user"
    return "public"


def _visibility(scope: str, user_id: object) -> ColumnElement[bool]:
    """Site admins and INTERNAL read everything; users public repos and those granted; others public ones."""
    if scope == "all":
        return true()
    if scope == "user":
        granted = exists().where(RepoPermission.repo_id == RepoRow.id, RepoPermission.user_id == user_id)
        return (RepoRow.private == false()) | granted
    return RepoRow.private == false()


_GET_STATEMENTS = {
    scope: select(*RepoRow.__table__.columns).where(
        RepoRow.name == bindparam("name"), _visibility(scope, bindparam("user_id", type_=Integer))
    )
    for scope in ("all", "user", "public")
}


class RepoService:
    """Repositories: registration, visibility, mirrors (sync) and reading their contents."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.db = runtime.db
        self.mirror_root = runtime.settings.data_dir / "repos"
        self._sync_listeners: list[RepoListener] = []
        self._removal_listeners: list[RepoListener] = []
        # Userinfo from configured URLs: used for fetches, kept in memory only.
        self._secrets: dict[str, str] = {}
        self._sync_locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self.source_errors: list[str] = []

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    # --- visibility -----------------------------------------------------------------------------------

    @staticmethod
    def visibility_clause(actor: Actor) -> ColumnElement[bool]:
        """SQL condition on RepoRow: the repositories `actor` may read (the one visibility rule)."""
        return _visibility(_scope(actor), actor.user_id)

    def _mirror_path(self, name: str) -> Path:
        return self.mirror_root / f"{name}.git"

    def _to_repo(self, row: RepoRow | Row[Any]) -> Repo:
        """The Repo of an ORM row or of a Core row of the repos table (same attribute names)."""
        return Repo(
            id=row.id,
            name=row.name,
            description=row.description,
            default_branch=row.default_branch,
            private=row.private,
            fork=row.fork,
            archived=row.archived,
            stars=row.stars,
            clone_url=row.clone_url,
            mirror_path=self._mirror_path(row.name),
            sync_state=row.sync_state,
            last_error=row.last_error,
            last_fetched_at=row.last_fetched_at,
            size_bytes=row.size_bytes,
            extra_branches=tuple(b for b in row.extra_branches.split("\n") if b),
            kind=row.kind,
            source=row.source,
            sync_interval_seconds=row.sync_interval_seconds,
            next_sync_at=row.next_sync_at,
            failures=row.failures,
        )

    # --- listing and lookup ---------------------------------------------------------------------------

    def list_repos(self, actor: Actor, query: str = "", limit: int = LIST_REPOS_DEFAULT) -> RepoPage:
        """Readable repositories whose name contains `query` (case-insensitive), by name, at most `limit`."""
        if not 1 <= limit <= LIST_REPOS_MAX:
            raise InvalidInput(f"limit must be between 1 and {LIST_REPOS_MAX} (got {limit})", hint="the default is 50")
        if "\x00" in query:
            raise InvalidInput("query contains a NUL byte", hint="pass a substring of repository names")
        statement = select(RepoRow).where(self.visibility_clause(actor))
        if query:
            escaped = query.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            statement = statement.where(RepoRow.name.ilike(f"%{escaped}%", escape="\\"))
        with self.db.session() as session:
            rows = session.scalars(statement.order_by(RepoRow.name).limit(limit + 1)).all()
            repos = [self._to_repo(row) for row in rows]
        return RepoPage(repos[:limit], has_more=len(repos) > limit)

    def get(self, actor: Actor, name: str) -> Repo:
        """The repository called `name`; NotFound when it is missing or the actor may not read it."""
        # Prebuilt Core statements: this lookup runs on every read_file/list_files call, and building and
        # hashing a fresh ORM statement each time cost more than reading the blob.
        with self.db.engine.connect() as connection:
            row = connection.execute(_GET_STATEMENTS[_scope(actor)], {"name": name, "user_id": actor.user_id}).first()
        if row is None:
            raise NotFound(f"repository {name!r} not found", hint=NOT_FOUND_HINT)
        return self._to_repo(row)

    def readable(self, actor: Actor) -> list[Repo]:
        """Every repository the actor may read, by name."""
        with self.db.session() as session:
            rows = session.scalars(select(RepoRow).where(self.visibility_clause(actor)).order_by(RepoRow.name))
            return [self._to_repo(row) for row in rows]

    def readable_ids(self, actor: Actor) -> frozenset[int]:
        """IDs of every repository the actor may read."""
        with self.db.session() as session:
            return frozenset(session.scalars(select(RepoRow.id).where(self.visibility_clause(actor))))

    def all_repos(self, actor: Actor) -> list[Repo]:
        """Every registered repository with its sync state (site admins only)."""
        self._require_admin(actor)
        return self.readable(actor)

    # --- reading contents -----------------------------------------------------------------------------

    def resolve(self, actor: Actor, name: str, revision: str | None = None) -> ResolvedRevision:
        """The commit `revision` (default branch when None) names in a readable repository."""
        repo = self.get(actor, name)
        commit = self._resolve_commit(repo, revision)
        return ResolvedRevision(repo, revision or repo.default_branch or "HEAD", str(commit.id))

    def _open(self, repo: Repo) -> pygit2.Repository:
        try:
            return git.open_mirror(repo.mirror_path)
        except (OSError, pygit2.GitError):
            raise Unavailable(
                f"repository {repo.name!r} is not cloned yet (sync state: {repo.sync_state})",
                hint="wait for the first sync, or see `codewell repos status` for errors",
            ) from None

    def _resolve_commit(self, repo: Repo, revision: str | None) -> pygit2.Commit:
        mirror = self._open(repo)
        if revision is None or revision == "":
            revision = repo.default_branch or git.default_branch(mirror)
            if revision is None:
                raise NotFound(f"repository {repo.name!r} has no commits yet", hint="push a branch to it first")
        if "\x00" in revision or not git.valid_revision(revision):
            raise InvalidInput(
                f"invalid revision {revision!r}", hint="give a branch, a tag, a commit SHA or HEAD, e.g. main or v1.2"
            )
        commit = git.resolve_commit(mirror, revision)
        if commit is None:
            raise NotFound(
                f"revision {revision!r} not found in repository {repo.name!r}",
                hint="list_refs shows the branches and tags; commit SHAs need at least 4 hex digits",
            )
        return commit

    def _blob_url(self, name: str, commit: str, path: str, line_range: tuple[int, int] | None) -> str:
        url = f"{self.runtime.external_url}/{name}@{commit}/-/blob/{path}"
        return url + (f"%3FL{line_range[0]}-{line_range[1]}" if line_range else "")

    def read_file(
        self,
        actor: Actor,
        name: str,
        path: str,
        start_line: int | None = None,
        end_line: int | None = None,
        revision: str | None = None,
    ) -> FileContent:
        """A file's numbered lines at `revision`: ranges, a 200-line cut for files over 128 KB, binary detection.

        An `end_line` past the end is clamped to the last line; a `start_line` past the end is InvalidInput.
        """
        clean = clean_path(path, required=True)
        repo = self.get(actor, name)
        commit = self._resolve_commit(repo, revision)
        sha = str(commit.id)
        shown_revision = revision or repo.default_branch or "HEAD"
        obj = git.object_at(commit, clean)
        if obj is None:
            raise NotFound(
                f"file {clean!r} not found in {name}@{shown_revision}",
                hint="list_files shows what a directory contains",
            )
        if isinstance(obj, pygit2.Tree):
            raise InvalidInput(f"{clean!r} is a directory, not a file", hint="use list_files to see its contents")
        if not isinstance(obj, pygit2.Blob):
            raise InvalidInput(f"{clean!r} is a submodule, not a file", hint="read files inside its own repository")
        asked_range = self._check_range(start_line, end_line)
        proto = FileContent(name, clean, shown_revision, sha, self._blob_url(name, sha, clean, None), obj.size)
        if obj.is_binary:
            kind = _sniff_type(clean, obj.data[:16])
            notice = f"Binary file ({obj.size} bytes, {kind}); its contents are not shown."
            return replace(proto, binary=True, content_type=kind, notice=notice)
        return self._text_content(proto, obj.data, asked_range)

    @staticmethod
    def _check_range(start_line: int | None, end_line: int | None) -> tuple[int, int | None] | None:
        if start_line is None and end_line is None:
            return None
        start = 1 if start_line is None else start_line
        if start < 1:
            raise InvalidInput(f"startLine must be 1 or more (got {start})", hint="lines are numbered from 1")
        if end_line is not None and end_line < start:
            raise InvalidInput(
                f"endLine {end_line} is before startLine {start}", hint="give endLine ≥ startLine, or omit it"
            )
        return start, end_line

    def _text_content(self, proto: FileContent, data: bytes, asked: tuple[int, int | None] | None) -> FileContent:
        text = data.decode("utf-8", "replace")
        lines = text.split("\n")
        if text.endswith("\n") or not text:
            # "a\nb\n" is two lines, not three (the reference's spurious empty last line).
            lines.pop()
        if "\r" in text:
            lines = [line.removesuffix("\r") for line in lines]
        total = len(lines)
        start, end = 1, total
        if asked is not None:
            start, end = asked[0], min(asked[1] if asked[1] is not None else total, total)
            if start > total:
                raise InvalidInput(
                    f"startLine {start} is past the end of the file ({total} lines)",
                    hint=f"ask for lines between 1 and {total}",
                )
        selected = lines[start - 1 : end]
        truncated, notice = False, None
        size = len(data) if asked is None else sum(len(line) + 1 for line in selected)
        if size > MAX_FILE_BYTES and len(selected) > TRUNCATED_LINES:
            selected = selected[:TRUNCATED_LINES]
            truncated = True
            shown_end = start + TRUNCATED_LINES - 1
            notice = (
                f"File truncated: it is over 128 KB ({len(data)} bytes, {total} lines); showing lines "
                f"{start}-{shown_end}. Read further with startLine and endLine, "
                f"e.g. startLine={shown_end + 1}, endLine={min(total, shown_end + TRUNCATED_LINES)}."
            )
        url = proto.url
        if asked is not None:
            url = self._blob_url(proto.repo, proto.commit, proto.path, (start, start + len(selected) - 1))
        return replace(
            proto, url=url, lines=selected, start_line=start, total_lines=total, truncated=truncated, notice=notice
        )

    def list_files(self, actor: Actor, name: str, path: str = "", revision: str | None = None) -> FileListing:
        """Direct children of directory `path` at `revision`: directories first (with `/`), at most 1000."""
        clean = clean_path(path, required=False)
        repo = self.get(actor, name)
        commit = self._resolve_commit(repo, revision)
        obj = git.object_at(commit, clean)
        shown_revision = revision or repo.default_branch or "HEAD"
        if obj is None:
            raise NotFound(
                f"directory {clean!r} not found in {name}@{shown_revision}",
                hint="list the parent directory first (path empty = repository root)",
            )
        if not isinstance(obj, pygit2.Tree):
            raise InvalidInput(f"{clean!r} is a file, not a directory", hint="use read_file to read it")
        items = git.tree_items(obj)
        prefix = f"{clean}/" if clean else ""
        entries = [FileEntry(prefix + item.name + ("/" if item.kind == "dir" else ""), item.kind) for item in items]
        truncated = len(entries) > MAX_LIST_FILES
        notice = None
        if truncated:
            notice = (
                f"Showing the first {MAX_LIST_FILES} of {len(entries)} entries; "
                "list a subdirectory or use keyword_search with a file: filter to find more."
            )
        return FileListing(
            name, clean, shown_revision, str(commit.id), entries[:MAX_LIST_FILES], len(entries), truncated, notice
        )

    def list_refs(
        self,
        actor: Actor,
        name: str,
        tags_only: bool = False,
        heads_only: bool = False,
        contains_commit: str | None = None,
        limit: int = LIST_REFS_DEFAULT,
    ) -> RefList:
        """Branches and tags (both unless one filter is set), optionally only those containing a commit.

        `tags_only` and `heads_only` together mean both kinds. The default branch comes first, then
        branches, then tags, each by name.
        """
        if not 1 <= limit <= LIST_REFS_MAX:
            raise InvalidInput(f"limit must be between 1 and {LIST_REFS_MAX} (got {limit})", hint="the default is 100")
        repo = self.get(actor, name)
        mirror = self._open(repo)
        kinds = {"branch", "tag"}
        if tags_only != heads_only:
            kinds = {"tag"} if tags_only else {"branch"}
        items = [item for item in git.refs(mirror) if item.kind in kinds]
        if contains_commit:
            target = str(self._resolve_commit(repo, contains_commit).id)
            items = [item for item in items if _contains(mirror, item.commit, target)]
        default_ref = f"refs/heads/{repo.default_branch}" if repo.default_branch else None
        items.sort(key=lambda item: (item.name != default_ref, item.kind != "branch", item.name))
        refs = [
            RefInfo(
                item.name,
                item.name.removeprefix("refs/heads/").removeprefix("refs/tags/"),
                item.kind,
                item.commit,
                item.annotated,
                item.name == default_ref,
            )
            for item in items
        ]
        return RefList(name, refs[:limit], len(refs), len(refs) > limit)

    # --- listeners ------------------------------------------------------------------------------------

    def add_sync_listener(self, callback: RepoListener) -> None:
        """Call `callback(repo)` (in the syncing thread) after a first clone and each sync that changed refs."""
        self._sync_listeners.append(callback)

    def add_removal_listener(self, callback: RepoListener) -> None:
        """Call `callback(repo)` after a repository was removed (drop its index)."""
        self._removal_listeners.append(callback)

    def _notify(self, listeners: list[RepoListener], repo: Repo) -> None:
        for listener in list(listeners):
            try:
                listener(repo)
            except Exception:
                # A failing listener (an indexer) must not fail the sync nor starve the others.
                log.exception("repository listener failed", extra={"repo": repo.name})

    # --- permissions ----------------------------------------------------------------------------------

    def _require_admin(self, actor: Actor) -> None:
        if not (actor.is_internal or actor.site_admin):
            raise PermissionDenied("only site admins may do this", hint="ask a site admin")

    def set_repo_users(self, actor: Actor, name: str, user_ids: Iterable[int], source: str = "explicit") -> None:
        """Make exactly `user_ids` (for this `source`) the users granted the private repository `name`."""
        self._require_admin(actor)
        repo = self.get(actor, name)
        wanted = set(user_ids)
        with self.db.session() as session:
            session.execute(
                delete(RepoPermission).where(RepoPermission.repo_id == repo.id, RepoPermission.source == source)
            )
            existing = set(session.scalars(select(RepoPermission.user_id).where(RepoPermission.repo_id == repo.id)))
            session.add_all(
                RepoPermission(repo_id=repo.id, user_id=user_id, source=source) for user_id in wanted - existing
            )
            self._flush_permissions(session)

    def set_user_repos(self, actor: Actor, user_id: int, names: Iterable[str], source: str = "explicit") -> None:
        """Make exactly the repositories `names` (for this `source`) the ones granted to `user_id`."""
        self._require_admin(actor)
        wanted = set(names)
        with self.db.session() as session:
            rows = session.execute(select(RepoRow.name, RepoRow.id).where(RepoRow.name.in_(wanted)))
            ids: dict[str, int] = {name: repo_id for name, repo_id in rows}  # noqa: C416 (rows are Row objects)
            missing = sorted(wanted - set(ids))
            if missing:
                raise NotFound(f"repository {missing[0]!r} not found", hint=NOT_FOUND_HINT)
            session.execute(
                delete(RepoPermission).where(RepoPermission.user_id == user_id, RepoPermission.source == source)
            )
            existing = set(session.scalars(select(RepoPermission.repo_id).where(RepoPermission.user_id == user_id)))
            session.add_all(
                RepoPermission(repo_id=repo_id, user_id=user_id, source=source)
                for repo_id in set(ids.values()) - existing
            )
            self._flush_permissions(session)

    @staticmethod
    def _flush_permissions(session: Session) -> None:
        try:
            session.flush()
        except IntegrityError:
            raise NotFound("user not found", hint="grant repositories to existing users only") from None

    def repos_of_user(self, actor: Actor, user_id: int) -> list[Repo]:
        """Private repositories explicitly granted to `user_id` (the user themself or a site admin may ask)."""
        if actor.user_id != user_id:
            self._require_admin(actor)
        with self.db.session() as session:
            rows = session.scalars(
                select(RepoRow)
                .join(RepoPermission, RepoPermission.repo_id == RepoRow.id)
                .where(RepoPermission.user_id == user_id)
                .order_by(RepoRow.name)
            )
            return [self._to_repo(row) for row in rows]

    def users_of_repo(self, actor: Actor, name: str) -> list[int]:
        """IDs of the users granted repository `name` (site admins only)."""
        self._require_admin(actor)
        repo = self.get(actor, name)
        with self.db.session() as session:
            return sorted(
                session.scalars(select(RepoPermission.user_id).where(RepoPermission.repo_id == repo.id)).all()
            )

    # --- registration ---------------------------------------------------------------------------------

    def add_repo(
        self,
        actor: Actor,
        url: str,
        *,
        name: str | None = None,
        private: bool = False,
        branches: Iterable[str] = (),
        sync_interval_seconds: int = 3600,
        credentials_env: str | None = None,
        description: str = "",
    ) -> Repo:
        """Register a repository by clone URL or local path (not cloned yet; `sync_repo` clones it)."""
        self._require_admin(actor)
        if "\x00" in url or not url.strip():
            raise InvalidInput("clone URL is empty or contains a NUL byte", hint="give a clone URL or a local path")
        local = "://" not in url and not git_scp_like(url)
        if local:
            path = Path(url).expanduser().resolve()
            if not path.is_dir():
                raise InvalidInput(f"local path {url!r} is not a directory", hint="give the path of a git repository")
            url = str(path)
            name = check_name(name) if name else check_name(f"local/{path.name.removesuffix('.git')}")
        else:
            name = check_name(name) if name else name_from_url(url)
        clean, secret = split_credentials(url)
        spec = RepoSpec(
            name=name,
            clone_url=clean,
            kind="local" if local else "git",
            private=private,
            extra_branches=tuple(branches),
            sync_interval_seconds=sync_interval_seconds,
            credentials_env=credentials_env,
            description=description,
            secret=secret,
        )
        with self.db.session() as session:
            if session.scalar(select(RepoRow.id).where(RepoRow.name == name)) is not None:
                raise Conflict(f"repository {name!r} is already registered", hint="remove it first or pick --name")
            session.add(self._new_row(spec, source="manual"))
        if secret:
            self._secrets[name] = secret
        return self.get(INTERNAL, name)

    @staticmethod
    def _new_row(spec: RepoSpec, source: str) -> RepoRow:
        return RepoRow(
            name=spec.name,
            source=source,
            kind=spec.kind,
            clone_url=spec.clone_url,
            credentials_env=spec.credentials_env,
            description=spec.description,
            private=spec.private,
            extra_branches="\n".join(spec.extra_branches),
            sync_interval_seconds=spec.sync_interval_seconds,
            sync_state="new",
            next_sync_at=utcnow(),
        )

    def remove_repo(self, actor: Actor, name: str) -> Repo:
        """Unregister `name`, delete its mirror and tell removal listeners (indexes) to drop it."""
        self._require_admin(actor)
        repo = self.get(actor, name)
        with self._sync_lock(name), self.db.session() as session:
            session.execute(delete(RepoRow).where(RepoRow.id == repo.id))
        remove_mirror(repo.mirror_path, self.mirror_root)
        self._secrets.pop(name, None)
        self._notify(self._removal_listeners, repo)
        return repo

    def reconcile(self, config: SiteConfig | None = None) -> ReconcileReport:
        """Make the repos table match the site config `repositories` (adds, updates, removes)."""
        config = config or self.runtime.config
        report = ReconcileReport()
        specs: dict[str, RepoSpec] = {}
        for index, source in enumerate(config.repositories):
            try:
                for spec in discover(source):
                    specs.setdefault(spec.name, spec)
            except Exception as exc:
                report.errors.append(f"repositories[{index}] ({source.kind}): {exc}")
        self.source_errors = report.errors
        for spec in specs.values():
            if spec.secret:
                self._secrets[spec.name] = spec.secret
        with self.db.session() as session:
            rows = {row.name: row for row in session.scalars(select(RepoRow))}
            for spec in specs.values():
                self._upsert(session, rows.get(spec.name), spec, report)
            # A source that failed to list (a path temporarily missing) must not delete its mirrors.
            if not report.errors:
                report.removed = [
                    name for name, row in rows.items() if row.source.startswith("config:") and name not in specs
                ]
        for name in report.removed:
            self.remove_repo(INTERNAL, name)
        if report.added or report.removed or report.errors:
            log.info(
                "repositories reconciled with site config",
                extra={"added": len(report.added), "removed": len(report.removed), "errors": report.errors},
            )
        return report

    def _upsert(self, session: Session, row: RepoRow | None, spec: RepoSpec, report: ReconcileReport) -> None:
        if row is None:
            session.add(self._new_row(spec, source=f"config:{spec.kind}"))
            report.added.append(spec.name)
            return
        wanted = {
            "source": f"config:{spec.kind}",
            "kind": spec.kind,
            "clone_url": spec.clone_url,
            "credentials_env": spec.credentials_env,
            "private": spec.private,
            "extra_branches": "\n".join(spec.extra_branches),
            "sync_interval_seconds": spec.sync_interval_seconds,
        }
        changed = {key: value for key, value in wanted.items() if getattr(row, key) != value}
        for key, value in changed.items():
            setattr(row, key, value)
        if changed:
            report.updated.append(spec.name)

    # --- syncing --------------------------------------------------------------------------------------

    def _sync_lock(self, name: str) -> threading.Lock:
        with self._locks_guard:
            return self._sync_locks.setdefault(name, threading.Lock())

    def due_repos(self, now: datetime | None = None) -> list[str]:
        """Names of repositories whose next sync is due, most overdue first."""
        now = now or utcnow()
        with self.db.session() as session:
            return list(
                session.scalars(
                    select(RepoRow.name)
                    .where((RepoRow.next_sync_at == None) | (RepoRow.next_sync_at <= now))  # noqa: E711
                    .order_by(RepoRow.next_sync_at)
                )
            )

    def sync_repo(
        self, actor: Actor, name: str, *, on_progress: Callable[[str, int], None] | None = None
    ) -> SyncOutcome:
        """Clone (first time) or fetch `name` now; failures are recorded on the repository, not raised."""
        self._require_admin(actor)
        repo = self.get(actor, name)
        with self._sync_lock(name):
            return self._sync(repo, on_progress)

    def request_sync(self, actor: Actor, name: str) -> Repo:
        """Make `name` due now: the background scheduler syncs it within a tick (for long clones)."""
        self._require_admin(actor)
        repo = self.get(actor, name)
        with self.db.session() as session:
            row = session.get(RepoRow, repo.id)
            if row is not None:
                row.next_sync_at = utcnow()
        return repo

    def _credentials(self, repo: Repo, row_env: str | None) -> Credentials | None:
        if row_env:
            secret = os.environ.get(row_env)
            if not secret:
                raise git.GitCommandError(f"environment variable {row_env} (credentialsEnv) is not set")
            return Credentials(secret)
        secret = self._secrets.get(repo.name)
        return Credentials(secret) if secret else None

    def _sync(self, repo: Repo, on_progress: Callable[[str, int], None] | None) -> SyncOutcome:
        started = time.monotonic()
        mirror = repo.mirror_path
        first = not mirror.is_dir()
        with self.db.session() as session:
            row = session.get(RepoRow, repo.id)
            if row is None:
                raise NotFound(f"repository {repo.name!r} not found", hint=NOT_FOUND_HINT)
            credentials_env = row.credentials_env
            if first:
                row.sync_state = "cloning"
        before = git.ref_snapshot(mirror)
        try:
            credentials = self._credentials(repo, credentials_env)
            if first:
                clone_mirror(repo.clone_url, mirror, credentials=credentials, on_progress=on_progress)
            else:
                fetch_mirror(repo.clone_url, mirror, credentials=credentials)
            branch = self._fix_head(mirror)
        except (git.GitCommandError, OSError, pygit2.GitError) as exc:
            message = getattr(exc, "message", None) or str(exc)
            metrics.SYNCS.labels("failed").inc()
            metrics.SYNC_SECONDS.observe(time.monotonic() - started)
            return self._record_failure(repo, message)
        after = git.ref_snapshot(mirror)
        changed = before != after
        metrics.SYNCS.labels("changed" if changed else "unchanged").inc()
        metrics.SYNC_SECONDS.observe(time.monotonic() - started)
        updated = self._record_success(repo, branch, git.directory_size(mirror))
        log.info(
            "repository synced",
            extra={"repo": repo.name, "cloned": first, "changed": changed, "seconds": time.monotonic() - started},
        )
        if changed or first:
            self._notify(self._sync_listeners, updated)
        return SyncOutcome(updated, ok=True, changed=changed, cloned=first)

    @staticmethod
    def _fix_head(mirror: Path) -> str | None:
        """The mirror's default branch, re-pointing HEAD when a fetch pruned the branch it named."""
        repository = pygit2.Repository(str(mirror))
        branch = git.default_branch(repository)
        head = repository.references["HEAD"].target if "HEAD" in repository.references else None
        if branch is not None and head != f"refs/heads/{branch}":
            ensure_head(mirror, branch)
        return branch

    def _record_success(self, repo: Repo, branch: str | None, size: int) -> Repo:
        now = utcnow()
        with self.db.session() as session:
            row = session.get(RepoRow, repo.id)
            if row is None:  # removed while syncing
                return repo
            row.sync_state, row.last_error, row.failures = "ready", None, 0
            row.default_branch, row.size_bytes, row.last_fetched_at = branch, size, now
            row.next_sync_at = now + timedelta(seconds=row.sync_interval_seconds)
            return self._to_repo(row)

    def _record_failure(self, repo: Repo, message: str) -> SyncOutcome:
        now = utcnow()
        with self.db.session() as session:
            row = session.get(RepoRow, repo.id)
            if row is None:
                return SyncOutcome(repo, ok=False, changed=False, cloned=False, error=message)
            row.failures += 1
            row.sync_state, row.last_error = "failed", message
            row.next_sync_at = now + timedelta(seconds=backoff_seconds(row.failures))
            updated = self._to_repo(row)
        log.warning("repository sync failed: %s", message, extra={"repo": repo.name, "failures": updated.failures})
        return SyncOutcome(updated, ok=False, changed=False, cloned=False, error=message)


def _contains(mirror: pygit2.Repository, ref_commit: str, target: str) -> bool:
    if ref_commit == target:
        return True
    try:
        return bool(mirror.descendant_of(ref_commit, target))
    except (KeyError, ValueError, pygit2.GitError):
        return False


def git_scp_like(url: str) -> bool:
    """True for scp-style ssh addresses such as git@github.com:org/repo.git."""
    head = url.split("/", 1)[0]
    return ":" in head and not os.path.exists(url)


def register_local_repo(runtime: Runtime, path: Path, name: str, *, private: bool = False) -> Repo:
    """Register the git repository at `path` as `name` and mirror it now (tests, demo); raise when it fails."""
    service = runtime.get(RepoService)
    service.add_repo(INTERNAL, str(path), name=name, private=private)
    outcome = service.sync_repo(INTERNAL, name)
    if not outcome.ok:
        raise Unavailable(f"mirroring {name!r} failed: {outcome.error}")
    return outcome.repo
