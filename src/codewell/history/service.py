"""HistoryService: commit_search, diff_search, compare_revisions and get_contributor_repos.

Metadata filters (repos, message, authors, files, dates, branches) are SQL on the commit index, newest
first with a LIMIT, so they stay database queries across thousands of repositories. Content filters
(`contentTerms`, diff_search) stream the same candidate query in batches, diff each candidate in-process
(pygit2) and stop at `count` or at the time budget. Visibility: every query is restricted to repositories
`RepoService.readable(actor)` returns; others read exactly like missing ones.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fnmatch
import itertools
import json
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import pygit2
import re2
from sqlalchemy import ColumnElement, Select, and_, exists, func, or_, select
from sqlalchemy.orm import aliased

from codewell.core.actors import INTERNAL, Actor
from codewell.core.errors import InvalidInput, NotFound
from codewell.history import diffs, gitlog, prefilter
from codewell.history.dates import parse_range
from codewell.history.indexer import MAX_WORD, MIN_WORD, OVERFLOW_WORD, CommitIndexer, IndexStats
from codewell.history.models import (
    HistoryAuthor,
    HistoryAuthorRepo,
    HistoryCommit,
    HistoryCommitRef,
    HistoryRef,
    HistoryWord,
    HistoryWordCommit,
)
from codewell.repos.service import Repo, RepoService

if TYPE_CHECKING:
    from codewell.runtime import Runtime

COMMIT_COUNT_DEFAULT, COMMIT_COUNT_MAX = 50, 100
DIFF_COUNT_DEFAULT, DIFF_COUNT_MAX = 20, 50
COMPARE_FIRST_DEFAULT, COMPARE_FIRST_MAX = 50, 100
CONTRIB_LIMIT_DEFAULT, CONTRIB_LIMIT_MAX, CONTRIB_AUTHORS_MAX = 20, 100, 5
# Time budget of queries that read diffs; results found so far are returned with timed_out=True.
SCAN_TIMEOUT = 10.0
SCAN_BATCH = 200
# diff_search asks `git log -G` for candidates (history.prefilter) once the in-process scan ran this long
# without reaching `count`: frequent patterns finish before, rare ones stop diffing every commit.
PREFILTER_AFTER = 0.15
# Up to this many candidate SHAs from git also restrict the SQL candidates (one IN list), so the rest of
# the scan reads only those rows; more are filtered row by row.
MAX_SQL_CANDIDATES = 5000
# A revision filter on tags or commits walks history with git; cap the walk per repository.
MAX_REACHABLE = 2_000_000
MAX_HUNKS_PER_MATCH = 10
MAX_LINES_PER_FILE = 1000
_SHA = re.compile(r"^[0-9a-fA-F]{4,40}$")
WORD_TOKEN = re.compile(r"[a-z0-9_]+")
# A message token with fewer postings than this is looked up in the word index instead of scanned for.
RARE_POSTINGS = 5000
# Authors with more indexed commits than this are found by the newest-first scan, not the author index.
COMMON_AUTHOR_COMMITS = 20000
# Filters no index narrows (short message terms, `files`) are checked window by window, newest first: each
# SQL statement reads at most this many commits of the scope, so the time budget is checked between them.
FIRST_WINDOW, MAX_WINDOW = 2_000, 50_000


# ---- results -------------------------------------------------------------------------------------------


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


@dataclass(frozen=True, slots=True)
class ContributorRepo:
    repo: str
    commit_count: int
    last_commit_at: datetime


# ---- query plan ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RepoRef:
    """The few facts about a readable repository a history query needs."""

    id: int
    name: str
    default_branch: str | None
    mirror_path: Path


@dataclass(slots=True)
class _Scope:
    """The repositories a query covers: the rows' filter and the repositories by id."""

    repos: dict[int, RepoRef]
    unknown: list[str]
    everything: bool  # no repo_id filter needed (the actor reads all and asked for all)


@dataclass(slots=True)
class _Plan:
    scope: _Scope
    conditions: list[ColumnElement[bool]]
    # Python-side filter per repo for revisions git must answer (tags, commits): allowed SHAs.
    reachable: dict[int, set[str]] | None = None
    content_terms: list[str] = field(default_factory=list)
    # Conditions no index narrows (their SQL alone could read the whole table): scanned in windows.
    unindexed: list[ColumnElement[bool]] = field(default_factory=list)
    # Conditions added while a scan runs (diff_search's git prefilter); read before every SQL batch.
    extra: list[ColumnElement[bool]] = field(default_factory=list)
    # committed_at bounds of `after` / `before` (for the git prefilter of diff_search).
    since: datetime | None = None
    until: datetime | None = None


def _int_param(value: int | None, name: str, default: int, low: int, high: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(
            f"`{name}` must be an integer from {low} to {high}, got {value!r}",
            hint=f"omit `{name}` for the default ({default})",
        )
    return value


def _terms(values: Sequence[str] | None, name: str) -> list[str]:
    if values is None:
        return []
    if isinstance(values, str) or not all(isinstance(v, str) for v in values):
        raise InvalidInput(f"`{name}` must be an array of strings", hint=f'e.g. "{name}": ["fix"]')
    return [v.strip() for v in values if v.strip()]


def _like_any(column: Any, terms: Sequence[str]) -> ColumnElement[bool]:
    # Lower-cased terms against lower-cased columns: the same case-insensitive semantics on both engines.
    return or_(*(column.contains(term.lower(), autoescape=True) for term in terms))


class HistoryService:
    """History queries for an actor, plus `index_repo` used by the sync listener."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.db = runtime.db
        self.indexer = CommitIndexer(runtime.db)
        self.mirrors = diffs.MirrorCache()
        self.listening = False  # set by history.setup once the sync listener is registered

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    @property
    def repos(self) -> RepoService:
        return self.runtime.get(RepoService)

    # ---- indexing ---------------------------------------------------------------------------------------

    def index_repo(self, repo: Repo) -> IndexStats:
        """Record the commits of `repo`'s refs that are not indexed yet (called after every sync)."""
        return self.indexer.index_repo(repo.id, repo.mirror_path)

    def reindex_all(self) -> list[IndexStats]:
        """Index every ready repository (catch-up after installing history on an existing instance)."""
        return [self.index_repo(r) for r in self.repos.readable(INTERNAL) if r.sync_state == "ready"]

    # ---- scope ------------------------------------------------------------------------------------------

    def _scope(self, actor: Actor, names: Sequence[str] | None, *, required: bool = True) -> _Scope:
        """Resolve `repos` entries (names or /regex/) among the repositories the actor may read."""
        entries = _terms(names, "repos")
        readable = self._readable(actor)
        if not entries:
            if required:
                raise InvalidInput(
                    "`repos` must name at least one repository",
                    hint='pass repository names, or a pattern like "/^github.com/org//"',
                )
            return _Scope(readable, [], actor.site_admin or actor.is_internal)
        by_name = {repo.name: repo for repo in readable.values()}
        by_lower = {name.lower(): repo for name, repo in by_name.items()}
        chosen: dict[int, RepoRef] = {}
        unknown: list[str] = []
        for entry in entries:
            if len(entry) > 2 and entry.startswith("/") and entry.endswith("/"):
                pattern = self._compile(entry[1:-1], "repos")
                hits = [repo for name, repo in by_name.items() if pattern.search(name)]
            else:
                repo = by_name.get(entry) or by_lower.get(entry.lower())
                hits = [repo] if repo else []
            if not hits:
                unknown.append(entry)
            chosen.update((repo.id, repo) for repo in hits)
        if not chosen:
            raise NotFound(
                f"no repository found for: {', '.join(unknown)}",
                hint="check the names with list_repos; patterns are written /regex/",
            )
        everything = (actor.site_admin or actor.is_internal) and len(chosen) == len(readable)
        return _Scope(chosen, unknown, everything)

    def _readable(self, actor: Actor) -> dict[int, RepoRef]:
        """The repositories `actor` may read, by id, through RepoService's one visibility rule.

        A three-column query on purpose: RepoService.readable() builds full Repo objects (about 200 ms for
        1,000 repositories), which would dominate every history query.
        """
        from codewell.repos.models import RepoRow

        query = select(RepoRow.id, RepoRow.name, RepoRow.default_branch).where(RepoService.visibility_clause(actor))
        with self.db.session() as session:
            rows = session.execute(query).all()
        root = self.repos.mirror_root
        return {rid: RepoRef(rid, name, branch, root / f"{name}.git") for rid, name, branch in rows}

    @staticmethod
    def _compile(pattern: str, param: str) -> Any:
        try:
            return re2.compile(pattern)
        except Exception as exc:  # re2.error has no stable public name across versions
            raise InvalidInput(
                f"invalid regular expression in `{param}`: {pattern!r} ({exc})",
                hint="RE2 syntax; escape special characters like ( [ . with a backslash",
            ) from None

    # ---- revisions --------------------------------------------------------------------------------------

    def _revision_filter(
        self, scope: _Scope, revisions: list[str]
    ) -> tuple[ColumnElement[bool] | None, dict[int, set[str]] | None]:
        """SQL condition for branch revisions, or per-repo reachable SHA sets when tags/commits are named."""
        head_ids, tips, needs_git = self._match_revisions(scope, revisions)
        if not needs_git:
            ref_match = exists().where(
                HistoryCommitRef.commit_id == HistoryCommit.id, HistoryCommitRef.ref_id.in_(head_ids)
            )
            return ref_match, None
        reachable: dict[int, set[str]] = {}
        for repo_id, shas in tips.items():
            walk = gitlog.rev_list(scope.repos[repo_id].mirror_path, shas)
            with contextlib.closing(walk):
                reachable[repo_id] = set(itertools.islice(walk, MAX_REACHABLE))
        # Repositories where no revision matched contribute nothing.
        scope.repos = {rid: repo for rid, repo in scope.repos.items() if rid in reachable}
        scope.everything = False
        return None, reachable

    def _match_revisions(self, scope: _Scope, revisions: list[str]) -> tuple[list[int], dict[int, set[str]], bool]:
        """Branch ref ids, per-repo tip SHAs, and whether any tag/commit (answered by git) was named."""
        with self.db.session() as session:
            query = select(HistoryRef.id, HistoryRef.repo_id, HistoryRef.name, HistoryRef.target)
            if not scope.everything:
                query = query.where(HistoryRef.repo_id.in_(list(scope.repos)))
            refs = session.execute(query).all()
        matched: set[str] = set()
        head_ids: list[int] = []
        tips: dict[int, set[str]] = {}
        needs_git = False
        for ref_id, repo_id, name, target in refs:
            repo = scope.repos.get(repo_id)
            hits = [r for r in revisions if repo and _ref_matches(r, name, repo.default_branch)]
            if not hits:
                continue
            matched.update(hits)
            tips.setdefault(repo_id, set()).add(target)
            if name.startswith("refs/heads/"):
                head_ids.append(ref_id)
            else:
                needs_git = True
        for revision in [r for r in revisions if r not in matched and _SHA.match(r)]:
            for repo in scope.repos.values():
                if sha := self._peel(repo, revision):
                    matched.add(revision)
                    tips.setdefault(repo.id, set()).add(sha)
                    needs_git = True
        if missing := [r for r in revisions if r not in matched]:
            raise InvalidInput(
                f"revision not found in the selected repositories: {', '.join(missing)}",
                hint="use branch or tag names, ref globs like refs/heads/release-*, or commit SHAs "
                "(list_refs shows them)",
            )
        return head_ids, tips, needs_git

    def _peel(self, repo: RepoRef, revision: str) -> str | None:
        try:
            obj = self.mirrors.open(repo.mirror_path).revparse_single(revision)
            return str(obj.peel(pygit2.Commit).id)
        except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
            return None

    # ---- commit_search ----------------------------------------------------------------------------------

    def _author_condition(self, names: list[str]) -> ColumnElement[bool]:
        """Commits by any author matching `names`; the access path depends on how many commits they have.

        Few commits: the (author, repo, date) index finds them all. Many: scanning newest first and
        checking the author finds `count` of them sooner, so the author column is wrapped (`+ 0`) to keep
        the planner (SQLite and PostgreSQL alike) off the author index.
        """
        authors = _author_ids_query(names)
        with self.db.session() as session:
            total = session.scalar(
                select(func.coalesce(func.sum(HistoryAuthorRepo.commit_count), 0)).where(
                    HistoryAuthorRepo.author_id.in_(authors)
                )
            )
        if (total or 0) > COMMON_AUTHOR_COMMITS:
            return (HistoryCommit.author_id + 0).in_(authors)
        return HistoryCommit.author_id.in_(authors)

    def _message_condition(self, term: str) -> tuple[ColumnElement[bool], bool]:
        """`term` is a substring of the message; for rare terms narrowed first through the word index.

        Returns the condition and whether one statement may answer it (False: scan in windows). Every token
        (letters, digits, _) of a term that occurs in a message is a substring of one of that message's indexed
        words, so the postings of the words containing the term's rarest token are a superset of the matches;
        the LIKE re-check makes the result exact. Exceptions the index records on purpose (see
        indexer.message_words): a run longer than 64 characters is indexed as 64-character pieces, so commits
        with such a run (they all have a 64-character word) are always candidates too, and a token longer than
        64 can only occur in them; messages with more words than the indexer keeps carry the OVERFLOW_WORD
        marker. Common tokens skip the index (the newest-first statement then stops after a few rows); terms
        whose tokens are all shorter than 3 characters (not indexed) are reported as unindexed and scanned in
        windows.
        """
        lowered = term.lower()
        like = HistoryCommit.search_text.contains(lowered, autoescape=True)
        tokens = {t for t in WORD_TOKEN.findall(lowered) if len(t) >= MIN_WORD}
        best: tuple[int, Select[Any]] | None = None
        with self.db.session() as session:
            for token in tokens:
                # Words containing the token, plus the markers of what the index may have cut.
                alternatives = [func.length(HistoryWord.word) == MAX_WORD, HistoryWord.word == OVERFLOW_WORD]
                if len(token) <= MAX_WORD:
                    alternatives.append(HistoryWord.word.contains(token, autoescape=True))
                # Ids first, as a list: PostgreSQL planned the nested IN (subquery) as a scan of all postings.
                words = list(session.scalars(select(HistoryWord.id).where(or_(*alternatives))))
                postings = select(HistoryWordCommit.commit_id).where(HistoryWordCommit.word_id.in_(words))
                sample = select(HistoryWordCommit.word_id).where(HistoryWordCommit.word_id.in_(words))
                estimate = session.scalar(select(func.count()).select_from(sample.limit(RARE_POSTINGS).subquery()))
                if best is None or (estimate or 0) < best[0]:
                    best = (estimate or 0, postings)
        if best is None:
            return like, False  # no token the index holds: only a scan can answer
        if best[0] >= RARE_POSTINGS:
            return like, True  # common: the newest-first statement stops after a few rows
        # Fewer than RARE_POSTINGS ids: read them first and pass them as a list, so both planners fetch
        # those rows by primary key (PostgreSQL planned the subquery form as a scan of the repository).
        with self.db.session() as session:
            ids = sorted(set(session.scalars(best[1])))
        return and_(HistoryCommit.id.in_(ids), like), True

    def _plan(
        self,
        actor: Actor,
        repos: Sequence[str] | None,
        *,
        message_terms: Sequence[str] | None = None,
        authors: Sequence[str] | None = None,
        files: Sequence[str] | None = None,
        after: str | None = None,
        before: str | None = None,
        revisions: Sequence[str] | None = None,
    ) -> _Plan:
        start, end = parse_range(after, before)
        scope = self._scope(actor, repos)
        conditions: list[ColumnElement[bool]] = []
        unindexed: list[ColumnElement[bool]] = []
        if terms := _terms(message_terms, "messageTerms"):
            parts = [self._message_condition(term) for term in terms]
            condition = or_(*(c for c, _ in parts))
            conditions.append(condition)
            if not all(indexed for _, indexed in parts):
                unindexed.append(condition)
        if names := _terms(authors, "authors"):
            conditions.append(self._author_condition(names))
        if paths := _terms(files, "files"):
            conditions.append(or_(*(HistoryCommit.paths.contains(p, autoescape=True) for p in paths)))
        if start is not None:
            conditions.append(HistoryCommit.committed_at >= start)
        if end is not None:
            conditions.append(HistoryCommit.committed_at < end)
        reachable = None
        if revs := _terms(revisions, "revisions"):
            ref_condition, reachable = self._revision_filter(scope, revs)
            if ref_condition is not None:
                conditions.append(ref_condition)
        if not scope.everything:
            conditions.append(HistoryCommit.repo_id.in_(list(scope.repos)))
        return _Plan(scope, conditions, reachable, unindexed=unindexed, since=start, until=end)

    def commit_search(
        self,
        actor: Actor,
        repos: Sequence[str],
        *,
        message_terms: Sequence[str] | None = None,
        authors: Sequence[str] | None = None,
        content_terms: Sequence[str] | None = None,
        files: Sequence[str] | None = None,
        after: str | None = None,
        before: str | None = None,
        revisions: Sequence[str] | None = None,
        count: int | None = None,
        timeout: float = SCAN_TIMEOUT,
    ) -> CommitSearchResult:
        """Commits matching every given kind of filter (values of one kind ORed), newest first (committer date).

        `count` (default 50, max 100) caps the result; `limit_hit` says more matched. With `content_terms`
        candidates are diffed one by one until `count` matched or `timeout` seconds passed (`timed_out`);
        message terms without a token of 3+ characters (no index holds them) are scanned newest first in
        bounded windows under the same budget and `timed_out` contract.
        """
        count = _int_param(count, "count", COMMIT_COUNT_DEFAULT, 1, COMMIT_COUNT_MAX)
        plan = self._plan(
            actor,
            repos,
            message_terms=message_terms,
            authors=authors,
            files=files,
            after=after,
            before=before,
            revisions=revisions,
        )
        content = [t.lower() for t in _terms(content_terms, "contentTerms")]
        if not content and plan.reachable is None and not plan.unindexed:
            with self.db.session() as session:
                rows = session.execute(_commit_select(plan.conditions).limit(count + 1)).all()
            commits = self._commit_infos(plan.scope, rows[:count])
            return CommitSearchResult(commits, len(rows) > count, False, plan.scope.unknown)

        def matches(repo: RepoRef, row: Any) -> bool:
            diff = diffs.commit_diff(self.mirrors.open(repo.mirror_path), row.sha, context_lines=0)
            if diff is None:
                return False
            return any(term in text.lower() for _, text in diffs.changed_lines(diff) for term in content)

        found, limit_hit, timed_out = self._scan(plan, count, matches if content else None, timeout)
        return CommitSearchResult(self._commit_infos(plan.scope, found), limit_hit, timed_out, plan.scope.unknown)

    def _scan(
        self, plan: _Plan, count: int, predicate: Callable[[RepoRef, Any], Any] | None, timeout: float
    ) -> tuple[list[Any], bool, bool]:
        """Walk candidates newest first, keep those passing the filters; stop at count+1 or at the deadline.

        Returns (rows, limit_hit, timed_out). The deadline is checked per row and between SQL statements,
        so a scan that finds nothing for a long stretch stops on time as well.
        """
        deadline = time.monotonic() + timeout
        found: list[Any] = []
        for row in self._candidates(plan):
            if time.monotonic() > deadline:
                return found, False, True
            if row is None:  # a statement finished; only the deadline check above was due
                continue
            if plan.reachable is not None and row.sha not in plan.reachable.get(row.repo_id, ()):
                continue
            repo = plan.scope.repos.get(row.repo_id)
            if repo is None:
                continue
            if predicate is not None and not predicate(repo, row):
                continue
            if len(found) == count:
                return found, True, False
            found.append(row)
        return found, False, False

    def _candidates(self, plan: _Plan) -> Iterator[Any]:
        """Rows matching the plan's conditions newest first, then None after each SQL statement.

        Rows come in keyset-paginated batches. With unindexed conditions the walk is cut into windows of
        the scope (FIRST_WINDOW rows, growing to MAX_WINDOW): the window's lower key comes from the indexed
        conditions alone, so no statement reads more than a window of commits, however rare the match.
        """
        indexed = [c for c in plan.conditions if not any(c is u for u in plan.unindexed)]
        upper: tuple[datetime, int] | None = None
        window = FIRST_WINDOW
        while True:
            lower = self._window_floor(indexed, upper, window) if plan.unindexed else None
            window = min(window * 4, MAX_WINDOW)
            while True:
                page = [*plan.conditions, *plan.extra, *_keyset(upper, lower)]
                with self.db.session() as session:
                    rows = session.execute(_commit_select(page).limit(SCAN_BATCH)).all()
                yield from rows
                yield None
                if rows:
                    upper = (rows[-1].committed_at, rows[-1].id)
                if len(rows) < SCAN_BATCH:
                    break
            if lower is None:
                return
            upper = lower  # the floor row itself was inside the window (inclusive)

    def _window_floor(
        self, conditions: list[ColumnElement[bool]], upper: tuple[datetime, int] | None, size: int
    ) -> tuple[datetime, int] | None:
        """The key of the `size`-th commit below `upper` matching `conditions` (None: fewer remain)."""
        query = (
            select(HistoryCommit.committed_at, HistoryCommit.id)
            .where(*conditions, *_keyset(upper, None))
            .order_by(HistoryCommit.committed_at.desc(), HistoryCommit.id.desc())
            .offset(size - 1)
            .limit(1)
        )
        with self.db.session() as session:
            row = session.execute(query).first()
        return (row[0], row[1]) if row is not None else None

    def _commit_infos(self, scope: _Scope, rows: Sequence[Any]) -> list[CommitInfo]:
        refs: dict[int, list[str]] = {}
        if rows:
            with self.db.session() as session:
                for commit_id, name in session.execute(
                    select(HistoryCommitRef.commit_id, HistoryRef.name)
                    .join(HistoryRef, HistoryRef.id == HistoryCommitRef.ref_id)
                    .where(HistoryCommitRef.commit_id.in_([row.id for row in rows]))
                ):
                    refs.setdefault(commit_id, []).append(name)
        return [
            CommitInfo(
                repo=scope.repos[row.repo_id].name,
                sha=row.sha,
                parents=tuple(row.parents.split()),
                author_name=row.author_name,
                author_email=row.author_email,
                authored_at=row.authored_at,
                committed_at=row.committed_at,
                subject=row.subject,
                message=row.message,
                paths=tuple(row.paths.split("\n")) if row.paths else (),
                refs=tuple(sorted(refs.get(row.id, []))),
            )
            for row in rows
            if row.repo_id in scope.repos  # a repository registered after the scope was computed
        ]

    # ---- diff_search ------------------------------------------------------------------------------------

    def diff_search(
        self,
        actor: Actor,
        pattern: str,
        repos: Sequence[str],
        *,
        added: bool | None = None,
        removed: bool | None = None,
        authors: Sequence[str] | None = None,
        after: str | None = None,
        before: str | None = None,
        revisions: Sequence[str] | None = None,
        count: int | None = None,
        timeout: float = SCAN_TIMEOUT,
    ) -> DiffSearchResult:
        """Commits whose added and/or removed lines match `pattern` (RE2, case-sensitive), newest first.

        `added`/`removed`: only added / only removed lines (both or neither: either kind). Each match carries
        the hunks containing a matching line (context lines included) with the match offsets marked.
        Candidates stream newest first and the scan stops at `count` or after `timeout` seconds
        (`timed_out`); when matches are rare, `git log -G` narrows the candidates (see history.prefilter).
        """
        if not isinstance(pattern, str) or not pattern:
            raise InvalidInput("`pattern` must be a non-empty string", hint='e.g. "pattern": "func Open\\\\("')
        regex = self._compile(pattern, "pattern")
        count = _int_param(count, "count", DIFF_COUNT_DEFAULT, 1, DIFF_COUNT_MAX)
        origins = ("+" if added else "") + ("-" if removed else "") or "+-"
        plan = self._plan(actor, repos, authors=authors, after=after, before=before, revisions=revisions)
        hunks_of: dict[str, list[tuple[str, diffs.DiffHunk]]] = {}
        narrow = _Narrowing(plan, prefilter.required_literal(pattern), timeout)

        def matches(repo: RepoRef, row: Any) -> bool:
            if not narrow.may_match(repo, row.sha):
                return False
            mirror = self.mirrors.open(repo.mirror_path)
            quick = diffs.commit_diff(mirror, row.sha, context_lines=0)
            # Cheap test on the patch text first; hunks with context are built only for the few that match.
            if quick is None or not any(o in origins and regex.search(text) for o, text in diffs.changed_lines(quick)):
                return False
            diff = diffs.commit_diff(mirror, row.sha, context_lines=3)
            hunks = _matching_hunks(diff, regex, origins)
            if hunks:
                hunks_of[f"{row.repo_id}:{row.sha}"] = hunks
            return bool(hunks)

        rows, limit_hit, timed_out = self._scan(plan, count, matches, timeout)
        infos = self._commit_infos(plan.scope, rows)
        found = [DiffMatch(info, hunks_of[f"{row.repo_id}:{row.sha}"]) for info, row in zip(infos, rows, strict=True)]
        return DiffSearchResult(found, limit_hit, timed_out, plan.scope.unknown)

    # ---- compare_revisions ------------------------------------------------------------------------------

    def compare(
        self, actor: Actor, repo: str, base: str, head: str, *, first: int | None = None, after: str | None = None
    ) -> Comparison:
        """The diff from `base` to `head` (their trees), files ordered by path, `first` per page after `after`."""
        first = _int_param(first, "first", COMPARE_FIRST_DEFAULT, 1, COMPARE_FIRST_MAX)
        offset = _decode_cursor(after) if after else 0
        for value, name in ((base, "base"), (head, "head")):
            if not isinstance(value, str) or not value.strip():
                raise InvalidInput(f"`{name}` must be a revision (branch, tag or commit)", hint="e.g. main")
        base_rev = self.repos.resolve(actor, repo, base.strip())
        head_rev = self.repos.resolve(actor, repo, head.strip())
        git_repo = self.mirrors.open(base_rev.repo.mirror_path)
        diff = git_repo.diff(base_rev.commit, head_rev.commit, context_lines=3)
        diff.find_similar()
        stats = diff.stats
        patches = sorted(((patch.delta.new_file.path, i) for i, patch in enumerate(diff) if patch is not None))
        page_indices = [i for _, i in patches[offset : offset + first]]
        files: list[diffs.FileDiff] = []
        for index in page_indices:
            files.extend(diffs.file_diffs([diff[index]], max_lines_per_file=MAX_LINES_PER_FILE))
        has_next = offset + first < len(patches)
        return Comparison(
            repo=base_rev.repo.name,
            base=base,
            head=head,
            base_commit=base_rev.commit,
            head_commit=head_rev.commit,
            files=files,
            total_files=stats.files_changed,
            total_added=stats.insertions,
            total_deleted=stats.deletions,
            has_next_page=has_next,
            end_cursor=_encode_cursor(offset + len(files)) if has_next else None,
        )

    # ---- get_contributor_repos --------------------------------------------------------------------------

    def contributor_repos(
        self, actor: Actor, authors: Sequence[str], *, limit: int | None = None, min_commits: int | None = None
    ) -> list[ContributorRepo]:
        """Readable repositories the authors (name or e-mail substrings) committed to: count desc, then recency."""
        names = _terms(authors, "authors")
        if not names:
            raise InvalidInput("`authors` must name at least one author", hint="an author name or e-mail address")
        if len(names) > CONTRIB_AUTHORS_MAX:
            raise InvalidInput(
                f"at most {CONTRIB_AUTHORS_MAX} authors per call, got {len(names)}",
                hint="split the authors over several calls",
            )
        limit = _int_param(limit, "limit", CONTRIB_LIMIT_DEFAULT, 1, CONTRIB_LIMIT_MAX)
        min_commits = _int_param(min_commits, "minCommits", 1, 1, 1_000_000_000)
        scope = self._scope(actor, None, required=False)
        stats = HistoryAuthorRepo
        commits = func.sum(stats.commit_count)
        latest = func.max(stats.last_commit_at)
        query = (
            select(stats.repo_id, commits, latest)
            .where(stats.author_id.in_(_author_ids_query(names)))
            .group_by(stats.repo_id)
            .having(commits >= min_commits)
            .order_by(commits.desc(), latest.desc(), stats.repo_id)
        )
        if not scope.everything:
            query = query.where(stats.repo_id.in_(list(scope.repos)))
        with self.db.session() as session:
            rows = session.execute(query.limit(limit)).all()
        return [
            ContributorRepo(scope.repos[repo_id].name, int(n), _aware(last))
            for repo_id, n, last in rows
            if repo_id in scope.repos
        ]


# ---- helpers ---------------------------------------------------------------------------------------------


class _Narrowing:
    """diff_search's switch to git-prefiltered candidates once the scan has run PREFILTER_AFTER seconds."""

    def __init__(self, plan: _Plan, literal: str | None, timeout: float) -> None:
        self.plan, self.literal, self.timeout = plan, literal, timeout
        self.started = time.monotonic()
        self.candidates: dict[int, set[str] | None] | None = None

    def may_match(self, repo: RepoRef, sha: str) -> bool:
        """False only for commits git says cannot match (no literal, or git failed: always True)."""
        if self.literal is None:
            return True
        if self.candidates is None:
            elapsed = time.monotonic() - self.started
            if elapsed < PREFILTER_AFTER:
                return True
            mirrors = {rid: ref.mirror_path for rid, ref in self.plan.scope.repos.items()}
            remaining = max(1.0, self.timeout - elapsed)
            self.candidates = prefilter.candidate_shas(
                mirrors, self.literal, self.plan.since, self.plan.until, remaining
            )
            self._restrict_sql(self.candidates)
        shas = self.candidates.get(repo.id)
        return shas is None or sha in shas

    def _restrict_sql(self, candidates: dict[int, set[str] | None]) -> None:
        """Let the following SQL batches return only git's candidates (and repositories git did not answer)."""
        known = [shas for shas in candidates.values() if shas is not None]
        if sum(len(shas) for shas in known) > MAX_SQL_CANDIDATES:
            return
        condition: ColumnElement[bool] = HistoryCommit.sha.in_(sorted(set().union(*known)))
        if unanswered := [rid for rid, shas in candidates.items() if shas is None]:
            condition = or_(condition, HistoryCommit.repo_id.in_(unanswered))
        self.plan.extra.append(condition)


def _aware(value: Any) -> datetime:
    # Guard: an aggregate may come back without the column's type processing (naive or as text on SQLite).
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    assert isinstance(value, datetime)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def _ref_matches(revision: str, name: str, default_branch: str | None) -> bool:
    short = name.removeprefix("refs/heads/").removeprefix("refs/tags/")
    if revision == "HEAD":
        return default_branch is not None and name == f"refs/heads/{default_branch}"
    if any(ch in revision for ch in "*?["):
        return fnmatch.fnmatchcase(name, revision) or fnmatch.fnmatchcase(short, revision)
    return revision in (name, short)


def _keyset(upper: tuple[datetime, int] | None, lower: tuple[datetime, int] | None) -> list[ColumnElement[bool]]:
    """Rows strictly below `upper` and at or above `lower` in (committed_at, id) order."""
    at, cid = HistoryCommit.committed_at, HistoryCommit.id
    bounds: list[ColumnElement[bool]] = []
    # The plain range on committed_at comes first so both planners can use its index for the range.
    if upper is not None:
        bounds += [at <= upper[0], or_(at < upper[0], cid < upper[1])]
    if lower is not None:
        bounds += [at >= lower[0], or_(at > lower[0], cid >= lower[1])]
    return bounds


def _author_ids_query(names: Sequence[str]) -> Select[Any]:
    return select(HistoryAuthor.id).where(_like_any(HistoryAuthor.search_key, names))


def _commit_select(conditions: Sequence[ColumnElement[bool]]) -> Select[*tuple[Any, ...]]:
    author = aliased(HistoryAuthor)
    return (
        select(
            HistoryCommit.id,
            HistoryCommit.repo_id,
            HistoryCommit.sha,
            HistoryCommit.parents,
            HistoryCommit.authored_at,
            HistoryCommit.committed_at,
            HistoryCommit.subject,
            HistoryCommit.message,
            HistoryCommit.paths,
            author.name.label("author_name"),
            author.email.label("author_email"),
        )
        .join(author, author.id == HistoryCommit.author_id)
        .where(*conditions)
        .order_by(HistoryCommit.committed_at.desc(), HistoryCommit.id.desc())
    )


def _matching_hunks(diff: Any, regex: Any, origins: str) -> list[tuple[str, diffs.DiffHunk]]:
    """Hunks with at least one added/removed line matching `regex`, matched ranges filled in."""
    found: list[tuple[str, diffs.DiffHunk]] = []
    for file in diffs.file_diffs(diff, max_lines_per_file=MAX_LINES_PER_FILE):
        for hunk in file.hunks:
            hit = False
            for line in hunk.lines:
                if line.origin in origins and line.origin != " ":
                    ranges = [m.span() for m in regex.finditer(line.text)]
                    if ranges:
                        line.ranges = ranges
                        hit = True
            if hit:
                found.append((file.path, hunk))
                if len(found) >= MAX_HUNKS_PER_MATCH:
                    return found
    return found


def _encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> int:
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        offset = data["o"]
        if not isinstance(offset, int) or offset < 0:
            raise ValueError
        return offset
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise InvalidInput("invalid `after` cursor", hint="pass the endCursor of the previous page unchanged") from None
