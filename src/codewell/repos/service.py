"""The repos service API: registered repositories, who may read them, their mirrors and their contents.

`RepoService` is the one public facade other capabilities import: it checks what the actor may do, looks
repositories up through the one visibility rule (`catalog`), and hands the work to the module of its
concern: `contents` (reading git), `grants` (who may read private repositories), `registry` (adding,
removing, reconciling the site config), `mirrors` (clone/fetch, back-off, listeners). Every call takes
the acting user; a repository the actor may not read raises `NotFound` exactly like a missing one.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Self

from sqlalchemy import ColumnElement
from sqlalchemy.orm import Session

from codewell.authz import Action, UserRef, ensure
from codewell.config.schema import SiteConfig
from codewell.core.actors import INTERNAL, Actor
from codewell.core.errors import Unavailable
from codewell.jobs.runner import drain
from codewell.jobs.service import PRIORITY_EVENT, PRIORITY_PERSON, PRIORITY_SCHEDULED, JobService
from codewell.repos import catalog as catalog_module
from codewell.repos.catalog import Catalog
from codewell.repos.contents import Contents, check_refs_limit, clean_path
from codewell.repos.grants import Grants
from codewell.repos.mirrors import CredentialSource, Mirrors, backoff_seconds
from codewell.repos.models import RepoRow
from codewell.repos.probe import check_git_source
from codewell.repos.records import (
    BACKOFF_BASE_SECONDS,
    BACKOFF_MAX_SECONDS,
    LIST_REFS_DEFAULT,
    LIST_REFS_MAX,
    LIST_REPOS_DEFAULT,
    LIST_REPOS_MAX,
    MAX_FILE_BYTES,
    MAX_LIST_FILES,
    MAX_NAME_CHARS,
    NOT_FOUND_HINT,
    SYNC_STATES,
    TRUNCATED_LINES,
    FileContent,
    FileEntry,
    FileListing,
    NewRepo,
    ReconcileReport,
    RefInfo,
    RefList,
    Repo,
    RepoListener,
    RepoPage,
    RepoRef,
    ResolvedRevision,
    SyncOutcome,
)
from codewell.repos.registry import Registry, git_scp_like
from codewell.repos.sources import check_name, default_private

if TYPE_CHECKING:
    from codewell.runtime import Runtime

StatusColumn = Callable[[str | None], Mapping[str, str]]

# The job that clones or fetches a mirror, and the lock group of every job touching a mirror (codewell.jobs).
SYNC_JOB = "repos.sync"
MIRROR_LOCK = "repos.mirror"


def repo_resource(repo_id: int) -> str:
    """The jobs resource of a repository: every job about it (sync, indexes, removal) names it."""
    return f"repo:{repo_id}"


def repo_payload(repo: Repo) -> dict[str, object]:
    """What a job needs to act on a repository that may be gone when it runs (its removal's clean-up)."""
    return {"repo_id": repo.id, "name": repo.name}


# Re-exported: callers import the values and limits of the API from here, next to the service.
__all__ = [
    "BACKOFF_BASE_SECONDS",
    "BACKOFF_MAX_SECONDS",
    "LIST_REFS_DEFAULT",
    "LIST_REFS_MAX",
    "LIST_REPOS_DEFAULT",
    "LIST_REPOS_MAX",
    "MAX_FILE_BYTES",
    "MAX_LIST_FILES",
    "MAX_NAME_CHARS",
    "MIRROR_LOCK",
    "NOT_FOUND_HINT",
    "SYNC_JOB",
    "SYNC_STATES",
    "TRUNCATED_LINES",
    "FileContent",
    "FileEntry",
    "FileListing",
    "NewRepo",
    "ReconcileReport",
    "RefInfo",
    "RefList",
    "Repo",
    "RepoListener",
    "RepoPage",
    "RepoRef",
    "RepoService",
    "ResolvedRevision",
    "StatusColumn",
    "SyncOutcome",
    "backoff_seconds",
    "check_name",
    "clean_path",
    "git_scp_like",
    "register_local_repo",
    "repo_payload",
    "repo_resource",
]


class RepoService:
    """Repositories: registration, visibility, mirrors (sync) and reading their contents."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.db = runtime.db
        # On the volume every process shares: web replicas, workers and searchers read the same mirrors.
        self.mirror_root = runtime.settings.shared_dir / "repos"
        self.catalog = Catalog(runtime.db, self.mirror_root)
        self.contents = Contents(lambda: runtime.external_url)
        self.grants = Grants(runtime.db, self.catalog)
        self.mirrors = Mirrors(runtime.db, self.catalog)
        self.registry = Registry(runtime.db, self.catalog, self.mirrors)
        self.registry.on_added = self.enqueue_syncs
        self.registry.on_removed = self._removed
        self._status_columns: dict[str, StatusColumn] = {}

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    @property
    def source_errors(self) -> list[str]:
        """Errors of the site config sources at the last reconcile (shown by `codewell repos status`)."""
        return self.registry.source_errors

    # --- visibility, listing and lookup ---------------------------------------------------------------

    @staticmethod
    def visibility_clause(actor: Actor) -> ColumnElement[bool]:
        """SQL condition on the repos table: the repositories `actor` may read (the one visibility rule)."""
        return catalog_module.visibility_clause(actor)

    def list_repos(self, actor: Actor, query: str = "", limit: int = LIST_REPOS_DEFAULT) -> RepoPage:
        """Readable repositories whose name contains `query` (case-insensitive), by name, at most `limit`."""
        return self.catalog.list_repos(actor, query, limit)

    def get(self, actor: Actor, name: str) -> Repo:
        """The repository called `name`; NotFound when it is missing or the actor may not read it.

        The error says "did you mean <name>?" when exactly one readable repository fits (same name in
        another case, or ending with `/<name>`).
        """
        return self.catalog.get(actor, name)

    def suggest(self, actor: Actor, name: str) -> str | None:
        """The one readable repository an unknown `name` probably means (see `get`), or None."""
        return self.catalog.suggest(actor, name)

    def readable(self, actor: Actor) -> list[Repo]:
        """Every repository the actor may read, by name, as full records (~40 µs each: background and admin
        work; a request wants `readable_ids`, `readable_refs`, `refs_of` or `iter_readable`)."""
        return self.catalog.readable(actor)

    def iter_readable(self, actor: Actor, page_size: int = 100) -> Iterator[Repo]:
        """The repositories the actor may read, by name, fetched `page_size` at a time (stop early, pay less)."""
        return self.catalog.iter_readable(actor, page_size)

    def readable_ids(self, actor: Actor) -> frozenset[int]:
        """IDs of every repository the actor may read (one index-only query; ~2-5 ms for 10,000)."""
        return self.catalog.readable_ids(actor)

    def readable_refs(self, actor: Actor) -> list[RepoRef]:
        """Every repository the actor may read as (id, name, default branch, mirror path), by name (cheap)."""
        return self.catalog.readable_refs(actor)

    def refs_of(self, actor: Actor, ids: Collection[int]) -> dict[int, RepoRef]:
        """The repositories among `ids` the actor may read, by id (the few a query's rows name)."""
        return self.catalog.refs_of(actor, ids)

    def all_repos(self, actor: Actor) -> list[Repo]:
        """Every registered repository with its sync state (site admins only)."""
        ensure(actor, Action.REPOS_READ_ALL)
        return self.readable(actor)

    # --- reading contents -----------------------------------------------------------------------------

    def resolve(self, actor: Actor, name: str, revision: str | None = None) -> ResolvedRevision:
        """The commit `revision` (default branch when None) names in a readable repository."""
        return self.contents.resolve(self.get(actor, name), revision)

    def read_file(
        self,
        actor: Actor,
        name: str,
        path: str,
        start_line: int | None = None,
        end_line: int | None = None,
        revision: str | None = None,
        *,
        whole: bool = False,
    ) -> FileContent:
        """A file's numbered lines at `revision`: ranges, a 200-line cut for files over 128 KB, binary detection.

        An `end_line` past the end is clamped to the last line; a `start_line` past the end is InvalidInput.
        `whole=True` is for people's pages (the file view, blame): no 200-line cut, which is a rule for agents'
        context windows; a file over 5 MB (`contents.MAX_WHOLE_FILE_BYTES`) then comes without its lines,
        `truncated`, with a notice giving its size.
        """
        clean = clean_path(path, required=True)
        return self.contents.read_file(self.get(actor, name), clean, start_line, end_line, revision, whole=whole)

    def read_raw(self, actor: Actor, name: str, path: str, revision: str | None = None) -> tuple[FileContent, bytes]:
        """A file's bytes as stored (the raw view), up to 64 MB (`contents.MAX_RAW_BYTES`); binary files come
        with `binary` set and no bytes."""
        clean = clean_path(path, required=True)
        return self.contents.read_raw(self.get(actor, name), clean, revision)

    def list_paths(self, actor: Actor, name: str, revision: str | None = None) -> tuple[str, list[str], bool]:
        """(commit, every file path at `revision`, cut) for the file finder: at most 200,000 paths
        (`contents.MAX_PATHS`), trees read, no blob."""
        return self.contents.list_paths(self.get(actor, name), revision)

    def list_files(self, actor: Actor, name: str, path: str = "", revision: str | None = None) -> FileListing:
        """Direct children of directory `path` at `revision`: directories first (with `/`), at most 1000."""
        clean = clean_path(path, required=False)
        return self.contents.list_files(self.get(actor, name), clean, revision)

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
        check_refs_limit(limit)
        repo = self.get(actor, name)
        return self.contents.list_refs(repo, tags_only, heads_only, contains_commit, limit)

    # --- listeners ------------------------------------------------------------------------------------

    def add_sync_listener(self, callback: RepoListener) -> None:
        """Call `callback(repo)` (in the syncing thread) after a first clone and each sync that changed refs."""
        self.mirrors.sync_listeners.append(callback)

    def add_credential_source(self, source: CredentialSource) -> None:
        """Let `source(name)` answer the fetch secret of repositories whose `credentials_env` it owns (code host
        connections): asked at each sync, kept out of the process environment (mirrors.CredentialSource)."""
        self.mirrors.credential_sources.append(source)

    def add_removal_listener(self, callback: RepoListener) -> None:
        """Call `callback(repo)` after a repository was removed (drop its index)."""
        self.registry.removal_listeners.append(callback)

    def add_status_column(self, label: str, values: StatusColumn) -> None:
        """Add a column to `codewell repos status`: `values(name or None)` maps repository names to text.

        How capabilities built on repos (search's index state) show per-repository state without repos
        importing them.
        """
        self._status_columns[label] = values

    def status_columns(self, name: str | None = None) -> dict[str, Mapping[str, str]]:
        """The added status columns, label -> repository name -> text (of `name` only, when given)."""
        return {label: values(name) for label, values in self._status_columns.items()}

    # --- permissions ----------------------------------------------------------------------------------

    def set_repo_users(self, actor: Actor, name: str, user_ids: Iterable[int], source: str = "explicit") -> None:
        """Make exactly `user_ids` (for this `source`) the users granted the private repository `name`."""
        ensure(actor, Action.REPOS_MANAGE)
        self.grants.set_repo_users(self.get(actor, name), user_ids, source)

    def set_user_repos(self, actor: Actor, user_id: int, names: Iterable[str], source: str = "explicit") -> None:
        """Make exactly the repositories `names` (for this `source`) the ones granted to `user_id`."""
        ensure(actor, Action.REPOS_MANAGE)
        self.grants.set_user_repos(user_id, names, source)

    def clear_permission_source(self, actor: Actor, source: str) -> int:
        """Drop every permission row a sync `source` wrote (e.g. a code host whose permission sync was switched
        off: its rows must stop granting anything); returns how many rows went."""
        ensure(actor, Action.REPOS_MANAGE)
        return self.grants.clear_source(source)

    def repos_of_user(self, actor: Actor, user_id: int) -> list[Repo]:
        """Private repositories explicitly granted to `user_id` (the user themself or a site admin may ask)."""
        ensure(actor, Action.USER_READ, UserRef(user_id))
        return self.grants.repos_of_user(user_id)

    def users_of_repo(self, actor: Actor, name: str) -> list[int]:
        """IDs of the users granted repository `name` (site admins only)."""
        ensure(actor, Action.REPOS_MANAGE)
        return self.grants.users_of_repo(self.get(actor, name))

    # --- registration ---------------------------------------------------------------------------------

    def add_repo(
        self,
        actor: Actor,
        url: str,
        *,
        name: str | None = None,
        private: bool | None = None,
        branches: Iterable[str] = (),
        sync_interval_seconds: int = 3600,
        credentials_env: str | None = None,
        description: str = "",
        source: str = "manual",
        verify: bool = False,
    ) -> Repo:
        """Register a repository by clone URL or local path (not cloned yet; `sync_repo` clones it).

        `private` None: the site's `repos.defaultVisibility` decides. `source` says who manages the row ("manual", or
        "codehost:<id>" for a code host connection). `verify` (a person adding one: `repos add`, the admin page)
        first asks git whether `url` is a repository it can read, and refuses it otherwise (`repos/probe.py`).
        """
        ensure(actor, Action.REPOS_MANAGE)
        if verify:
            check_git_source(url, local="://" not in url and not git_scp_like(url), credentials_env=credentials_env)
        return self.registry.add(
            url,
            name=name,
            private=default_private(self.runtime.config) if private is None else private,
            branches=branches,
            sync_interval_seconds=sync_interval_seconds,
            credentials_env=credentials_env,
            description=description,
            source=source,
        )

    def add_repos(self, actor: Actor, repos: Iterable[NewRepo], *, source: str) -> list[str]:
        """Register many repositories in one transaction (code host discovery); names already registered are
        skipped. Returns the names added (not cloned yet: the sync loop clones them)."""
        ensure(actor, Action.REPOS_MANAGE)
        return self.registry.add_many(list(repos), source)

    def update_repo(
        self,
        actor: Actor,
        name: str,
        *,
        private: bool | None = None,
        fork: bool | None = None,
        archived: bool | None = None,
        description: str | None = None,
        clone_url: str | None = None,
        credentials_env: str | None = None,
    ) -> Repo:
        """Change the metadata of a registered repository (what its code host says); None keeps a field."""
        ensure(actor, Action.REPOS_MANAGE)
        changes = {
            "private": private,
            "fork": fork,
            "archived": archived,
            "description": description,
            "clone_url": clone_url,
            "credentials_env": credentials_env,
        }
        return self.registry.update(self.get(actor, name), {k: v for k, v in changes.items() if v is not None})

    def remove_repo(self, actor: Actor, name: str) -> Repo:
        """Unregister `name`, delete its mirror and tell removal listeners (indexes) to drop it."""
        ensure(actor, Action.REPOS_MANAGE)
        repo = self.registry.remove(self.get(actor, name))
        if self._jobs_declared():
            drain(self.runtime, repo_resource(repo.id))  # the indexes' clean-up, now (wherever it runs)
        return repo

    def reconcile(self, config: SiteConfig | None = None) -> ReconcileReport:
        """Make the repos table match the site config `repositories` (adds, updates, removes)."""
        return self.registry.reconcile(config or self.runtime.config)

    # --- syncing --------------------------------------------------------------------------------------

    def due_repos(self, now: datetime | None = None) -> list[str]:
        """Names of repositories whose next sync is due, most overdue first."""
        return self.mirrors.due_repos(now)

    def sync_repo(
        self, actor: Actor, name: str, *, on_progress: Callable[[str, int], None] | None = None
    ) -> SyncOutcome:
        """Clone (first time) or fetch `name` now, and wait for what it causes (its indexes); failures are
        recorded on the repository, not raised.

        The sync runs as a `repos.sync` job like every other, claimed by this thread or by whichever process
        got to it first (a server, a worker): two processes never sync or index one repository at once.
        """
        ensure(actor, Action.REPOS_MANAGE)
        repo = self.get(actor, name)
        if not self._jobs_declared():
            return self.mirrors.sync(repo, on_progress)
        jobs = self.runtime.get(JobService)
        resource = repo_resource(repo.id)
        jobs.enqueue(SYNC_JOB, resource, {"repo_id": repo.id}, priority=PRIORITY_PERSON, cause="person")
        if on_progress is not None:
            self.mirrors.progress_hooks[repo.id] = on_progress
        try:
            drain(self.runtime, resource)
        finally:
            self.mirrors.progress_hooks.pop(repo.id, None)
        current = self.repo_by_id(repo.id) or repo
        last = jobs.latest_by_kind(resource).get(SYNC_JOB)
        result = (last.result or {}) if last is not None else {}
        ok = last is not None and last.state == "succeeded" and current.sync_state == "ready"
        error = None if ok else (current.last_error or (last.last_error if last else None) or "the sync did not run")
        return SyncOutcome(
            current,
            ok=ok,
            changed=bool(result.get("changed")),
            cloned=bool(result.get("cloned")),
            error=error,
        )

    def request_sync(self, actor: Actor, name: str) -> Repo:
        """Queue a sync of `name` ahead of scheduled work (a push webhook, "Sync now"); a queued one is reused."""
        ensure(actor, Action.REPOS_MANAGE)
        repo = self.get(actor, name)
        if not self._jobs_declared():
            self.mirrors.request_sync(repo)
            return repo
        self.runtime.get(JobService).enqueue(
            SYNC_JOB, repo_resource(repo.id), {"repo_id": repo.id}, priority=PRIORITY_EVENT, cause="requested"
        )
        return repo

    # --- jobs -----------------------------------------------------------------------------------------

    def _jobs_declared(self) -> bool:
        """Whether this runtime knows the repos jobs (a runtime opened without the capabilities does not)."""
        return SYNC_JOB in self.runtime.get(JobService).kinds

    def enqueue_syncs(self, session: Session, repo_ids: list[int], cause: str) -> None:
        """Queue a sync of each repository in the caller's transaction (new rows, due rows)."""
        if not repo_ids or not self._jobs_declared():
            return
        priority = {"repo.added": PRIORITY_PERSON, "schedule": PRIORITY_SCHEDULED}.get(cause, PRIORITY_EVENT)
        if cause != "schedule":
            # The queued sync is the one that was due now: the schedule must not queue another beside it.
            self.mirrors.postpone(session, repo_ids)
        self.runtime.get(JobService).enqueue_many(
            SYNC_JOB,
            [(repo_resource(repo_id), {"repo_id": repo_id}) for repo_id in repo_ids],
            priority=priority,
            cause=cause,
            session=session,
        )

    def _removed(self, session: Session, repo: Repo) -> None:
        """In the transaction deleting the row: stop its queued jobs, enqueue every capability's clean-up."""
        if not self._jobs_declared():
            return
        jobs = self.runtime.get(JobService)
        jobs.cancel_resource(repo_resource(repo.id), session=session)
        jobs.emit("repo.removed", repo_resource(repo.id), repo_payload(repo), priority=PRIORITY_PERSON, session=session)

    def repo_by_id(self, repo_id: int) -> Repo | None:
        """The repository with this id (the service itself: job handlers), or None when it was removed."""
        with self.db.session() as session:
            row = session.get(RepoRow, repo_id)
            return self.catalog.to_repo(row) if row is not None else None

    def indexed_revisions(self, payload: Mapping[str, object]) -> tuple[Repo, dict[str, str]] | None:
        """The repository and branch → commit map a job about indexed revisions names (`search.indexed`'s
        payload: `repo_id`, `commits`); None when the repository was removed since."""
        repo = self.repo_by_id(int(str(payload["repo_id"])))
        if repo is None:
            return None
        commits = payload.get("commits")
        return repo, {str(k): str(v) for k, v in commits.items()} if isinstance(commits, Mapping) else {}

    def removed_repo(self, payload: Mapping[str, object]) -> Repo:
        """The repository a `repo.removed` job names (its row is gone): id, name and mirror path only."""
        name = str(payload["name"])
        return Repo(
            id=int(str(payload["repo_id"])),
            name=name,
            description="",
            default_branch=None,
            private=True,
            fork=False,
            archived=False,
            stars=None,
            clone_url="",
            mirror_path=self.catalog.mirror_path(name),
            sync_state="removed",
            last_error=None,
            last_fetched_at=None,
            size_bytes=None,
            extra_branches=(),
        )


def register_local_repo(runtime: Runtime, path: Path, name: str, *, private: bool = False) -> Repo:
    """Register the git repository at `path` as `name` and mirror it now (tests, demo); raise when it fails."""
    service = runtime.get(RepoService)
    service.add_repo(INTERNAL, str(path), name=name, private=private)
    outcome = service.sync_repo(INTERNAL, name)
    if not outcome.ok:
        raise Unavailable(f"mirroring {name!r} failed: {outcome.error}")
    return outcome.repo
