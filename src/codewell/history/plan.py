"""The query plan of commit_search and diff_search: SQL conditions on the commit index, per filter kind.

Metadata filters (message, authors, files, dates, branches) become SQL conditions ordered newest first;
revisions naming tags or commits are answered by git (per-repository reachable SHA sets); conditions no
index narrows are marked so that the scan (history.scan) reads them window by window.
"""

from __future__ import annotations

import contextlib
import fnmatch
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pygit2
from sqlalchemy import ColumnElement, Select, and_, exists, func, or_, select

from codewell.core.actors import Actor
from codewell.core.errors import InvalidInput
from codewell.db import Database
from codewell.history import diffs, gitlog
from codewell.history import scope as scope_module
from codewell.history.dates import parse_range
from codewell.history.indexer import MAX_WORD, MIN_WORD, OVERFLOW_WORD
from codewell.history.models import (
    HistoryAuthor,
    HistoryAuthorRepo,
    HistoryCommit,
    HistoryCommitRef,
    HistoryRef,
    HistoryWord,
    HistoryWordCommit,
)
from codewell.history.params import terms
from codewell.history.scope import Scope
from codewell.repos.service import RepoRef, RepoService

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


@dataclass(slots=True)
class Plan:
    scope: Scope
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


def like_any(column: Any, terms: Sequence[str]) -> ColumnElement[bool]:
    # Lower-cased terms against lower-cased columns: the same case-insensitive semantics on both engines.
    return or_(*(column.contains(term.lower(), autoescape=True) for term in terms))


def author_ids_query(names: Sequence[str]) -> Select[Any]:
    return select(HistoryAuthor.id).where(like_any(HistoryAuthor.search_key, names))


def _ref_matches(revision: str, name: str, default_branch: str | None) -> bool:
    short = name.removeprefix("refs/heads/").removeprefix("refs/tags/")
    if revision == "HEAD":
        return default_branch is not None and name == f"refs/heads/{default_branch}"
    if any(ch in revision for ch in "*?["):
        return fnmatch.fnmatchcase(name, revision) or fnmatch.fnmatchcase(short, revision)
    return revision in (name, short)


class Planner:
    """Builds a `Plan` for an actor's query; `mirrors` opens repositories for revisions git must answer."""

    def __init__(self, db: Database, repos: RepoService, mirrors: diffs.MirrorCache) -> None:
        self.db = db
        self.repos = repos
        self.mirrors = mirrors

    def _revision_filter(
        self, scope: Scope, revisions: list[str]
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

    def _match_revisions(self, scope: Scope, revisions: list[str]) -> tuple[list[int], dict[int, set[str]], bool]:
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

    def _author_condition(self, names: list[str]) -> ColumnElement[bool]:
        """Commits by any author matching `names`; the access path depends on how many commits they have.

        Few commits: the (author, repo, date) index finds them all. Many: scanning newest first and
        checking the author finds `count` of them sooner, so the author column is wrapped (`+ 0`) to keep
        the planner (SQLite and PostgreSQL alike) off the author index.
        """
        authors = author_ids_query(names)
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

    def build(
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
    ) -> Plan:
        start, end = parse_range(after, before)
        scope = scope_module.resolve(self.repos, actor, repos)
        conditions: list[ColumnElement[bool]] = []
        unindexed: list[ColumnElement[bool]] = []
        if message := terms(message_terms, "messageTerms"):
            parts = [self._message_condition(term) for term in message]
            condition = or_(*(c for c, _ in parts))
            conditions.append(condition)
            if not all(indexed for _, indexed in parts):
                unindexed.append(condition)
        if names := terms(authors, "authors"):
            conditions.append(self._author_condition(names))
        if paths := terms(files, "files"):
            conditions.append(or_(*(HistoryCommit.paths.contains(p, autoescape=True) for p in paths)))
        if start is not None:
            conditions.append(HistoryCommit.committed_at >= start)
        if end is not None:
            conditions.append(HistoryCommit.committed_at < end)
        reachable = None
        if revs := terms(revisions, "revisions"):
            ref_condition, reachable = self._revision_filter(scope, revs)
            if ref_condition is not None:
                conditions.append(ref_condition)
        if not scope.everything:
            conditions.append(HistoryCommit.repo_id.in_(list(scope.repos)))
        return Plan(scope, conditions, reachable, unindexed=unindexed, since=start, until=end)
