"""SearchService: indexed search over the repositories an actor may read, and index maintenance."""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING, Self

from codewell.core.actors import Actor
from codewell.core.errors import InvalidInput, NotFound, PermissionDenied
from codewell.search.index.languages import LANGUAGES, normalize_language
from codewell.search.index.shard import Shard, ShardFormatError
from codewell.search.indexer import branch_commits, build_from_mirror
from codewell.search.parallel import search_many, search_shard_parallel
from codewell.search.query.parser import Query, parse_query
from codewell.search.query.regex import compile_regex
from codewell.search.ranking import rank
from codewell.search.results import FileMatch, IndexStatus, LineMatch, SearchResults
from codewell.search.searcher import ShardResult

if TYPE_CHECKING:
    from codewell.repos.service import Repo, RepoService
    from codewell.runtime import Runtime

__all__ = ["DEFAULT_COUNT", "FileMatch", "IndexStatus", "LineMatch", "SearchResults", "SearchService"]

log = logging.getLogger(__name__)

# Default number of matching lines to collect before stopping early (a generous first page).
DEFAULT_COUNT = 500
# count:all is still bounded so one query cannot build an unbounded response in memory.
MAX_COUNT = 1_000_000
_UNINDEXED_CACHE = 4
_CPUS = os.cpu_count() or 1


class SearchService:
    """Search (filtered to readable repositories before anything runs) and shard lifecycle per repository."""

    def __init__(self, runtime: Runtime, root: Path) -> None:
        self.runtime = runtime
        self.root = root
        self._shards: dict[int, Shard] = {}
        self._lock = threading.RLock()
        self._repo_locks: dict[int, threading.Lock] = {}
        self._state: dict[int, tuple[str, str | None]] = {}
        self._unindexed: OrderedDict[tuple[int, str], Shard] = OrderedDict()
        self._workers: ProcessPoolExecutor | None = None
        self._stale_format: set[int] = set()

    def _pool(self) -> ProcessPoolExecutor | None:
        """Verification processes for exhaustive searches of big shards (started on first need)."""
        if _CPUS < 2:
            return None
        with self._lock:
            if self._workers is None:
                self._workers = ProcessPoolExecutor(_CPUS - 1, mp_context=get_context("spawn"))
            return self._workers

    def close(self) -> None:
        """Stop the verification processes."""
        with self._lock:
            if self._workers is not None:
                self._workers.shutdown(cancel_futures=True)
                self._workers = None

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime, runtime.settings.data_dir / "search")

    @property
    def repos(self) -> RepoService:
        from codewell.repos.service import RepoService

        return self.runtime.get(RepoService)

    # --- search ----------------------------------------------------------------------------------

    def search(
        self, actor: Actor, query: str, *, count: int | None = None, timeout: float | None = None
    ) -> SearchResults:
        """Run `query` over the readable repositories; partial results are marked (limit_hit/timed_out)."""
        started = time.monotonic()
        q = _normalize_languages(parse_query(query))
        limit = None if q.count_all else min(count or q.count or DEFAULT_COUNT, MAX_COUNT)
        if q.count_all and count:
            limit = count
        deadline = started + (timeout if timeout is not None else q.timeout)
        targets, skipped = self._targets(actor, q)
        results = SearchResults([], 0, False, False, skipped)
        if limit is None:
            # count:all: every shard is searched anyway, so fan out over processes.
            found_all = search_many(
                [(shard, branch) for _, shard, branch, _ in targets],
                q,
                deadline=deadline,
                pool=self._pool(),
                parts=_CPUS,
            )
            for (repo, shard, _branch, commit), found in zip(targets, found_all, strict=True):
                results.files.extend(self._file_matches(repo, shard, commit, q, found))
                results.match_count += found.match_count
                results.timed_out |= found.timed_out
            targets = []
        for repo, shard, branch, commit in targets:
            remaining = None if limit is None else limit - results.match_count
            if remaining is not None and remaining <= 0:
                results.limit_hit = True
                break
            found = search_shard_parallel(
                shard, q, branch=branch, limit=remaining, deadline=deadline, pool=self._pool(), parts=_CPUS
            )
            results.files.extend(self._file_matches(repo, shard, commit, q, found))
            results.match_count += found.match_count
            results.limit_hit |= found.limit_hit
            if found.timed_out:
                results.timed_out = True
                break
        rank(results.files)
        results.duration_ms = (time.monotonic() - started) * 1000
        return results

    def _targets(self, actor: Actor, q: Query) -> tuple[list[tuple[Repo, Shard, str | None, str]], list[str]]:
        """(repo, shard, branch, commit) to search, and messages about readable repos that were skipped."""
        repos = self.repos.readable(actor)
        include = [(compile_regex(f.pattern, case_sensitive=False), f.revisions) for f in q.repos]
        exclude = [compile_regex(p, case_sensitive=False) for p in q.exclude_repos]
        targets: list[tuple[Repo, Shard, str | None, str]] = []
        skipped: list[str] = []
        for repo in sorted(repos, key=lambda r: r.name):
            name = repo.name.encode("utf-8")
            if any(rx.search(name) for rx in exclude):
                continue
            revisions: tuple[str, ...] = ()
            if include:
                matched = [revs for rx, revs in include if rx.search(name)]
                if len(matched) != len(include):
                    continue
                revisions = next((r for r in matched if r), ())
            shard = self.shard(repo)
            if shard is None:
                skipped.append(self._why_not_searchable(repo))
                continue
            if not revisions:
                default = shard.meta.get("default_branch")
                branch = default if isinstance(default, str) else next(iter(shard.branches), None)
                if branch is None:
                    continue
                targets.append((repo, shard, branch, shard.branches[branch]))
                continue
            for rev in revisions:
                targets.append(self._revision_target(actor, repo, shard, rev))
        return targets, skipped

    def _revision_target(self, actor: Actor, repo: Repo, shard: Shard, rev: str) -> tuple[Repo, Shard, str | None, str]:
        if rev in shard.branches:
            return repo, shard, rev, shard.branches[rev]
        commit = self.repos.resolve(actor, repo.name, rev).commit
        for branch, sha in shard.branches.items():
            if sha == commit:
                return repo, shard, branch, sha
        return repo, self._unindexed_shard(repo, commit), None, commit

    def _unindexed_shard(self, repo: Repo, commit: str) -> Shard:
        """An ad-hoc shard of one commit that is not indexed (built once, kept in a small LRU)."""
        key = (repo.id, commit)
        with self._lock:
            cached = self._unindexed.get(key)
            if cached is not None:
                self._unindexed.move_to_end(key)
                return cached
        target = self.root / "adhoc" / f"{repo.id}-{commit}"
        build_from_mirror(target, repo.mirror_path, {commit: commit}, {"repo": repo.name, "default_branch": commit})
        shard = Shard.open(target)
        with self._lock:
            self._unindexed[key] = shard
            while len(self._unindexed) > _UNINDEXED_CACHE:
                _, old = self._unindexed.popitem(last=False)
                shutil.rmtree(old.path, ignore_errors=True)
        return shard

    def _why_not_searchable(self, repo: Repo) -> str:
        state, error = self._state.get(repo.id, ("", None))
        if repo.sync_state in ("new", "cloning"):
            return f"{repo.name}: still cloning, not searchable yet"
        if repo.sync_state == "failed" and not repo.default_branch:
            return f"{repo.name}: cloning failed ({repo.last_error or 'unknown error'})"
        if state == "indexing":
            return f"{repo.name}: being indexed, not searchable yet"
        if state == "failed":
            return f"{repo.name}: indexing failed ({error})"
        return f"{repo.name}: not indexed yet"

    def _file_matches(self, repo: Repo, shard: Shard, commit: str, q: Query, found: ShardResult) -> list[FileMatch]:
        patterns = [compile_regex(p.value, case_sensitive=q.case_sensitive) for p in q.patterns()]
        out: list[FileMatch] = []
        for hit in found.hits:
            path = shard.paths[hit.doc]
            base = int(shard.line_base[hit.doc])
            lines: list[LineMatch] = []
            for line in hit.lines:
                raw = shard.line_text(hit.doc, line)
                ranges = sorted({m.span() for rx in patterns for m in rx.finditer(raw) if m.end() > m.start()})
                lines.append(LineMatch(line - base + 1, raw.decode("utf-8", "replace"), ranges))
            path_bytes = path.encode("utf-8", "surrogateescape")
            path_match = any(rx.search(path_bytes) for rx in patterns)
            out.append(FileMatch(repo.name, path, commit, shard.languages[hit.doc], lines, path_match))
        return out

    # --- index lifecycle --------------------------------------------------------------------------

    def shard(self, repo: Repo) -> Shard | None:
        """The current shard of `repo` (loaded on first use), or None when it has none."""
        with self._lock:
            loaded = self._shards.get(repo.id)
            if loaded is not None:
                return loaded
            pointer = self._pointer(repo.id)
            if not pointer.exists():
                return None
            try:
                shard = Shard.open(self.root / "shards" / pointer.read_text().strip())
            except ShardFormatError as exc:
                # Written by an earlier version: the repository counts as not indexed until re-indexed.
                if repo.id not in self._stale_format:
                    self._stale_format.add(repo.id)
                    log.warning("shard needs re-indexing: %s", exc, extra={"repo": repo.name})
                return None
            except (OSError, ValueError):
                log.exception("cannot open shard", extra={"repo": repo.name})
                return None
            self._shards[repo.id] = shard
            return shard

    def _pointer(self, repo_id: int) -> Path:
        return self.root / "shards" / f"{repo_id}.current"

    def needs_index(self, repo: Repo) -> bool:
        """True when the indexed branch commits differ from the mirror's (or nothing is indexed)."""
        if not repo.default_branch or not repo.mirror_path.exists():
            return False
        wanted = branch_commits(repo.mirror_path, repo.default_branch, repo.extra_branches)
        shard = self.shard(repo)
        return shard is None or shard.branches != wanted

    def index(
        self, repo: Repo, *, workers: int = 1, force: bool = False, progress: Callable[[int, int], None] | None = None
    ) -> IndexStatus:
        """Index `repo`'s default and extra branches unless already current; swap the new shard in atomically.

        Searches already running keep the shard object they hold (its files stay mapped after deletion).
        """
        with self._lock:
            repo_lock = self._repo_locks.setdefault(repo.id, threading.Lock())
        with repo_lock:
            if not repo.default_branch:
                raise NotFound(f"repository {repo.name!r} has no commits yet", hint="wait for its first sync")
            commits = branch_commits(repo.mirror_path, repo.default_branch, repo.extra_branches)
            current = self.shard(repo)
            if current is not None and current.branches == commits and not force:
                return self._status_of(repo)
            self._state[repo.id] = ("indexing", None)
            name = f"{repo.id}-{time.time_ns()}"
            try:
                target = build_from_mirror(
                    self.root / "shards" / name,
                    repo.mirror_path,
                    commits,
                    {
                        "repo_id": repo.id,
                        "repo": repo.name,
                        "default_branch": repo.default_branch,
                        "indexed_at": datetime.now(UTC).isoformat(),
                    },
                    workers=workers,
                    progress=progress,
                )
                shard = Shard.open(target)
            except Exception as exc:
                self._state[repo.id] = ("failed", str(exc))
                raise
            pointer = self._pointer(repo.id)
            tmp = pointer.with_suffix(".tmp")
            tmp.write_text(name)
            os.replace(tmp, pointer)
            with self._lock:
                old = self._shards.get(repo.id)
                self._shards[repo.id] = shard
                self._state[repo.id] = ("indexed", None)
            if old is not None and old.path != target:
                shutil.rmtree(old.path, ignore_errors=True)
            self._remove_stale(repo.id, keep=name)
            return self._status_of(repo)

    def _remove_stale(self, repo_id: int, keep: str) -> None:
        for path in (self.root / "shards").glob(f"{repo_id}-*"):
            if path.name != keep:
                shutil.rmtree(path, ignore_errors=True)

    def drop(self, repo: Repo) -> None:
        """Forget `repo`'s index (after the repository was removed)."""
        with self._lock:
            self._shards.pop(repo.id, None)
            self._state.pop(repo.id, None)
        self._pointer(repo.id).unlink(missing_ok=True)
        self._remove_stale(repo.id, keep="")

    def index_repo(self, actor: Actor, name: str, *, workers: int = 1, force: bool = False) -> IndexStatus:
        """Index one repository now (site admins and the service itself only)."""
        _require_admin(actor)
        return self.index(self.repos.get(actor, name), workers=workers, force=force)

    def status(self, actor: Actor, name: str | None = None) -> list[IndexStatus]:
        """Index status of the readable repositories (or of one)."""
        repos = [self.repos.get(actor, name)] if name else self.repos.readable(actor)
        return [self._status_of(repo) for repo in sorted(repos, key=lambda r: r.name)]

    def _status_of(self, repo: Repo) -> IndexStatus:
        state, error = self._state.get(repo.id, ("", None))
        shard = self.shard(repo)
        if shard is None:
            return IndexStatus(repo.name, state or "not indexed", {}, error=error)
        index_bytes = sum(f.stat().st_size for f in shard.path.iterdir() if f.name != "content.bin")
        indexed_at = shard.meta.get("indexed_at")
        return IndexStatus(
            repo.name,
            state if state in ("indexing", "failed") else "indexed",
            dict(shard.branches),
            documents=shard.doc_count,
            content_bytes=int(shard.meta.get("content_bytes", 0)),
            index_bytes=index_bytes,
            indexed_at=datetime.fromisoformat(indexed_at) if isinstance(indexed_at, str) else None,
            error=error,
        )

    def on_sync(self, repo: Repo) -> None:
        """Sync listener: re-index a repository whose refs changed."""
        try:
            if self.needs_index(repo):
                self.index(repo)
        except Exception:
            log.exception("indexing failed", extra={"repo": repo.name})

    def reconcile(self) -> int:
        """Index every ready repository whose shard is missing or stale; return how many were indexed."""
        from codewell.core.actors import INTERNAL

        done = 0
        for repo in self.repos.readable(INTERNAL):
            try:
                if self.needs_index(repo):
                    self.index(repo)
                    done += 1
            except Exception:
                log.exception("indexing failed", extra={"repo": repo.name})
        return done


def _require_admin(actor: Actor) -> None:
    if not (actor.is_internal or actor.site_admin):
        raise PermissionDenied("only site admins may index repositories", hint="ask a site admin")


def _normalize_languages(q: Query) -> Query:
    from dataclasses import replace

    def canon(values: tuple[str, ...]) -> tuple[str, ...]:
        out = []
        for v in values:
            name = normalize_language(v)
            if name is None:
                raise InvalidInput(
                    f"unknown language lang:{v}", hint="known languages: " + ", ".join(n.lower() for n in LANGUAGES)
                )
            out.append(name)
        return tuple(out)

    return replace(q, languages=canon(q.languages), exclude_languages=canon(q.exclude_languages))
