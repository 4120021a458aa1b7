"""HistoryService: commit_search, diff_search, compare_revisions and get_contributor_repos.

Metadata filters (repos, message, authors, files, dates, branches) are SQL on the commit index, newest
first with a LIMIT, so they stay database queries across thousands of repositories (history.plan).
Content filters (`contentTerms`, diff_search) stream the same candidate query in batches, diff each
candidate in-process (pygit2, renames detected) and stop at `count` or at the time budget (history.scan).
Visibility: every query is restricted to the repositories `RepoService.readable_refs(actor)` returns
(history.scope); others read exactly like missing ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Self

import pygit2
from pygit2.enums import DiffFind, SortMode
from sqlalchemy import func, select

from codewell.core.actors import INTERNAL, Actor
from codewell.core.errors import InvalidInput, NotFound
from codewell.history import diffs, prefilter
from codewell.history import scope as scope_module
from codewell.history.indexer import CommitIndexer, IndexStats
from codewell.history.models import HistoryAuthorRepo
from codewell.history.params import compile_regex, decode_cursor, encode_cursor, int_param, terms
from codewell.history.plan import Planner, author_ids_query
from codewell.history.results import (
    CommitInfo,
    CommitSearchResult,
    Comparison,
    ContributorRepo,
    DiffMatch,
    DiffSearchResult,
)
from codewell.history.scan import Narrowing, Scanner, commit_select
from codewell.repos.service import Repo, RepoRef, RepoService

if TYPE_CHECKING:
    from codewell.runtime import Runtime

__all__ = [
    "Blame",
    "BlameLine",
    "CommitDetail",
    "CommitInfo",
    "CommitLog",
    "CommitSearchResult",
    "Comparison",
    "ContributorRepo",
    "DiffMatch",
    "DiffSearchResult",
    "HistoryService",
]

COMMIT_COUNT_DEFAULT, COMMIT_COUNT_MAX = 50, 100
DIFF_COUNT_DEFAULT, DIFF_COUNT_MAX = 20, 50
COMPARE_FIRST_DEFAULT, COMPARE_FIRST_MAX = 50, 100
CONTRIB_LIMIT_DEFAULT, CONTRIB_LIMIT_MAX, CONTRIB_AUTHORS_MAX = 20, 100, 5
# Time budget of queries that read diffs; results found so far are returned with timed_out=True.
SCAN_TIMEOUT = 10.0
MAX_HUNKS_PER_MATCH = 10
MAX_LINES_PER_FILE = 1000
LOG_PAGE_DEFAULT, LOG_PAGE_MAX = 30, 100
# Commits a path's log walks per page before it stops (a path touched rarely in a long history).
LOG_WALK_MAX = 50_000
COMMIT_FILES_MAX = 300


@dataclass(frozen=True, slots=True)
class CommitLog:
    """One page of a revision's history (optionally of one path), newest first."""

    repo: str
    revision: str
    commit: str  # what `revision` resolved to
    path: str
    commits: list[CommitInfo]
    offset: int
    has_more: bool
    walk_limit_hit: bool = False  # a path's log stopped after LOG_WALK_MAX commits


@dataclass(frozen=True, slots=True)
class BlameLine:
    number: int
    text: str
    commit: CommitInfo
    first: bool  # the first line of a run from the same commit


@dataclass(frozen=True, slots=True)
class Blame:
    """Who last changed each line of a file at a revision: the whole file, or the `lines` range asked for (a page
    of a long file). A file over 5 MB has no lines, `too_big` and a notice saying its size."""

    repo: str
    revision: str
    commit: str
    path: str
    lines: list[BlameLine]
    truncated: bool
    total_lines: int = 0
    too_big: str = ""  # the notice of a file too big to blame (its size, where to read it)


@dataclass(frozen=True, slots=True)
class CommitDetail:
    """One commit with the diff it introduces against its first parent (files ordered by path)."""

    info: CommitInfo
    files: list[diffs.FileDiff]
    total_files: int
    total_added: int
    total_deleted: int
    parent: str | None  # the first parent the diff is against (None for a root commit)


class HistoryService:
    """History queries for an actor, plus `index_repo` used by the sync listener."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.db = runtime.db
        self.indexer = CommitIndexer(runtime.db)
        self.mirrors = diffs.MirrorCache()
        self.scanner = Scanner(runtime.db)

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    @property
    def repos(self) -> RepoService:
        return self.runtime.get(RepoService)

    @property
    def planner(self) -> Planner:
        return Planner(self.db, self.repos, self.mirrors)

    # ---- indexing ---------------------------------------------------------------------------------------

    def index_repo(self, repo: Repo) -> IndexStats:
        """Record the commits of `repo`'s refs that are not indexed yet (called after every sync)."""
        return self.indexer.index_repo(repo.id, repo.mirror_path)

    def reindex_all(self) -> list[IndexStats]:
        """Index every ready repository (catch-up after installing history on an existing instance)."""
        return [self.index_repo(r) for r in self.repos.readable(INTERNAL) if r.sync_state == "ready"]

    # ---- commit_search ----------------------------------------------------------------------------------

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
        count = int_param(count, "count", COMMIT_COUNT_DEFAULT, 1, COMMIT_COUNT_MAX)
        plan = self.planner.build(
            actor,
            repos,
            message_terms=message_terms,
            authors=authors,
            files=files,
            after=after,
            before=before,
            revisions=revisions,
        )
        content = [t.lower() for t in terms(content_terms, "contentTerms")]
        if not content and plan.reachable is None and not plan.unindexed:
            with self.db.session() as session:
                rows = session.execute(commit_select(plan.conditions).limit(count + 1)).all()
            commits = self.scanner.commit_infos(plan.scope, rows[:count])
            return CommitSearchResult(commits, len(rows) > count, False, plan.scope.unknown, plan.scope.suggestions)

        def matches(repo: RepoRef, row: Any) -> bool:
            diff = diffs.commit_diff(self.mirrors.open(repo.mirror_path), row.sha, context_lines=0)
            if diff is None:
                return False
            return any(term in text.lower() for _, text in diffs.changed_lines(diff) for term in content)

        found, limit_hit, timed_out = self.scanner.scan(plan, count, matches if content else None, timeout)
        commits = self.scanner.commit_infos(plan.scope, found)
        return CommitSearchResult(commits, limit_hit, timed_out, plan.scope.unknown, plan.scope.suggestions)

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
        regex = compile_regex(pattern, "pattern")
        count = int_param(count, "count", DIFF_COUNT_DEFAULT, 1, DIFF_COUNT_MAX)
        origins = ("+" if added else "") + ("-" if removed else "") or "+-"
        plan = self.planner.build(actor, repos, authors=authors, after=after, before=before, revisions=revisions)
        hunks_of: dict[str, list[tuple[str, diffs.DiffHunk]]] = {}
        narrow = Narrowing(plan, prefilter.required_literal(pattern), timeout)

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

        rows, limit_hit, timed_out = self.scanner.scan(plan, count, matches, timeout)
        infos = self.scanner.commit_infos(plan.scope, rows)
        found = [DiffMatch(info, hunks_of[f"{row.repo_id}:{row.sha}"]) for info, row in zip(infos, rows, strict=True)]
        return DiffSearchResult(found, limit_hit, timed_out, plan.scope.unknown, plan.scope.suggestions)

    # ---- compare_revisions ------------------------------------------------------------------------------

    def compare(
        self, actor: Actor, repo: str, base: str, head: str, *, first: int | None = None, after: str | None = None
    ) -> Comparison:
        """The diff from `base` to `head` (their trees), files ordered by path, `first` per page after `after`."""
        first = int_param(first, "first", COMPARE_FIRST_DEFAULT, 1, COMPARE_FIRST_MAX)
        offset = decode_cursor(after) if after else 0
        for value, name in ((base, "base"), (head, "head")):
            if not isinstance(value, str) or not value.strip():
                raise InvalidInput(f"`{name}` must be a revision (branch, tag or commit)", hint="e.g. main")
        base_rev = self.repos.resolve(actor, repo, base.strip())
        head_rev = self.repos.resolve(actor, repo, head.strip())
        git_repo = self.mirrors.open(base_rev.repo.mirror_path)
        diff = git_repo.diff(base_rev.commit, head_rev.commit, context_lines=3)
        diff.find_similar(flags=DiffFind.FIND_RENAMES)
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
            end_cursor=encode_cursor(offset + len(files)) if has_next else None,
            offset=offset,
        )

    # ---- pages: log and one commit ---------------------------------------------------------------------

    def log(
        self,
        actor: Actor,
        repo: str,
        revision: str | None = None,
        path: str = "",
        *,
        offset: int = 0,
        limit: int | None = None,
    ) -> CommitLog:
        """Commits reachable from `revision` (default branch when None), newest first, `limit` after `offset`.

        With `path`, only the commits that changed it (its tree entry differs from every parent's, roughly
        git's default simplification). Read from the mirror, so it works before the commit index caught up.
        """
        limit = int_param(limit, "limit", LOG_PAGE_DEFAULT, 1, LOG_PAGE_MAX)
        offset = int_param(offset, "offset", 0, 0, 1_000_000)
        resolved = self.repos.resolve(actor, repo, revision)
        git_repo = self.mirrors.open(resolved.repo.mirror_path)
        path = path.strip("/")
        found: list[pygit2.Commit] = []
        walked, skipped, more, cut = 0, 0, False, False
        for commit in git_repo.walk(resolved.commit, SortMode.TOPOLOGICAL | SortMode.TIME):
            walked += 1
            if path and walked > LOG_WALK_MAX:
                cut = True
                break
            if path and not _touches(commit, path):
                continue
            if skipped < offset:
                skipped += 1
                continue
            if len(found) == limit:
                more = True
                break
            found.append(commit)
        if path and not found and offset == 0 and not cut and _entry(git_repo[resolved.commit], path) is None:
            raise NotFound(f"no file or directory {path!r} at {resolved.revision}", hint="check the path")
        infos = [_commit_info(resolved.repo.name, c) for c in found]
        return CommitLog(resolved.repo.name, resolved.revision, resolved.commit, path, infos, offset, more, cut)

    def commit(self, actor: Actor, repo: str, sha: str) -> CommitDetail:
        """One commit and the diff it introduces (merges: against their first parent), at most 300 files."""
        if not isinstance(sha, str) or not sha.strip():
            raise InvalidInput("a commit SHA is required", hint="e.g. 4f2a9c1")
        resolved = self.repos.resolve(actor, repo, sha.strip())
        git_repo = self.mirrors.open(resolved.repo.mirror_path)
        commit: Any = git_repo[resolved.commit]
        parent = commit.parent_ids[0] if commit.parent_ids else None
        if parent is None:
            diff = commit.tree.diff_to_tree(swap=True, context_lines=3)
        else:
            diff = git_repo[parent].tree.diff_to_tree(commit.tree, context_lines=3)
            diff.find_similar(flags=DiffFind.FIND_RENAMES)
        stats = diff.stats
        patches = sorted((patch.delta.new_file.path, i) for i, patch in enumerate(diff) if patch is not None)
        files: list[diffs.FileDiff] = []
        for _, index in patches[:COMMIT_FILES_MAX]:
            files.extend(diffs.file_diffs([diff[index]], max_lines_per_file=MAX_LINES_PER_FILE))
        return CommitDetail(
            info=_commit_info(resolved.repo.name, commit),
            files=files,
            total_files=stats.files_changed,
            total_added=stats.insertions,
            total_deleted=stats.deletions,
            parent=str(parent) if parent is not None else None,
        )

    def blame(
        self, actor: Actor, repo: str, revision: str | None, path: str, *, lines: tuple[int, int] | None = None
    ) -> Blame:
        """The commit that last changed each line of `path` at `revision` (libgit2's blame, renames followed
        within the file's own history as libgit2 does): every line, or those of `lines` (first, last; clamped to
        the file), which libgit2 then blames alone (a page of a long file costs that page)."""
        resolved = self.repos.resolve(actor, repo, revision)
        # The whole file (blame is for people's pages; the 200-line cut is for agents' read_file).
        content = self.repos.read_file(actor, repo, path, revision=resolved.commit, whole=True)
        if content.binary:
            raise InvalidInput("binary files have no blame", hint="open the file's history instead")
        name = resolved.repo.name
        if content.truncated and not content.lines:
            too_big = content.notice or "This file is too big to blame here."
            return Blame(name, resolved.revision, resolved.commit, content.path, [], True, content.total_lines, too_big)
        total = len(content.lines)
        first, last = (1, total) if lines is None else (max(1, lines[0]), min(total, lines[1]))
        texts = content.lines[first - 1 : last] if first <= last else []
        git_repo = self.mirrors.open(resolved.repo.mirror_path)
        hunks: Any = []
        if texts:
            hunks = git_repo.blame(content.path, newest_commit=resolved.commit, min_line=first, max_line=last)
        infos: dict[str, CommitInfo] = {}
        owner: dict[int, str] = {}
        for hunk in hunks:
            sha = str(hunk.final_commit_id)
            if sha not in infos:
                infos[sha] = _commit_info(resolved.repo.name, git_repo[sha])
            start = hunk.final_start_line_number
            for number in range(start, start + hunk.lines_in_hunk):
                owner[number] = sha
        rows, previous = [], None
        for number, text in enumerate(texts, first):
            sha = owner.get(number, resolved.commit)
            info = infos.get(sha) or infos.setdefault(sha, _commit_info(name, git_repo[sha]))
            rows.append(BlameLine(number, text, info, sha != previous))
            previous = sha
        return Blame(name, resolved.revision, resolved.commit, content.path, rows, content.truncated, total)

    # ---- get_contributor_repos --------------------------------------------------------------------------

    def contributor_repos(
        self, actor: Actor, authors: Sequence[str], *, limit: int | None = None, min_commits: int | None = None
    ) -> list[ContributorRepo]:
        """Readable repositories the authors (name or e-mail substrings) committed to: count desc, then recency."""
        names = terms(authors, "authors")
        if not names:
            raise InvalidInput("`authors` must name at least one author", hint="an author name or e-mail address")
        if len(names) > CONTRIB_AUTHORS_MAX:
            raise InvalidInput(
                f"at most {CONTRIB_AUTHORS_MAX} authors per call, got {len(names)}",
                hint="split the authors over several calls",
            )
        limit = int_param(limit, "limit", CONTRIB_LIMIT_DEFAULT, 1, CONTRIB_LIMIT_MAX)
        min_commits = int_param(min_commits, "minCommits", 1, 1, 1_000_000_000)
        scope = scope_module.resolve(self.repos, actor, None, required=False)
        stats = HistoryAuthorRepo
        commits = func.sum(stats.commit_count)
        latest = func.max(stats.last_commit_at)
        query = (
            select(stats.repo_id, commits, latest)
            .where(stats.author_id.in_(author_ids_query(names)))
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


def _aware(value: Any) -> datetime:
    # Guard: an aggregate may come back without the column's type processing (naive or as text on SQLite).
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    assert isinstance(value, datetime)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def _signature_time(signature: Any) -> datetime:
    return datetime.fromtimestamp(signature.time, timezone(timedelta(minutes=signature.offset))).astimezone(UTC)


def _commit_info(repo: str, commit: Any) -> CommitInfo:
    message = commit.message or ""
    return CommitInfo(
        repo=repo,
        sha=str(commit.id),
        parents=tuple(str(p) for p in commit.parent_ids),
        author_name=commit.author.name,
        author_email=commit.author.email,
        authored_at=_signature_time(commit.author),
        committed_at=_signature_time(commit.committer),
        subject=message.split("\n", 1)[0].strip(),
        message=message,
        paths=(),
    )


def _entry(commit: Any, path: str) -> pygit2.Oid | None:
    """The id of the tree entry at `path` in a commit's tree (None when absent)."""
    try:
        return commit.tree[path].id  # type: ignore[no-any-return]
    except KeyError:
        return None


def _touches(commit: Any, path: str) -> bool:
    """Whether `commit` changed `path` compared with every parent (a root commit: whether it has it)."""
    mine = _entry(commit, path)
    if not commit.parents:
        return mine is not None
    return all(_entry(parent, path) != mine for parent in commit.parents)


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
