"""SearchService: indexed search over the repositories an actor may read, and index maintenance.

Shards are compound (docs/design.md): one holds the documents of one or many repositories, and the manifest
(`index/manifest.py`) says which shard each repository lives in. A query touches shards, not repositories:
per shard, the documents of the readable, live repositories at their selected branch form the base of every
filter, computed with a few numpy operations over all repositories at once.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import numpy as np
from pyroaring import BitMap

from codewell.authz import Action, ensure
from codewell.core.actors import INTERNAL, Actor
from codewell.core.errors import InvalidInput, NotFound
from codewell.core.processes import process_pool, stop_pool
from codewell.jobs.placement import owner
from codewell.jobs.service import JobService
from codewell.repos.service import Repo, RepoService
from codewell.search.cluster import Fanout, Reply, coverage, internal_token, merge_files, preferred_holders
from codewell.search.index.bitmaps import bitmap_of
from codewell.search.index.builder import SourceDoc, build_shard
from codewell.search.index.integrity import mapping_problem
from codewell.search.index.languages import LANGUAGES, language_of, normalize_language
from codewell.search.index.manifest import Manifest, Stamp, new_shard_name
from codewell.search.index.shard import DocSet, Shard, ShardFormatError, ShardRepo
from codewell.search.indexer import MirrorSource, branch_commits, build_from_mirror, build_from_mirrors
from codewell.search.parallel import search_many, search_shard_parallel
from codewell.search.query.parser import And, Pattern, Query, parse_query
from codewell.search.query.regex import compile_regex
from codewell.search.ranking import better_match_regexes, rank, score
from codewell.search.results import FileMatch, IndexStatus, LineMatch, SearchResults
from codewell.search.searcher import file_matches, gc_paused
from codewell.search.symbols import DefinitionSpans, SymbolMatch, SymbolSource, name_matcher, symbol_order
from codewell.search.wire import (
    FRAME_VERSION,
    decode_answer,
    decode_ids,
    decode_results,
    decode_status,
    encode_actor,
    encode_ids,
)

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
# Ranking asks the symbol source about at most this many files: a page (tens of files) is ranked with the symbol
# tables, a larger count:all with the regex forms. Reading a file's definitions costs ~1.4 ms on the Linux tree
# (thousands of symbols in a C file): 5,000 files made a 12,000-line count:all over 2,000 repositories take 2 s,
# slower than ripgrep (bench/cluster_bench.py).
MAX_SYMBOL_RANKED_FILES = 300
_CPUS = os.cpu_count() or 1
# Merging (as Zoekt's compound shards): shards whose live content is below MERGE_SMALL_BYTES are merged into
# compound shards of about COMPOUND_TARGET_BYTES; a shard with at least MERGE_DEAD_FRACTION of its documents
# dead (their repository re-indexed elsewhere) is rewritten too. Tests make them tiny. A batch of
# INDEX_BATCH_REPOS small repositories (~20 Linux files each) is 60-70 MB: below the threshold, so merged.
COMPOUND_TARGET_BYTES = 1 << 30
MERGE_SMALL_BYTES = 128 << 20
MERGE_DEAD_FRACTION = 0.5
# `reconcile` indexes missing repositories this many per shard (bulk registration of small repositories).
INDEX_BATCH_REPOS = 256
# Readable repositories without an index are named one by one up to this many; more are counted.
_SKIPPED_DETAIL = 20
_SKIPPED_TTL_SECONDS = 10.0
# Readable-id sets whose bitmap the web tier of a cluster remembers (one per user searching at the moment).
_PACKED_SETS = 256
# A replica drops a repository this long after its new owner first said it holds it (queries in flight meanwhile).
HANDOVER_GRACE_SECONDS = 10.0
# How often the open shards' files are compared with their mappings (~2 µs a file: a few hundred µs a second).
_INTEGRITY_SECONDS = 1.0
# Per view: readable-set masks and per-shard document sets kept for repeated queries of the same actors.
_MASK_CACHE = 32
_DOCSET_CACHE = 256
_REPO_CACHE = 4096


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


@dataclass(frozen=True)
class _Target:
    """One shard to search with the documents a query may see; hits name their repository through `origin`."""

    shard: Shard
    docs: DocSet | None  # None: every document (an ad-hoc shard of one unindexed commit)
    branch: str | None = None  # `repo:name@rev`: that branch of the one repository in `docs`
    slots: np.ndarray | None = None  # the repositories (slots) searched; None: the shard's only one
    first: str = ""  # the first searched repository's name: targets are searched in name order

    def origin(self, doc: int) -> tuple[str, str]:
        repo = self.shard.repos[int(self.shard.doc_slot[doc])]
        branch = self.branch or repo.search_branch
        assert branch is not None  # repositories without a branch are never searched
        return repo.name, repo.branches[branch]

    def repo_slots(self) -> list[int]:
        return [0] if self.slots is None else [int(s) for s in self.slots]


@dataclass
class _View:
    """What the manifest said when last read: the live repositories and their opened shards.

    Rebuilt when the manifest's stat identity changes; immutable otherwise except for its bounded caches.
    Slot arrays are concatenated over the shards (shard k's slots start at `offsets[k]`) so that the readable
    repositories and `repo:` filters are applied to every repository with one numpy operation.
    """

    stamp: Stamp | None
    repos: dict[int, tuple[Shard, ShardRepo]]
    shards: list[Shard]
    offsets: list[int]
    slot_ids: np.ndarray  # repository id per slot (-1 for an unknown id)
    live: np.ndarray  # the manifest names this shard for the slot's repository
    searchable: np.ndarray  # live, with a branch to search
    names: list[str]
    live_ids: frozenset[int]
    lock: threading.Lock = field(default_factory=threading.Lock)
    masks: OrderedDict[Any, np.ndarray] = field(default_factory=OrderedDict)
    docsets: OrderedDict[tuple[str, bytes], DocSet] = field(default_factory=OrderedDict)

    @classmethod
    def build(cls, stamp: Stamp | None, manifest: dict[int, str], shards: list[Shard]) -> _View:
        repos: dict[int, tuple[Shard, ShardRepo]] = {}
        ids: list[int] = []
        live: list[bool] = []
        searchable: list[bool] = []
        names: list[str] = []
        offsets: list[int] = []
        for shard in shards:
            offsets.append(len(ids))
            for repo in shard.repos:
                alive = repo.id is not None and manifest.get(repo.id) == shard.path.name
                if alive and repo.id is not None:
                    repos[repo.id] = (shard, repo)
                ids.append(-1 if repo.id is None else repo.id)
                live.append(alive)
                searchable.append(alive and repo.search_branch is not None)
                names.append(repo.name)
        offsets.append(len(ids))
        return cls(
            stamp,
            repos,
            shards,
            offsets,
            np.asarray(ids, dtype=np.int64),
            np.asarray(live, dtype=bool),
            np.asarray(searchable, dtype=bool),
            names,
            frozenset(repos),
        )

    def _cached(self, key: Any, make: Callable[[], np.ndarray]) -> np.ndarray:
        with self.lock:
            found = self.masks.get(key)
            if found is not None:
                self.masks.move_to_end(key)
                return found
        found = make()
        with self.lock:
            self.masks[key] = found
            while len(self.masks) > _MASK_CACHE:
                self.masks.popitem(last=False)
        return found

    def readable(self, ids: frozenset[int]) -> np.ndarray:
        """Slots of searchable repositories among `ids` (a copy the caller may narrow)."""

        def make() -> np.ndarray:
            wanted = np.fromiter(ids, dtype=np.int64, count=len(ids))
            mask: np.ndarray = self.searchable & np.isin(self.slot_ids, wanted)
            return mask

        return self._cached(("ids", ids), make).copy()

    def named(self, pattern: str) -> np.ndarray:
        """Slots whose repository name matches the `repo:` regex `pattern` (case-insensitive)."""

        def make() -> np.ndarray:
            rx = compile_regex(pattern, case_sensitive=False)
            return np.fromiter((rx.search(n.encode("utf-8")) is not None for n in self.names), bool, len(self.names))

        return self._cached(("name", pattern), make)

    def docset(self, k: int, selected: np.ndarray) -> DocSet:
        """The default-branch documents of shard k's `selected` slots (a bool mask over its slots)."""
        shard = self.shards[k]
        if selected.all():
            return DocSet(("all",), shard.default_docs)
        key = np.packbits(selected).tobytes()
        with self.lock:
            found = self.docsets.get((shard.path.name, key))
            if found is not None:
                self.docsets.move_to_end((shard.path.name, key))
                return found
        slots = np.flatnonzero(selected)
        if len(slots) <= 64:
            docs = BitMap()
            for slot in slots.tolist():
                repo = shard.repos[slot]
                docs.add_range(repo.lo, repo.hi)
        else:
            docs = bitmap_of(np.flatnonzero(selected[shard.doc_slot]))
        found = DocSet(("slots", key), docs & shard.default_docs)
        with self.lock:
            self.docsets[(shard.path.name, key)] = found
            while len(self.docsets) > _DOCSET_CACHE:
                self.docsets.popitem(last=False)
        return found


class SearchService:
    """Search (filtered to readable repositories before anything runs) and the lifecycle of compound shards."""

    def __init__(self, runtime: Runtime, root: Path) -> None:
        self.runtime = runtime
        self.root = root
        self.manifest = Manifest(root)
        self._lock = threading.RLock()
        self._repo_locks: dict[int, threading.Lock] = {}
        self._state: dict[int, tuple[str, str | None]] = {}
        self._state_version = 0
        self._unindexed: OrderedDict[tuple[int, str], Shard] = OrderedDict()
        self._workers: ProcessPoolExecutor | None = None
        # Shards opened by this process, by directory name (kept while the manifest names them).
        self._loaded: dict[str, Shard] = {}
        self._current: _View | None = None
        self._checked_at = time.monotonic()  # when the shards' files were last compared with their mappings
        self._unreadable: set[str] = set()
        self._skipped_cache: tuple[Any, float, list[Repo]] | None = None
        self._repo_cache: OrderedDict[str, Repo] = OrderedDict()
        # Called after a new generation is swapped in, with the repository and its indexed branch commits
        # (branch → commit): capabilities built on search (codenav symbols, nls chunks) index the same revisions.
        self._index_listeners: list[IndexListener] = []
        # Per-revision symbol tables for type:symbol and the definition tier of ranking (search/symbols.py).
        self._symbols: SymbolSource | None = None
        # In a cluster: this process's replica name when it is a searcher (it answers over what it holds), and
        # the web tier's client of the replicas otherwise (search/cluster.py).
        self.replica = ""
        self._fanout: Fanout | None = None
        self._held_names: tuple[_View, dict[str, int]] | None = None
        self._searched = threading.local()  # the view each thread's last search read (`held(searched=True)`)
        self._handed: dict[int, float] = {}  # repository → when its new owner was first seen holding it
        self._packed_memo: OrderedDict[int, tuple[frozenset[int], np.ndarray, str]] = OrderedDict()
        self._packed_lock = threading.Lock()

    def _pool(self) -> ProcessPoolExecutor | None:
        """Verification processes for exhaustive searches of big shards (started on first need)."""
        if _CPUS < 2:
            return None
        with self._lock:
            if self._workers is None:
                self._workers = process_pool(_CPUS - 1)
            return self._workers

    def close(self) -> None:
        """Stop the verification processes and the replicas' client."""
        with self._lock:
            if self._workers is not None:
                stop_pool(self._workers)
                self._workers = None
            if self._fanout is not None:
                self._fanout.close()
                self._fanout = None

    # --- the cluster ------------------------------------------------------------------------------------

    @property
    def fans_out(self) -> bool:
        """Searches go to the searcher replicas (a web or worker process of a cluster), not this data dir."""
        return self.runtime.settings.clustered and not self.replica

    def hold_locally(self, replica: str) -> None:
        """Make this process the searcher replica `replica`: it answers over the shards it holds, and says
        nothing of the repositories it does not hold (the web tier accounts for those)."""
        self.replica = replica

    def held(self, *, searched: bool = False) -> tuple[frozenset[int], dict[str, int]]:
        """The repositories this process's shards hold now: their ids, and name → id. With `searched`, those of
        the view this thread's last search read: what a replica answered for must be what it searched, even when
        a new generation (a repository handed to its new owner) replaced the view meanwhile."""
        view = getattr(self._searched, "view", None) if searched else None
        if view is None:
            view = self._view()
        cached = self._held_names
        if cached is None or cached[0] is not view:
            cached = self._held_names = (view, {entry.name: rid for rid, (_, entry) in view.repos.items()})
        return view.live_ids, cached[1]

    def fanout(self) -> Fanout:
        """The client of the searcher replicas (one per process, keeping connections open)."""
        with self._lock:
            if self._fanout is None:
                self._fanout = Fanout(internal_token(self.runtime.secret_key()))
            return self._fanout

    def _packed(self, ids: frozenset[int]) -> tuple[np.ndarray, str]:
        """The readable ids as an array and as the bitmap sent to the replicas, for the last few sets seen: the
        catalog hands back the same set object while no access data changes (repos/catalog.py), so a request
        pays for neither (~0.9 ms at 10,000 repositories)."""
        with self._packed_lock:
            entry = self._packed_memo.get(id(ids))
            if entry is not None and entry[0] is ids:
                self._packed_memo.move_to_end(id(ids))
                return entry[1], entry[2]
        array = np.fromiter(ids, dtype=np.int64)
        packed = encode_ids(array.tolist())
        with self._packed_lock:
            # The set itself is kept with its entry, so that its id cannot name another set meanwhile.
            self._packed_memo[id(ids)] = (ids, array, packed)
            while len(self._packed_memo) > _PACKED_SETS:
                self._packed_memo.popitem(last=False)
        return array, packed

    def _search_replicas(self, actor: Actor, query: str, count: int | None, timeout: float | None) -> SearchResults:
        started = time.monotonic()
        q = parse_query(query)  # a malformed query is refused here, before anything is sent
        limit = None if q.count_all else min(count or q.count or DEFAULT_COUNT, MAX_COUNT)
        if q.count_all and count:
            limit = count
        deadline = started + (timeout if timeout is not None else q.timeout)
        readable, packed = self._packed(self.repos.readable_ids(actor))
        replicas = self.runtime.get(JobService).replicas()
        body = {
            "actor": encode_actor(actor),
            # Each replica scores its files beside its symbol tables; the merged page is sorted here, once.
            "rank": False,
            "readable": packed,
            "query": query,
            "count": count,
            "timeout": max(0.05, deadline - time.monotonic()),
            # Lines in the REST answer's shape, which the route copies as they came (search/wire.py).
            "frame": FRAME_VERSION,
        }
        replies = self.fanout().post_all(replicas, "/search", body, deadline, decode_answer) if replicas else []
        answers: list[tuple[str, SearchResults, list[int]]] = []
        held: dict[str, np.ndarray] = {}
        failed: list[Reply] = []
        for reply in replies:
            try:
                if reply.payload is None:
                    raise ValueError(reply.error)
                results, repo_ids, holds = decode_results(reply.payload)
            except (KeyError, TypeError, ValueError):
                failed.append(reply if reply.payload is None else Reply(reply.replica, None, "answered unreadably"))
                continue
            answers.append((reply.replica.name, results, repo_ids))
            held[reply.replica.name] = holds
        files, match_count, cut = merge_files(answers, preferred_holders(held), limit, limit or MAX_COUNT)
        out = SearchResults(
            files,
            match_count,
            cut or any(r.limit_hit for _, r, _ in answers),
            any(r.timed_out for _, r, _ in answers),
            [],
            count_given=q.count_all or q.count is not None,
        )
        missing = coverage(readable, held)
        if not replicas:
            out.skipped.append("every repository: no searcher replica is alive, nothing was searched")
            out.unsearched = sorted(ref.name for ref in self.repos.refs_of(actor, readable.tolist()).values())
        elif missing.size:
            unindexed = self._account_for_failures(actor, missing, failed, replicas, out)
            out.skipped.extend(self._skipped(actor, _normalize_languages(q), frozenset(unindexed)))
        out.duration_ms = (time.monotonic() - started) * 1000
        return out

    def _account_for_failures(
        self, actor: Actor, missing: np.ndarray, failed: list[Reply], replicas: Sequence[Any], out: SearchResults
    ) -> list[int]:
        """Name the readable repositories that replicas which did not answer own (`out.unsearched`, with one
        note per replica); return the other missing ones, which no replica holds yet (not indexed)."""
        if not failed:
            return [int(rid) for rid in missing.tolist()]
        owners = [r.name for r in replicas if not r.draining]
        down = {reply.replica.name: reply for reply in failed}
        # A draining replica that is down may still have held anything that has not moved yet.
        anything = any(reply.replica.draining for reply in failed)
        lost: dict[str, list[int]] = {name: [] for name in down}
        rest: list[int] = []
        for rid in missing.tolist():
            holder = owner(f"repo:{rid}", owners) if owners else None
            if holder in down:
                lost[holder].append(rid)
            elif anything:
                lost[next(n for n, r in down.items() if r.replica.draining)].append(rid)
            else:
                rest.append(rid)
        refs = self.repos.refs_of(actor, [rid for ids in lost.values() for rid in ids])
        for name, ids in lost.items():
            names = sorted(refs[rid].name for rid in ids if rid in refs)
            out.unsearched.extend(names)
            shown = ", ".join(names[:_SKIPPED_DETAIL]) + (
                f" and {len(names) - _SKIPPED_DETAIL} more" if len(names) > _SKIPPED_DETAIL else ""
            )
            why = down[name].error or "failed"
            out.skipped.append(
                f"searcher {name} {why}: {len(names)} repositories not searched" + (f" ({shown})" if names else "")
            )
        out.unsearched.sort()
        return rest

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime, runtime.settings.data_dir / "search")

    @property
    def repos(self) -> RepoService:
        return self.runtime.get(RepoService)

    # --- search ----------------------------------------------------------------------------------

    def search(
        self,
        actor: Actor,
        query: str,
        *,
        count: int | None = None,
        timeout: float | None = None,
        readable: frozenset[int] | None = None,
        ranked: bool = True,
    ) -> SearchResults:
        """Run `query` over the readable repositories; partial results are marked (limit_hit/timed_out).

        `readable`: the actor's readable repository ids when the caller already has them (a searcher replica
        gets them from the web tier with the query, so that N replicas do not each ask the database again).
        `ranked=False` scores the text matches (their ranking keys) but leaves them in repository-name order: the
        web tier of a cluster sorts the merged page by those keys (search/cluster.py)."""
        with gc_paused():
            if self.fans_out:
                return self._search_replicas(actor, query, count, timeout)
            return self._search(actor, query, count, timeout, readable, ranked)

    def _search(
        self,
        actor: Actor,
        query: str,
        count: int | None,
        timeout: float | None,
        readable: frozenset[int] | None = None,
        ranked: bool = True,
    ) -> SearchResults:
        started = time.monotonic()
        q = _normalize_languages(parse_query(query))
        limit = None if q.count_all else min(count or q.count or DEFAULT_COUNT, MAX_COUNT)
        if q.count_all and count:
            limit = count
        deadline = started + (timeout if timeout is not None else q.timeout)
        targets, skipped = self._targets(actor, q, readable)
        symbol_files: list[FileMatch] = []
        if q.type == "symbol":
            # Definitions whose name matches come first; then the same terms as text, in the usual order.
            symbol_files = self._symbol_matches(actor, targets, q, limit or MAX_COUNT)
            q = replace(q, type="file")
        results = SearchResults([], 0, False, False, skipped, count_given=q.count_all or q.count is not None)
        if limit is None:
            # count:all: every shard is searched anyway, so fan out over processes.
            found_all = search_many(
                [(t.shard, t.docs) for t in targets], q, deadline=deadline, pool=self._pool(), parts=_CPUS
            )
            for target, found in zip(targets, found_all, strict=True):
                results.files.extend(file_matches(target.shard, found, q, origin=target.origin))
                results.match_count += found.match_count
                results.timed_out |= found.timed_out
            targets = []
        page_started = time.monotonic()
        self._collect(targets, q, limit, deadline, results)
        # Repository name order, as when every repository had its own shard (a compound shard's repositories
        # are in name order, but shards interleave): ranking is stable, so ties keep this order.
        results.files.sort(key=lambda f: f.repo)
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
                        results.match_count += f.line_count
                # Only the query's own deadline makes the answer partial; the refinement budget does not.
                results.timed_out |= extra.timed_out and time.monotonic() >= deadline
                if results.timed_out or extra.limit_hit or time.monotonic() >= refine_deadline:
                    break  # a full page of the better form is enough to rank from
        (rank if ranked else score)(
            results.files,
            [p.text for p in q.patterns() if not p.regex],
            case_sensitive=q.case_sensitive,
            definitions=self._definition_spans(results.files),
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

    def _symbol_matches(self, actor: Actor, targets: list[_Target], q: Query, limit: int) -> list[FileMatch]:
        """Files holding definitions whose name matches `q`, best first (nothing without a symbol source).

        The symbol tables are per repository and revision, so this asks every searched repository.
        """
        source = self._symbols
        if source is None:
            return []
        match = name_matcher(q)
        include = _path_filter(q)
        by_id = {repo.id: repo for repo in self.repos.readable(actor)}
        found: list[tuple[str, str, SymbolMatch]] = []
        for target in targets:
            for slot in target.repo_slots():
                entry = target.shard.repos[slot]
                repo = by_id.get(entry.id) if entry.id is not None else None
                branch = target.branch or entry.search_branch
                if repo is None or branch is None:
                    continue
                commit = entry.branches[branch]
                got = source.symbols(repo, commit, match, include, limit)
                found.extend((repo.name, commit, s) for s in got or ())
        order = symbol_order([p.text for p in q.patterns() if not p.regex], case_sensitive=q.case_sensitive)
        # Ties in repository-name order, whatever the shards' layout (merges change it; replicas each have their
        # own): the same definitions in the same order from one process or from several replicas.
        found.sort(key=lambda t: t[0])
        found.sort(key=lambda t: order(t[2]))
        files: dict[tuple[str, str], FileMatch] = {}
        for name, commit, s in found[:limit]:
            f = files.get((name, s.path))
            if f is None:
                f = files[(name, s.path)] = FileMatch(name, s.path, commit, language_of(s.path))
                f.order = order(s)
            if s.line not in f.labels:
                f.labels[s.line] = s.label
                f.line_matches.append(LineMatch(s.line, s.text, [(s.start, s.end)]))
        for f in files.values():
            f.line_matches.sort(key=lambda m: m.line_number)
        return list(files.values())

    def _definition_spans(self, files: list[FileMatch]) -> dict[tuple[str, str], list[tuple[int, int, int]]]:
        """(repository, path) → defined names' spans, for the matched files whose revision has a symbol table."""
        source = self._symbols
        if source is None or not files or len(files) > MAX_SYMBOL_RANKED_FILES:
            return {}
        paths: dict[tuple[str, str], list[str]] = {}
        for f in files:
            if f.line_count:
                paths.setdefault((f.repo, f.commit), []).append(f.path)
        out: dict[tuple[str, str], list[tuple[int, int, int]]] = {}
        for (name, commit), wanted in paths.items():
            repo = self._repo_named(name)
            spans = None if repo is None else source.definitions(repo, commit, wanted)
            for path, found in (spans or {}).items():
                out[(name, path)] = found
        return out

    def _repo_named(self, name: str) -> Repo | None:
        """The repository of a result (already filtered to readable ones), cached: the symbol source needs it."""
        with self._lock:
            repo = self._repo_cache.get(name)
            if repo is not None:
                self._repo_cache.move_to_end(name)
                return repo
        try:
            repo = self.repos.get(INTERNAL, name)
        except NotFound:
            return None
        with self._lock:
            self._repo_cache[name] = repo
            while len(self._repo_cache) > _REPO_CACHE:
                self._repo_cache.popitem(last=False)
        return repo

    def _collect(
        self, targets: list[_Target], q: Query, limit: int | None, deadline: float, results: SearchResults
    ) -> None:
        """Search `targets` one after another into `results` until `limit` matching lines or the deadline."""
        for target in targets:
            remaining = None if limit is None else limit - results.match_count
            if remaining is not None and remaining <= 0:
                results.limit_hit = True
                break
            found = search_shard_parallel(
                target.shard,
                q,
                branch=target.docs,
                limit=remaining,
                deadline=deadline,
                pool=self._pool(),
                parts=_CPUS,
            )
            results.files.extend(file_matches(target.shard, found, q, origin=target.origin))
            results.match_count += found.match_count
            results.limit_hit |= found.limit_hit
            if found.timed_out:
                results.timed_out = True
                break

    def _targets(
        self, actor: Actor, q: Query, readable: frozenset[int] | None = None
    ) -> tuple[list[_Target], list[str]]:
        """The shards to search with their documents, and messages about readable repos that were skipped.

        Everything per repository is a numpy mask over all of the view's repositories (readable, live, the
        `repo:` filters); Python loops run per shard, and per repository only for `repo:name@rev` targets.
        """
        view = self._searched.view = self._view()
        ids = self.repos.readable_ids(actor) if readable is None else readable
        selected = view.readable(ids)
        for pattern in q.exclude_repos:
            selected &= ~view.named(pattern)
        revised = np.zeros(len(selected), dtype=bool)
        for include in q.repos:
            selected &= view.named(include.pattern)
        # `repo:name@rev`: the revisions of the first include that names any (per repository, as before).
        revisions_of: list[tuple[np.ndarray, tuple[str, ...]]] = []
        for include in q.repos:
            if include.revisions:
                mask = selected & view.named(include.pattern) & ~revised
                revisions_of.append((mask, include.revisions))
                revised |= mask
        selected &= ~revised
        targets: list[_Target] = []
        for k, shard in enumerate(view.shards):
            lo, hi = view.offsets[k], view.offsets[k + 1]
            mine = selected[lo:hi]
            if mine.any():
                slots = np.flatnonzero(mine)
                first = shard.repos[int(slots[0])].name
                targets.append(_Target(shard, view.docset(k, mine), slots=slots, first=first))
        for mask, revisions in revisions_of:
            for index in np.flatnonzero(mask).tolist():
                shard, entry = view.repos[int(view.slot_ids[index])]
                for rev in revisions:
                    targets.append(self._revision_target(actor, shard, entry, rev))
        targets.sort(key=lambda t: t.first)
        if self.replica:
            return targets, []  # a replica answers for what it holds; the web tier accounts for the rest
        return targets, self._skipped(actor, q, ids - view.live_ids)

    def _revision_target(self, actor: Actor, shard: Shard, entry: ShardRepo, rev: str) -> _Target:
        slots = np.asarray([entry.slot])
        if rev in entry.branches:
            return _Target(shard, DocSet(("branch", entry.slot, rev), entry.branch_docs(rev)), rev, slots, entry.name)
        resolved = self.repos.resolve(actor, entry.name, rev)
        commit = resolved.commit
        for branch, sha in entry.branches.items():
            if sha == commit:
                docs = DocSet(("branch", entry.slot, branch), entry.branch_docs(branch))
                return _Target(shard, docs, branch, slots, entry.name)
        return _Target(self._unindexed_shard(resolved.repo, commit), None, None, None, entry.name)

    def _skipped(self, actor: Actor, q: Query, unindexed: frozenset[int]) -> list[str]:
        """Why readable repositories without an index were not searched: each named when few, else a count.

        Naming them needs their records (sync state, errors); those are read once per distinct set of
        unindexed repositories and kept a few seconds, so a site with a few repositories still cloning does
        not read every repository's record on every query.
        """
        if not unindexed:
            return []
        if len(unindexed) > _SKIPPED_DETAIL:
            return [f"{len(unindexed)} repositories: not indexed yet (cloning or being indexed), not searchable"]
        key = (unindexed, self._state_version)
        cached = self._skipped_cache
        if cached is not None and cached[0] == key and time.monotonic() - cached[1] < _SKIPPED_TTL_SECONDS:
            repos = cached[2]
        else:
            repos = [repo for repo in self.repos.readable(actor) if repo.id in unindexed]
            self._skipped_cache = (key, time.monotonic(), repos)
        include = [compile_regex(f.pattern, case_sensitive=False) for f in q.repos]
        exclude = [compile_regex(p, case_sensitive=False) for p in q.exclude_repos]
        out = []
        for repo in sorted(repos, key=lambda r: r.name):
            name = repo.name.encode("utf-8")
            if any(rx.search(name) for rx in exclude) or not all(rx.search(name) for rx in include):
                continue
            out.append(self._why_not_searchable(repo))
        return out

    def _unindexed_shard(self, repo: Repo, commit: str) -> Shard:
        """An ad-hoc shard of one commit that is not indexed (built once, kept in a small LRU)."""
        key = (repo.id, commit)
        with self._lock:
            cached = self._unindexed.get(key)
            if cached is not None:
                self._unindexed.move_to_end(key)
                return cached
        target = self.root / "adhoc" / f"{repo.id}-{commit}"
        build_from_mirror(
            target,
            repo.mirror_path,
            {commit: commit},
            {"repo_id": repo.id, "repo": repo.name, "default_branch": commit},
        )
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

    # --- where repositories live ------------------------------------------------------------------

    def _view(self) -> _View:
        """The current view of the manifest: one `stat` when nothing changed.

        Whoever wrote it (this server, `codewell index` or a merge in another process), the manifest is
        replaced atomically on every change, so its stat identity tells whether the view is current. Shards
        a new manifest names are opened (those already open are kept); searches already running keep the
        view and shards they hold, whose mappings stay valid after the files are deleted.
        """
        stamp = self.manifest.stamp()
        current = self._current
        if current is not None and current.stamp == stamp:
            if time.monotonic() - self._checked_at < _INTEGRITY_SECONDS:
                return current
            self._checked_at = time.monotonic()
            broken = {shard.path.name: problem for shard in current.shards if (problem := mapping_problem(shard))}
            # A shard replaced by a new generation is deleted right after the manifest changes: only a shard the
            # manifest still names, once its files were looked at, is damaged.
            if not broken or self.manifest.stamp() != stamp:
                return current if not broken else self._view()
            self._drop_broken(current, broken)
        with self._lock:
            current = self._current
            if current is not None and current.stamp == stamp:
                return current
            for _attempt in range(3):
                stamp = self.manifest.stamp()
                manifest = self.manifest.read()
                try:
                    shards = self._open_shards(set(manifest.values()))
                except FileNotFoundError:
                    continue  # a writer replaced the manifest and removed a shard we read from it: read again
                break
            else:
                shards = self._open_shards(set(manifest.values()), missing_ok=True)
            self._loaded = {shard.path.name: shard for shard in shards}
            order = sorted(shards, key=lambda s: min((r.name for r in s.repos), default=""))
            self._current = _View.build(stamp, manifest, order)
            return self._current

    def _drop_broken(self, view: _View, broken: dict[str, str]) -> None:
        """Shards whose files were truncated or deleted under this process (docs/security.md, "Storage faults"):
        never read through their mappings again (a truncated one is SIGBUS); their repositories leave the manifest
        and are indexed again."""
        ids: list[int] = []
        for name, problem in broken.items():
            log.warning(
                "shard %s no longer matches its files (%s): dropped, its repositories are re-indexed", name, problem
            )
            ids.extend(rid for rid, (shard, _) in view.repos.items() if shard.path.name == name)
        with self._lock:
            for name in broken:
                self._loaded.pop(name, None)
                self._unreadable.add(name)
            self._current = None

        def forget(manifest: dict[int, str]) -> None:
            for rid in ids:
                if manifest.get(rid) in broken:
                    del manifest[rid]

        self.manifest.update(forget)
        if ids:
            self.runtime.get(JobService).enqueue_many(
                "search.index", [(f"repo:{rid}", {"repo_id": rid}) for rid in ids], cause="shard damaged"
            )

    def _open_shards(self, names: set[str], *, missing_ok: bool = False) -> list[Shard]:
        shards = []
        for name in sorted(names):
            loaded = self._loaded.get(name)
            if loaded is not None:
                shards.append(loaded)
                continue
            if name in self._unreadable:
                continue
            try:
                shards.append(Shard.open(self.manifest.shards / name))
            except ShardFormatError as exc:
                # Written by an earlier version: its repositories count as not indexed until re-indexed.
                self._unreadable.add(name)
                log.warning("shard needs re-indexing: %s", exc)
            except FileNotFoundError:
                if not missing_ok:
                    raise
            except (OSError, ValueError, KeyError):
                self._unreadable.add(name)
                log.exception("cannot open shard %s", name)
        return shards

    def _forget_loaded(self) -> None:
        """Drop every opened shard and the view (as after a restart)."""
        with self._lock:
            self._loaded.clear()
            self._unreadable.clear()
            self._current = None

    def _entry(self, repo: Repo) -> tuple[Shard, ShardRepo] | None:
        return self._view().repos.get(repo.id)

    # --- index lifecycle --------------------------------------------------------------------------

    def shard(self, repo: Repo) -> Shard | None:
        """The shard `repo`'s documents live in (shared with other repositories when compound), or None."""
        entry = self._entry(repo)
        return None if entry is None else entry[0]

    def revision_files(self, repo: Repo, commit: str) -> RevisionFiles | None:
        """The files of `commit` from `repo`'s current shard; None when that shard does not hold `commit`.

        For the index listeners (codenav's symbols, nls's chunks), which run right after the shard is built:
        the caller decides, no access check here (they index for everyone, and answer per caller later).
        """
        entry = self._entry(repo)
        if entry is None:
            return None
        shard, found = entry
        branch = next((name for name, sha in found.branches.items() if sha == commit), None)
        if branch is None:
            return None
        return RevisionFiles(shard, list(found.branch_docs(branch)))

    def needs_index(self, repo: Repo) -> bool:
        """True when the indexed branch commits differ from the mirror's (or nothing is indexed)."""
        if not repo.default_branch or not repo.mirror_path.exists():
            return False
        wanted = branch_commits(repo.mirror_path, repo.default_branch, repo.extra_branches)
        entry = self._entry(repo)
        return entry is None or entry[1].branches != wanted

    def index(
        self, repo: Repo, *, workers: int = 1, force: bool = False, progress: Callable[[int, int], None] | None = None
    ) -> IndexStatus:
        """Index `repo`'s default and extra branches unless already current; swap the new shard in atomically.

        The repository gets a small shard of its own (merge_shards later combines small shards). Searches
        already running keep the shard object they hold (its files stay mapped after deletion).
        """
        if not repo.default_branch:
            raise NotFound(f"repository {repo.name!r} has no commits yet", hint="wait for its first sync")
        return self._index_batch([repo], workers=workers, force=force, progress=progress, strict=True)[0]

    def index_many(self, repos: Sequence[Repo], *, workers: int = 1, force: bool = False) -> list[IndexStatus]:
        """Index several repositories into ONE new shard (bulk registration of many small repositories).

        Repositories already current (unless `force`) or without commits are left as they are; one whose
        mirror cannot be read is marked failed and left out. Listeners are called per repository after
        the swap, as for `index`. Returns each repository's status, in the given order.
        """
        return self._index_batch(list(repos), workers=workers, force=force, progress=None, strict=False)

    def _index_batch(
        self,
        repos: list[Repo],
        *,
        workers: int,
        force: bool,
        progress: Callable[[int, int], None] | None,
        strict: bool,
    ) -> list[IndexStatus]:
        unique = sorted({repo.id: repo for repo in repos}.values(), key=lambda r: r.id)
        with self._lock:
            locks = [self._repo_locks.setdefault(repo.id, threading.Lock()) for repo in unique]
        with _all_held(locks):  # in id order: two batches sharing repositories never deadlock
            todo: list[tuple[Repo, dict[str, str]]] = []
            for repo in unique:
                if not repo.default_branch:
                    continue
                try:
                    commits = branch_commits(repo.mirror_path, repo.default_branch, repo.extra_branches)
                except Exception as exc:
                    if strict:
                        raise
                    self._set_state(repo.id, "failed", str(exc))
                    log.exception("cannot read the mirror", extra={"repo": repo.name})
                    continue
                entry = self._entry(repo)
                if entry is None or entry[1].branches != commits or force:
                    todo.append((repo, commits))
            if todo:
                self._build_and_swap(todo, workers, progress)
        for repo, commits in todo:
            self._notify_indexed(repo, commits)
        return [self._status_of(repo) for repo in repos]

    def _build_and_swap(
        self, todo: list[tuple[Repo, dict[str, str]]], workers: int, progress: Callable[[int, int], None] | None
    ) -> None:
        """Build one shard of `todo`'s repositories (in name order) and make the manifest name it for them."""
        todo = sorted(todo, key=lambda t: t[0].name)
        for repo, _commits in todo:
            self._set_state(repo.id, "indexing", None)
        name = new_shard_name()
        now = datetime.now(UTC).isoformat()
        sources = [
            MirrorSource(
                repo.mirror_path,
                commits,
                {"id": repo.id, "name": repo.name, "default_branch": repo.default_branch, "indexed_at": now},
            )
            for repo, commits in todo
        ]
        try:
            build_from_mirrors(self.manifest.building_dir(name), sources, workers=workers, progress=progress)

            def swap(manifest: dict[int, str]) -> None:
                self.manifest.install(name)
                for repo, _commits in todo:
                    manifest[repo.id] = name

            self.manifest.update(swap)
        except Exception as exc:
            shutil.rmtree(self.manifest.building / name, ignore_errors=True)
            for repo, _commits in todo:
                self._set_state(repo.id, "failed", str(exc))
            raise
        for repo, _commits in todo:
            self._set_state(repo.id, "indexed", None)

    def _set_state(self, repo_id: int, state: str, error: str | None) -> None:
        with self._lock:
            self._state[repo_id] = (state, error)
            self._state_version += 1

    def merge_shards(self) -> bool:
        """Merge small shards into a compound one (one group per call); True when more merging remains.

        Documents are copied from the existing shards' mapped bytes (no git reads) into a new shard, built
        while searches and indexing go on; the manifest then moves to it, under its lock, only the
        repositories that still live where they were copied from: one re-indexed (or dropped) meanwhile
        keeps its newer shard, and its copied documents are dead. Shards left without a live repository are
        deleted. Safe in any process at any time: one merge runs at a time per data directory (another
        process's merge in progress makes this call return False at once).
        """
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / "merge.lock", "a+b") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            try:
                self.manifest.remove_abandoned_builds()
                self.manifest.empty_trash()
                view = self._view()
                groups = _merge_groups(view)
                if not groups:
                    return False
                self._merge(groups[0])
                return bool(_merge_groups(self._view()))
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _merge(self, group: list[Shard]) -> None:
        view = self._view()
        members = sorted(
            (
                (shard, repo)
                for shard in group
                for repo in shard.repos
                if repo.id is not None and view.repos.get(repo.id, (None, None))[0] is shard
            ),
            key=lambda pair: pair[1].name,
        )
        name = new_shard_name()
        meta = {
            "repos": [
                {
                    "id": repo.id,
                    "name": repo.name,
                    "default_branch": repo.default_branch,
                    "branches": repo.branches,
                    "indexed_at": repo.indexed_at,
                }
                for _shard, repo in members
            ],
            "merged": True,
        }
        target = self.manifest.building_dir(name)
        started = time.monotonic()
        try:
            build_shard(target, meta, _copied_docs(members), workers=_CPUS)

            def swap(manifest: dict[int, str]) -> None:
                self.manifest.install(name)
                for shard, repo in members:
                    assert repo.id is not None
                    if manifest.get(repo.id) == shard.path.name:
                        manifest[repo.id] = name

            self.manifest.update(swap)
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)
            raise
        log.info(
            "merged %d shards (%d repositories) into %s in %.1f s",
            len(group),
            len(members),
            name,
            time.monotonic() - started,
        )

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

    def owned_filter(self) -> Callable[[int], bool]:
        """repository id → whether this process should hold its index: every one, except on a searcher
        replica, which holds those it owns (jobs/placement.py)."""
        if not self.replica:
            return lambda _rid: True
        owners = [r.name for r in self.runtime.get(JobService).replicas(fresh=True) if not r.draining]
        me = self.replica
        return lambda rid: owner(f"repo:{rid}", owners) == me

    def rebalance(self) -> dict[str, int]:
        """A searcher replica's share after a replica joined, left or drains (the job `search.rebalance`).

        Queued jobs waiting for no live replica are placed on their owners; the repositories this replica owns
        and lacks are indexed here; those it holds and no longer owns are dropped once their owner holds them,
        so every repository stays answered while it moves. Removed repositories' shards go too.
        """
        jobs = self.runtime.get(JobService)
        moved = jobs.retarget()
        mine = self.owned_filter()
        held, _names = self.held()
        wanted: list[tuple[str, dict[str, Any]]] = []
        existing: set[int] = set()
        for repo in self.repos.readable(INTERNAL):
            existing.add(repo.id)
            if mine(repo.id) and repo.default_branch and self.needs_index(repo):
                wanted.append((f"repo:{repo.id}", {"repo_id": repo.id, "name": repo.name}))
        if wanted:
            jobs.enqueue_many("search.index", wanted, cause="rebalance", target=self.replica)
        gone = [rid for rid in held if rid not in existing]
        leaving = [rid for rid in held if rid in existing and not mine(rid)]
        # Dropped only once its owner has held it for a while: a query that reached the owner just before it held
        # the repository, and reaches this replica just after it dropped it, would find it nowhere.
        now = time.monotonic()
        confirmed = set(self._held_by_owners(leaving))
        self._handed = {rid: self._handed.get(rid, now) for rid in confirmed}
        handed = [rid for rid, since in self._handed.items() if now - since >= HANDOVER_GRACE_SECONDS]
        for rid in gone + handed:
            self._forget(rid)
            self._handed.pop(rid, None)
        return {"retargeted": moved, "to_index": len(wanted), "dropped": len(gone) + len(handed)}

    def _held_by_owners(self, ids: list[int]) -> list[int]:
        """Of `ids`, those their owner replica already holds (asked over the internal API)."""
        if not ids:
            return []
        replicas = [r for r in self.runtime.get(JobService).replicas() if not r.draining]
        by_owner: dict[str, list[int]] = {}
        for rid in ids:
            found = owner(f"repo:{rid}", [r.name for r in replicas])
            if found is not None:
                by_owner.setdefault(found, []).append(rid)
        done: list[int] = []
        deadline = time.monotonic() + 10.0
        for replica in replicas:
            asked = by_owner.get(replica.name)
            if not asked:
                continue
            (reply,) = self.fanout().post_all([replica], "/holdings", {"ids": encode_ids(asked)}, deadline)
            if reply.payload is not None:
                holds = set(decode_ids(str(reply.payload.get("held", ""))).tolist())
                done.extend(rid for rid in asked if rid in holds)
        return done

    def _forget(self, repo_id: int) -> None:
        with self._lock:
            self._state.pop(repo_id, None)
            self._state_version += 1

        def forget(manifest: dict[int, str]) -> None:
            manifest.pop(repo_id, None)

        self.manifest.update(forget)

    def drop(self, repo: Repo) -> None:
        """Forget `repo`'s index (after the repository was removed): its documents are dead at once."""
        with self._lock:
            self._state.pop(repo.id, None)
            self._state_version += 1

        def forget(manifest: dict[int, str]) -> None:
            manifest.pop(repo.id, None)

        self.manifest.update(forget)

    def index_repo(self, actor: Actor, name: str, *, workers: int = 1, force: bool = False) -> IndexStatus:
        """Index one repository now (site admins and the service itself only)."""
        ensure(actor, Action.SEARCH_INDEX)
        return self.index(self.repos.get(actor, name), workers=workers, force=force)

    def status(self, actor: Actor, name: str | None = None) -> list[IndexStatus]:
        """Index status of the readable repositories (or of one); in a cluster, as the replicas holding them say
        (a repository no replica answers for is "not indexed")."""
        repos = [self.repos.get(actor, name)] if name else self.repos.readable(actor)
        if self.fans_out:
            known = self._replica_status(actor, name)
            return [
                known.get(repo.name) or IndexStatus(repo.name, "not indexed", {})
                for repo in sorted(repos, key=lambda r: r.name)
            ]
        statuses = [self._status_of(repo) for repo in sorted(repos, key=lambda r: r.name)]
        if self.replica:
            # A replica speaks for what it holds or works on; the web tier fills in the rest.
            return [s for s in statuses if s.state != "not indexed"]
        return statuses

    def _replica_status(self, actor: Actor, name: str | None) -> dict[str, IndexStatus]:
        replicas = self.runtime.get(JobService).replicas()
        body = {"actor": encode_actor(actor), "name": name}
        found: dict[str, IndexStatus] = {}
        rank = {"indexed": 3, "indexing": 2, "failed": 1}
        for reply in self.fanout().post_all(replicas, "/status", body, time.monotonic() + 10.0):
            for row in (reply.payload or {}).get("statuses", []):
                status = decode_status(row)
                current = found.get(status.repo)
                if current is None or rank.get(status.state, 0) > rank.get(current.state, 0):
                    found[status.repo] = status
        return found

    def _status_of(self, repo: Repo) -> IndexStatus:
        state, error = self._state.get(repo.id, ("", None))
        entry = self._entry(repo)
        if entry is None:
            return IndexStatus(repo.name, state or "not indexed", {}, error=error)
        shard, found = entry
        content = int(shard.starts[found.hi]) - int(shard.starts[found.lo])
        total = int(shard.starts[-1])
        # A compound shard's index files are shared: each repository is charged its share of the content.
        index_bytes = _index_bytes(shard) * content // total if total else 0
        return IndexStatus(
            repo.name,
            state if state in ("indexing", "failed") else "indexed",
            dict(found.branches),
            documents=found.hi - found.lo,
            content_bytes=content,
            index_bytes=index_bytes,
            indexed_at=datetime.fromisoformat(found.indexed_at) if found.indexed_at else None,
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
        """Index every ready repository whose shard is missing or stale; return how many were indexed.

        Up to INDEX_BATCH_REPOS repositories share one new shard; when such a batch fails, its repositories
        are indexed one by one so that one bad repository does not keep the others unsearchable.
        """
        stale: list[Repo] = []
        mine = self.owned_filter()
        for repo in self.repos.readable(INTERNAL):
            if not mine(repo.id):
                continue  # another searcher replica's
            try:
                if self.needs_index(repo):
                    stale.append(repo)
            except Exception:
                log.exception("indexing failed", extra={"repo": repo.name})
        done = 0
        for lo in range(0, len(stale), INDEX_BATCH_REPOS):
            batch = stale[lo : lo + INDEX_BATCH_REPOS]
            try:
                statuses = self.index_many(batch)
                done += sum(1 for s in statuses if s.state == "indexed")
                continue
            except Exception:
                log.exception("indexing a batch of %d repositories failed", len(batch))
            for repo in batch:
                try:
                    self.index(repo)
                    done += 1
                except Exception:
                    log.exception("indexing failed", extra={"repo": repo.name})
        return done


@contextmanager
def _all_held(locks: list[threading.Lock]) -> Iterator[None]:
    with ExitStack() as stack:
        for lock in locks:
            stack.enter_context(lock)
        yield


def _copied_docs(members: list[tuple[Shard, ShardRepo]]) -> Iterator[SourceDoc]:
    """The documents of `members` (repositories in existing shards), read from their mapped bytes."""
    for slot, (shard, repo) in enumerate(members):
        branches_of: dict[int, frozenset[str]] = {}
        names = list(repo.branches)
        if len(names) == 1:
            only = frozenset(names)
            branches_of = dict.fromkeys(repo.branch_docs(names[0]), only)
        else:
            sets: dict[int, set[str]] = {}
            for branch in names:
                for doc in repo.branch_docs(branch):
                    sets.setdefault(doc, set()).add(branch)
            branches_of = {doc: frozenset(found) for doc, found in sets.items()}
        for doc in range(repo.lo, repo.hi):
            skipped = shard.skipped[doc]
            data = None if skipped else bytes(shard.doc_bytes(doc))
            yield SourceDoc(shard.paths[doc], data, shard.sizes[doc], branches_of.get(doc, frozenset()), skipped, slot)


def _merge_groups(view: _View) -> list[list[Shard]]:
    """Groups of shards worth merging, each about COMPOUND_TARGET_BYTES of live content.

    A shard is a candidate when its live content is small or most of its documents are dead; a group of
    one shard is only worth rewriting when it drops dead documents.
    """
    candidates: list[tuple[str, Shard, int, bool]] = []
    for k, shard in enumerate(view.shards):
        live_slots = np.flatnonzero(view.live[view.offsets[k] : view.offsets[k + 1]]).tolist()
        live_docs = sum(shard.repos[s].hi - shard.repos[s].lo for s in live_slots)
        starts = shard.starts
        live_bytes = sum(int(starts[shard.repos[s].hi]) - int(starts[shard.repos[s].lo]) for s in live_slots)
        dead = shard.doc_count - live_docs
        if not live_slots:
            continue
        if live_bytes < MERGE_SMALL_BYTES or (shard.doc_count and dead >= MERGE_DEAD_FRACTION * shard.doc_count):
            first = min(shard.repos[s].name for s in live_slots)
            candidates.append((first, shard, live_bytes, dead > 0))
    candidates.sort(key=lambda c: c[0])
    groups: list[list[Shard]] = []
    group: list[Shard] = []
    size = 0
    has_dead = False
    for _first, shard, live_bytes, dead in candidates:
        group.append(shard)
        size += live_bytes
        has_dead |= dead
        if size >= COMPOUND_TARGET_BYTES:
            groups.append(group)
            group, size, has_dead = [], 0, False
    if group and (len(group) > 1 or has_dead):
        groups.append(group)
    return [g for g in groups if len(g) > 1 or _has_dead(view, g[0])]


def _has_dead(view: _View, shard: Shard) -> bool:
    k = view.shards.index(shard)
    return not bool(view.live[view.offsets[k] : view.offsets[k + 1]].all())


_index_sizes: dict[str, int] = {}


def _index_bytes(shard: Shard) -> int:
    """Bytes of a shard's index files (everything but the content), read once per shard."""
    key = str(shard.path)
    found = _index_sizes.get(key)
    if found is None:
        try:
            found = sum(f.stat().st_size for f in shard.path.iterdir() if f.name != "content.bin")
        except FileNotFoundError:
            found = 0
        if len(_index_sizes) > 4096:
            _index_sizes.clear()
        _index_sizes[key] = found
    return found


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
