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
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING, Self

from codewell.authz import Action, ensure
from codewell.core.actors import INTERNAL, Actor
from codewell.core.errors import InvalidInput, NotFound
from codewell.repos.service import Repo, RepoService
from codewell.search.index.languages import LANGUAGES, language_of, normalize_language
from codewell.search.index.shard import Shard, ShardFormatError
from codewell.search.indexer import branch_commits, build_from_mirror
from codewell.search.parallel import search_many, search_shard_parallel
from codewell.search.query.parser import And, Pattern, Query, parse_query
from codewell.search.query.regex import compile_regex
from codewell.search.ranking import better_match_regexes, rank
from codewell.search.results import FileMatch, IndexStatus, LineMatch, SearchResults
from codewell.search.searcher import file_matches
from codewell.search.symbols import DefinitionSpans, SymbolMatch, SymbolSource, name_matcher, symbol_order

if TYPE_CHECKING:
    from codewell.runtime import Runtime

# The symbol-source types are re-exported here: capabilities above search import only its service module.
__all__ = [
    "DEFAULT_COUNT",
    "LANGUAGES",  # the names `lang:` knows (the web pages suggest them)
    "DefinitionSpans",
    "FileMatch",
    "IndexStatus",
    "LineMatch",
    "RevisionFiles",
    "SearchResults",
    "SearchService",
    "SymbolMatch",
    "SymbolSource",
]

log = logging.getLogger(__name__)

# Default number of matching lines to collect before stopping early (a generous first page).
DEFAULT_COUNT = 500
# The ranking refinement passes of a stopped default page may take this many times the page's own time, and
# at least the floor (small repositories answer in a few milliseconds; the floor keeps their ranking complete).
REFINE_FACTOR = 3.0
REFINE_FLOOR_SECONDS = 0.1
# count:all is still bounded so one query cannot build an unbounded response in memory.
MAX_COUNT = 1_000_000
_UNINDEXED_CACHE = 4
# Ranking asks the symbol source about at most this many files (one SQLite query per 500): a count:all over a
# huge corpus ranks its definitions with the regex forms instead of paying a query per page of paths.
MAX_SYMBOL_RANKED_FILES = 5_000
_CPUS = os.cpu_count() or 1


@dataclass(frozen=True)
class RevisionFiles:
    """The files of one indexed commit as its shard holds them: what the index listeners read instead of git.

    Search already read and stored every blob of the commit: reading them again from the mapped shard costs
    nothing, where git inflates each one anew. `span(doc)` is for worker processes: `content_path` opened and
    mapped there, the bytes of `doc` are at that (offset, length). The shard stays readable while this object
    lives, even if a newer generation replaces it (its mapping outlives the files).
    """

    shard: Shard
    docs: list[int]  # the commit's documents by number (the default branch's in tree order)

    @property
    def content_path(self) -> Path:
        return self.shard.path / "content.bin"

    def path(self, doc: int) -> str:
        return self.shard.paths[doc]

    def skipped(self, doc: int) -> str:
        """Why `doc`'s content is not indexed: "" (it is), "binary" or "too large" (no bytes are stored)."""
        return self.shard.skipped[doc]

    def size(self, doc: int) -> int:
        return self.shard.sizes[doc]

    def span(self, doc: int) -> tuple[int, int]:
        return self.shard.doc_span(doc)

    def data(self, doc: int) -> memoryview:
        """`doc`'s bytes exactly as in git; empty when skipped."""
        return self.shard.doc_bytes(doc)


# A listener gets the repository and the indexed branches (branch name → commit SHA) of the new generation.
IndexListener = Callable[[Repo, dict[str, str]], None]


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
        # Per repository: the pointer file's identity when `_shards` was last brought up to date with it.
        self._stamps: dict[int, tuple[int, int, int]] = {}
        self._unreadable: set[int] = set()
        # Called after a new generation is swapped in, with the repository and its indexed branch commits
        # (branch → commit): capabilities built on search (codenav symbols, nls chunks) index the same revisions.
        self._index_listeners: list[IndexListener] = []
        # Per-revision symbol tables for type:symbol and the definition tier of ranking (search/symbols.py).
        self._symbols: SymbolSource | None = None

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
        searched = list(targets)
        symbol_files: list[FileMatch] = []
        if q.type == "symbol":
            # Definitions whose name matches come first; then the same terms as text, in the usual order.
            symbol_files = self._symbol_matches(targets, q, limit or MAX_COUNT)
            q = replace(q, type="file")
        results = SearchResults([], 0, False, False, skipped, count_given=q.count_all or q.count is not None)
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
                results.files.extend(file_matches(shard, found, q, repo=repo.name, commit=commit))
                results.match_count += found.match_count
                results.timed_out |= found.timed_out
            targets = []
        page_started = time.monotonic()
        self._collect(targets, q, limit, deadline, results)
        if limit is not None and results.limit_hit and not results.count_given:
            # The default page stopped early: better matches (a phrase, whole words) may lie beyond it. Looking
            # for them only refines the ranking, so it gets a budget in proportion to the page itself: on the
            # Linux corpus the unbounded passes turned 10 ms multi-term queries into 0.2-2 s ones.
            refine_budget = max(REFINE_FLOOR_SECONDS, REFINE_FACTOR * (time.monotonic() - page_started))
            refine_deadline = min(deadline, time.monotonic() + refine_budget)
            for narrower in _better_queries(q):
                extra = SearchResults([], 0, False, False, [])
                self._collect(targets, narrower, limit, refine_deadline, extra)
                seen = {(f.repo, f.path) for f in results.files}
                for f in extra.files:
                    if (f.repo, f.path) not in seen:
                        results.files.append(f)
                        results.match_count += len(f.line_matches)
                # Only the query's own deadline makes the answer partial; the refinement budget does not.
                results.timed_out |= extra.timed_out and time.monotonic() >= deadline
                if results.timed_out or extra.limit_hit or time.monotonic() >= refine_deadline:
                    break  # a full page of the better form is enough to rank from
        rank(
            results.files,
            [p.text for p in q.patterns() if not p.regex],
            case_sensitive=q.case_sensitive,
            definitions=self._definition_spans(searched, results.files),
        )
        if symbol_files:
            defined = {(f.repo, f.path) for f in symbol_files}
            results.files = symbol_files + [f for f in results.files if (f.repo, f.path) not in defined]
            results.match_count += sum(len(f.line_matches) for f in symbol_files)
        results.duration_ms = (time.monotonic() - started) * 1000
        return results

    def set_symbol_source(self, source: SymbolSource | None) -> None:
        """Use `source`'s symbol tables for type:symbol and ranking (codenav registers itself in its setup)."""
        self._symbols = source

    def _symbol_matches(
        self, targets: list[tuple[Repo, Shard, str | None, str]], q: Query, limit: int
    ) -> list[FileMatch]:
        """Files holding definitions whose name matches `q`, best first (nothing without a symbol source)."""
        source = self._symbols
        if source is None:
            return []
        match = name_matcher(q)
        include = _path_filter(q)
        found: list[tuple[Repo, str, SymbolMatch]] = []
        for repo, _shard, _branch, commit in targets:
            got = source.symbols(repo, commit, match, include, limit)
            found.extend((repo, commit, s) for s in got or ())
        order = symbol_order([p.text for p in q.patterns() if not p.regex], case_sensitive=q.case_sensitive)
        found.sort(key=lambda t: order(t[2]))
        files: dict[tuple[str, str], FileMatch] = {}
        for repo, commit, s in found[:limit]:
            f = files.get((repo.name, s.path))
            if f is None:
                f = files[(repo.name, s.path)] = FileMatch(repo.name, s.path, commit, language_of(s.path))
            if s.line not in f.labels:
                f.labels[s.line] = s.label
                f.line_matches.append(LineMatch(s.line, s.text, [(s.start, s.end)]))
        for f in files.values():
            f.line_matches.sort(key=lambda m: m.line_number)
        return list(files.values())

    def _definition_spans(
        self, targets: list[tuple[Repo, Shard, str | None, str]], files: list[FileMatch]
    ) -> dict[tuple[str, str], list[tuple[int, int, int]]]:
        """(repository, path) → defined names' spans, for the matched files whose revision has a symbol table."""
        source = self._symbols
        if source is None or not files or len(files) > MAX_SYMBOL_RANKED_FILES:
            return {}
        repos = {repo.name: repo for repo, _shard, _branch, _commit in targets}
        paths: dict[tuple[str, str], list[str]] = {}
        for f in files:
            if f.line_matches:
                paths.setdefault((f.repo, f.commit), []).append(f.path)
        out: dict[tuple[str, str], list[tuple[int, int, int]]] = {}
        for (name, commit), wanted in paths.items():
            repo = repos.get(name)
            spans = None if repo is None else source.definitions(repo, commit, wanted)
            for path, found in (spans or {}).items():
                out[(name, path)] = found
        return out

    def _collect(
        self,
        targets: list[tuple[Repo, Shard, str | None, str]],
        q: Query,
        limit: int | None,
        deadline: float,
        results: SearchResults,
    ) -> None:
        """Search `targets` one after another into `results` until `limit` matching lines or the deadline."""
        for repo, shard, branch, commit in targets:
            remaining = None if limit is None else limit - results.match_count
            if remaining is not None and remaining <= 0:
                results.limit_hit = True
                break
            found = search_shard_parallel(
                shard, q, branch=branch, limit=remaining, deadline=deadline, pool=self._pool(), parts=_CPUS
            )
            results.files.extend(file_matches(shard, found, q, repo=repo.name, commit=commit))
            results.match_count += found.match_count
            results.limit_hit |= found.limit_hit
            if found.timed_out:
                results.timed_out = True
                break

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

    # --- index lifecycle --------------------------------------------------------------------------

    def shard(self, repo: Repo) -> Shard | None:
        """The current shard of `repo`, or None when it has none.

        Whoever wrote it (this server, `codewell index` in another process): the pointer file is replaced
        atomically on every new generation, so one `stat` per call tells whether the loaded shard is still
        current. A new generation is opened and swapped in; searches already running keep the shard object
        they hold, and its mappings close when the last of them lets go of it (the files stay readable
        after the writer deletes them).
        """
        pointer = self._pointer(repo.id)
        for _attempt in range(3):
            try:
                stamp = _stamp(pointer)
            except FileNotFoundError:
                with self._lock:  # dropped or never indexed
                    self._shards.pop(repo.id, None)
                    self._stamps.pop(repo.id, None)
                return None
            with self._lock:
                loaded = self._shards.get(repo.id)
                if self._stamps.get(repo.id) == stamp and (loaded is not None or repo.id in self._unreadable):
                    return loaded
                try:
                    shard = self._open_generation(repo, pointer)
                except FileNotFoundError:
                    # The writer replaced the pointer and removed the generation we read from it: read again.
                    continue
                self._stamps[repo.id] = stamp
                if shard is None:
                    self._shards.pop(repo.id, None)
                    self._unreadable.add(repo.id)  # until the pointer changes: not re-read on every search
                else:
                    self._shards[repo.id] = shard
                    self._unreadable.discard(repo.id)
                return shard
        return None

    def _open_generation(self, repo: Repo, pointer: Path) -> Shard | None:
        """Open the generation the pointer names (the loaded one if it is that); None when unreadable."""
        name = pointer.read_text().strip()
        loaded = self._shards.get(repo.id)
        if loaded is not None and loaded.path.name == name:
            return loaded
        try:
            return Shard.open(self.root / "shards" / name)
        except ShardFormatError as exc:
            # Written by an earlier version: the repository counts as not indexed until re-indexed.
            if repo.id not in self._stale_format:
                self._stale_format.add(repo.id)
                log.warning("shard needs re-indexing: %s", exc, extra={"repo": repo.name})
            return None
        except FileNotFoundError:
            raise
        except (OSError, ValueError):
            log.exception("cannot open shard", extra={"repo": repo.name})
            return None

    def revision_files(self, repo: Repo, commit: str) -> RevisionFiles | None:
        """The files of `commit` from `repo`'s current shard; None when that shard does not hold `commit`.

        For the index listeners (codenav's symbols, nls's chunks), which run right after the shard is built:
        the caller decides, no access check here (they index for everyone, and answer per caller later).
        """
        shard = self.shard(repo)
        if shard is None:
            return None
        branch = next((name for name, sha in shard.branches.items() if sha == commit), None)
        if branch is None:
            return None
        return RevisionFiles(shard, list(shard.branch_docs(branch)))

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
            tmp = pointer.with_name(f"{pointer.name}.{os.getpid()}.tmp")
            tmp.write_text(name)
            os.replace(tmp, pointer)
            with self._lock:
                old = self._shards.get(repo.id)
                self._shards[repo.id] = shard
                self._stamps[repo.id] = _stamp(pointer)
                self._unreadable.discard(repo.id)
                self._state[repo.id] = ("indexed", None)
            if old is not None and old.path != target:
                shutil.rmtree(old.path, ignore_errors=True)
            self._remove_stale(repo.id, keep=name)
        self._notify_indexed(repo, commits)
        return self._status_of(repo)

    def add_index_listener(self, listener: IndexListener) -> None:
        """Call `listener(repo, branch_commits)` after every new generation of a repository's index."""
        with self._lock:
            if listener not in self._index_listeners:
                self._index_listeners.append(listener)

    def _notify_indexed(self, repo: Repo, commits: dict[str, str]) -> None:
        # A listener's failure is its own (logged): the search index is already in place and stays served.
        for listener in list(self._index_listeners):
            try:
                listener(repo, dict(commits))
            except Exception:
                log.exception("index listener failed for %s", repo.name)

    def _remove_stale(self, repo_id: int, keep: str) -> None:
        """Remove the generations older than `keep` (all when it is empty).

        Newer ones are another process's build in progress, which will replace `keep` when done.
        """
        newest = _generation(keep) if keep else None
        for path in (self.root / "shards").glob(f"{repo_id}-*"):
            generation = _generation(path.name)
            if path.name != keep and (newest is None or generation is None or generation < newest):
                shutil.rmtree(path, ignore_errors=True)

    def drop(self, repo: Repo) -> None:
        """Forget `repo`'s index (after the repository was removed)."""
        with self._lock:
            self._shards.pop(repo.id, None)
            self._stamps.pop(repo.id, None)
            self._state.pop(repo.id, None)
        self._pointer(repo.id).unlink(missing_ok=True)
        self._remove_stale(repo.id, keep="")

    def index_repo(self, actor: Actor, name: str, *, workers: int = 1, force: bool = False) -> IndexStatus:
        """Index one repository now (site admins and the service itself only)."""
        ensure(actor, Action.SEARCH_INDEX)
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
        done = 0
        for repo in self.repos.readable(INTERNAL):
            try:
                if self.needs_index(repo):
                    self.index(repo)
                    done += 1
            except Exception:
                log.exception("indexing failed", extra={"repo": repo.name})
        return done


def _better_queries(q: Query) -> list[Query]:
    """`q` narrowed to its better matches (ranking.better_match_regexes), for a query of AND-ed plain terms."""
    expr = q.expr
    if q.type != "file" or expr is None:
        return []
    children = expr.children if isinstance(expr, And) else (expr,)
    if not all(isinstance(c, Pattern) and not c.regex for c in children):
        return []
    terms = [c.text for c in children if isinstance(c, Pattern)]
    out: list[Query] = []
    for form in better_match_regexes(terms):
        patterns = tuple(Pattern(regex, regex, True, 0) for regex in form)
        out.append(replace(q, expr=patterns[0] if len(patterns) == 1 else And(patterns)))
    return out


def _path_filter(q: Query) -> Callable[[str], bool]:
    """The query's file:, -file:, lang: and -lang: filters as a predicate on paths (for symbol matches)."""
    include = [compile_regex(p, case_sensitive=q.case_sensitive) for p in q.files]
    exclude = [compile_regex(p, case_sensitive=q.case_sensitive) for p in q.exclude_files]
    languages = set(q.languages)
    excluded = set(q.exclude_languages)

    def test(path: str) -> bool:
        raw = path.encode("utf-8")
        if any(rx.search(raw) is None for rx in include) or any(rx.search(raw) for rx in exclude):
            return False
        language = language_of(path)
        return (not languages or language in languages) and language not in excluded

    return test


def _generation(name: str) -> int | None:
    """The build time (ns) in a generation directory's name `<repo id>-<time_ns>`."""
    suffix = name.rpartition("-")[2]
    return int(suffix) if suffix.isdigit() else None


def _stamp(pointer: Path) -> tuple[int, int, int]:
    """The pointer file's identity: each generation's atomic replace gives it a new inode and times."""
    st = pointer.stat()
    return st.st_ino, st.st_mtime_ns, st.st_ctime_ns


def _normalize_languages(q: Query) -> Query:
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
