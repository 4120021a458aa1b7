"""Running a plan: candidate commits newest first in keyset batches (windowed for unindexed conditions),
filtered in Python (reachable SHAs, diffs), under a time budget; and turning rows into `CommitInfo`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, or_, select
from sqlalchemy.orm import aliased

from codewell.db import Database
from codewell.history import prefilter
from codewell.history.models import HistoryAuthor, HistoryCommit, HistoryCommitRef, HistoryRef
from codewell.history.plan import Plan
from codewell.history.results import CommitInfo
from codewell.history.scope import Scope
from codewell.repos.service import RepoRef

SCAN_BATCH = 200
# diff_search asks `git log -G` for candidates (history.prefilter) once the in-process scan ran this long
# without reaching `count`: frequent patterns finish before, rare ones stop diffing every commit.
PREFILTER_AFTER = 0.15
# Up to this many candidate SHAs from git also restrict the SQL candidates (one IN list), so the rest of
# the scan reads only those rows; more are filtered row by row.
MAX_SQL_CANDIDATES = 5000
# Filters no index narrows (short message terms, `files`) are checked window by window, newest first: each
# SQL statement reads at most this many commits of the scope, so the time budget is checked between them.
FIRST_WINDOW, MAX_WINDOW = 2_000, 50_000


class Scanner:
    """Candidate rows of a plan from the commit index."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def scan(
        self, plan: Plan, count: int, predicate: Callable[[RepoRef, Any], Any] | None, timeout: float
    ) -> tuple[list[Any], bool, bool]:
        """Walk candidates newest first, keep those passing the filters; stop at count+1 or at the deadline.

        Returns (rows, limit_hit, timed_out). The deadline is checked per row and between SQL statements,
        so a scan that finds nothing for a long stretch stops on time as well.
        """
        deadline = time.monotonic() + timeout
        found: list[Any] = []
        for row in self.candidates(plan):
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

    def candidates(self, plan: Plan) -> Iterator[Any]:
        """Rows matching the plan's conditions newest first, then None after each SQL statement.

        Rows come in keyset-paginated batches. With unindexed conditions the walk is cut into windows of
        the scope (FIRST_WINDOW rows, growing to MAX_WINDOW): the window's lower key comes from the indexed
        conditions alone, so no statement reads more than a window of commits, however rare the match.
        """
        indexed = [c for c in plan.conditions if not any(c is u for u in plan.unindexed)]
        upper: tuple[datetime, int] | None = None
        window = FIRST_WINDOW
        while True:
            lower = self.window_floor(indexed, upper, window) if plan.unindexed else None
            window = min(window * 4, MAX_WINDOW)
            while True:
                page = [*plan.conditions, *plan.extra, *keyset(upper, lower)]
                with self.db.session() as session:
                    rows = session.execute(commit_select(page).limit(SCAN_BATCH)).all()
                yield from rows
                yield None
                if rows:
                    upper = (rows[-1].committed_at, rows[-1].id)
                if len(rows) < SCAN_BATCH:
                    break
            if lower is None:
                return
            upper = lower  # the floor row itself was inside the window (inclusive)

    def window_floor(
        self, conditions: list[ColumnElement[bool]], upper: tuple[datetime, int] | None, size: int
    ) -> tuple[datetime, int] | None:
        """The key of the `size`-th commit below `upper` matching `conditions` (None: fewer remain)."""
        query = (
            select(HistoryCommit.committed_at, HistoryCommit.id)
            .where(*conditions, *keyset(upper, None))
            .order_by(HistoryCommit.committed_at.desc(), HistoryCommit.id.desc())
            .offset(size - 1)
            .limit(1)
        )
        with self.db.session() as session:
            row = session.execute(query).first()
        return (row[0], row[1]) if row is not None else None

    def commit_infos(self, scope: Scope, rows: Sequence[Any]) -> list[CommitInfo]:
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


class Narrowing:
    """diff_search's switch to git-prefiltered candidates once the scan has run PREFILTER_AFTER seconds."""

    def __init__(self, plan: Plan, literal: str | None, timeout: float) -> None:
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


def keyset(upper: tuple[datetime, int] | None, lower: tuple[datetime, int] | None) -> list[ColumnElement[bool]]:
    """Rows strictly below `upper` and at or above `lower` in (committed_at, id) order."""
    at, cid = HistoryCommit.committed_at, HistoryCommit.id
    bounds: list[ColumnElement[bool]] = []
    # The plain range on committed_at comes first so both planners can use its index for the range.
    if upper is not None:
        bounds += [at <= upper[0], or_(at < upper[0], cid < upper[1])]
    if lower is not None:
        bounds += [at >= lower[0], or_(at > lower[0], cid >= lower[1])]
    return bounds


def commit_select(conditions: Sequence[ColumnElement[bool]]) -> Select[*tuple[Any, ...]]:
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
