"""Recording new commits of every ref of a repository in the commit index (incremental, idempotent).

Invariant kept after every completed run: every commit reachable from a ref target stored in
`history_refs` is in `history_commits`, and each branch's reachable commits are in `history_commit_refs`.
So a sync only walks `new tips --not old tips`. A crash part-way leaves the refs at their old targets; the
next run redoes the walk and conflicting inserts are ignored.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import islice
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Insert, case, delete, insert, literal, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from codewell.db import Database
from codewell.history import gitlog
from codewell.history.models import (
    HistoryAuthor,
    HistoryAuthorRepo,
    HistoryCommit,
    HistoryCommitRef,
    HistoryRef,
    HistoryWord,
    HistoryWordCommit,
)

log = logging.getLogger(__name__)

# Commits with more changed paths keep the first MAX_PATHS (the `files` filter then misses the rest).
MAX_PATHS = 500
# Message words in the inverted index: lower-case runs of letters, digits and "_" of 3..64 characters.
# A longer run is indexed as consecutive 64-character pieces (its first piece is always exactly 64 long,
# which is how queries recognise commits whose runs were cut; see HistoryService._message_condition).
MIN_WORD, MAX_WORD = 3, 64
WORD = re.compile(rf"[a-z0-9_]{{{MIN_WORD},{MAX_WORD}}}")
MAX_WORDS_PER_COMMIT = 200
# Marks a message with more distinct words than were indexed: such commits are candidates for every term.
# "~" is never part of a word token, so no term's token can match it by substring.
OVERFLOW_WORD = "~overflow"
_WORD_CACHE_MAX = 500_000


def message_words(search_text: str) -> set[str]:
    """The distinct index words of a (lower-cased) message: at most MAX_WORDS_PER_COMMIT, then OVERFLOW_WORD."""
    words: set[str] = set()
    for match in WORD.finditer(search_text):
        if len(words) >= MAX_WORDS_PER_COMMIT:
            if match.group() not in words:
                words.add(OVERFLOW_WORD)
                break
            continue
        words.add(match.group())
    return words


BATCH = 1000
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class IndexStats:
    """What one indexing run did."""

    repo_id: int
    new_commits: int
    refs_updated: int
    refs_removed: int
    seconds: float


def batched(items: Iterable[T], size: int) -> Iterator[list[T]]:
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk


class CommitIndexer:
    """Indexes repositories into the history tables; safe to call from several threads."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._locks: dict[int, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        # (name, email) -> author id; identities are immutable, so the cache never goes stale.
        self._authors: dict[tuple[str, str], int] = {}
        self._words: dict[str, int] = {}

    def _repo_lock(self, repo_id: int) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(repo_id, threading.Lock())

    def index_repo(self, repo_id: int, git_dir: Path) -> IndexStats:
        """Bring the index of one repository up to date with its mirror's branches and tags."""
        started = time.perf_counter()
        with self._repo_lock(repo_id):
            tips = {tip.name: tip.commit for tip in gitlog.list_ref_tips(git_dir)}
            with self.db.session() as session:
                stored = {
                    name: (ref_id, target)
                    for ref_id, name, target in session.execute(
                        select(HistoryRef.id, HistoryRef.name, HistoryRef.target).where(HistoryRef.repo_id == repo_id)
                    )
                }
            changed = {name: sha for name, sha in tips.items() if stored.get(name, (0, ""))[1] != sha}
            removed = [ref_id for name, (ref_id, _) in stored.items() if name not in tips]
            new_commits = 0
            if changed:
                old_targets = {target for _, target in stored.values()}
                commits = gitlog.log_commits(git_dir, set(changed.values()), old_targets)
                for chunk in batched(commits, BATCH):
                    self._insert_commits(repo_id, chunk)
                    new_commits += len(chunk)
            for name, sha in changed.items():
                self._update_ref(repo_id, git_dir, name, sha, stored.get(name))
            if removed:
                with self.db.session() as session:
                    session.execute(delete(HistoryRef).where(HistoryRef.id.in_(removed)))
        stats = IndexStats(repo_id, new_commits, len(changed), len(removed), time.perf_counter() - started)
        if changed or removed:
            log.info(
                "history indexed",
                extra={"repo_id": repo_id, "new_commits": new_commits, "refs": len(changed), "seconds": stats.seconds},
            )
        return stats

    def _insert_or_ignore(self, session: Session, model: type[Any], rows: Sequence[dict[str, Any]]) -> None:
        """INSERT ... ON CONFLICT DO NOTHING on both engines (re-runs and concurrent identities are harmless)."""
        statement: Insert
        if session.get_bind().dialect.name == "postgresql":
            statement = postgresql.insert(model).on_conflict_do_nothing()
        else:
            statement = sqlite.insert(model).on_conflict_do_nothing()
        session.execute(statement, list(rows))

    def _author_ids(
        self, session: Session, identities: set[tuple[str, str]], pending: dict[tuple[str, str], int]
    ) -> dict[tuple[str, str], int]:
        """Ids of `identities`, inserting new ones; ids read in this transaction go to `pending`, not the cache.

        Another thread's transaction must not use an id before it is committed (PostgreSQL would reject its
        commit rows: the author row is invisible to it), so the caller publishes `pending` after commit.
        """
        missing = [key for key in identities if key not in self._authors]
        if missing:
            self._insert_or_ignore(
                session,
                HistoryAuthor,
                [{"name": n, "email": e, "search_key": f"{n} <{e}>".lower()} for n, e in missing],
            )
            for chunk in batched(missing, 400):
                emails = {email for _, email in chunk}
                for author_id, name, email in session.execute(
                    select(HistoryAuthor.id, HistoryAuthor.name, HistoryAuthor.email).where(
                        HistoryAuthor.email.in_(emails)
                    )
                ):
                    pending[(name, email)] = author_id
        return {key: self._authors.get(key) or pending[key] for key in identities}

    def _insert_commits(self, repo_id: int, commits: list[gitlog.LoggedCommit]) -> None:
        try:
            self._insert_commit_rows(repo_id, commits)
        except Exception:
            # The transaction rolled back: ids cached during it may not exist. Start the caches afresh.
            self._authors.clear()
            self._words.clear()
            raise

    def _insert_commit_rows(self, repo_id: int, commits: list[gitlog.LoggedCommit]) -> None:
        identities = {(c.author_name[:255], c.author_email[:255]) for c in commits}
        identities |= {(c.committer_name[:255], c.committer_email[:255]) for c in commits}
        new_authors: dict[tuple[str, str], int] = {}
        new_words: dict[str, int] = {}
        with self.db.session() as session:
            authors = self._author_ids(session, identities, new_authors)
            rows = [
                {
                    "repo_id": repo_id,
                    "sha": c.sha,
                    "parents": " ".join(c.parents[:9]),
                    "author_id": authors[(c.author_name[:255], c.author_email[:255])],
                    "committer_id": authors[(c.committer_name[:255], c.committer_email[:255])],
                    "authored_at": c.authored_at,
                    "committed_at": c.committed_at,
                    "subject": c.subject,
                    "message": c.message,
                    "search_text": c.message.lower(),
                    "paths": "\n".join(c.paths[:MAX_PATHS]),
                }
                for c in commits
            ]
            inserted = self._insert_new_commits(session, rows)
            self._insert_words(session, {row.sha: row.id for row in inserted}, rows, new_words)
            self._count_authors(session, repo_id, inserted)
        # Committed: now other threads may use these ids.
        self._authors.update(new_authors)
        self._words.update(new_words)

    def _insert_new_commits(self, session: Session, rows: list[dict[str, Any]]) -> list[Any]:
        """Insert, skipping commits already indexed; returns (id, sha, author_id, committed_at) of the new ones."""
        statement: Any
        if session.get_bind().dialect.name == "postgresql":
            statement = postgresql.insert(HistoryCommit).on_conflict_do_nothing()
        else:
            statement = sqlite.insert(HistoryCommit).on_conflict_do_nothing()
        returning = statement.returning(
            HistoryCommit.id, HistoryCommit.sha, HistoryCommit.author_id, HistoryCommit.committed_at
        )
        return list(session.execute(returning, rows))

    def _count_authors(self, session: Session, repo_id: int, inserted: list[Any]) -> None:
        """Add the new commits to the per (author, repository) counts (only rows really inserted count)."""
        stats: dict[int, tuple[int, datetime]] = {}
        for row in inserted:
            count, last = stats.get(row.author_id, (0, row.committed_at))
            stats[row.author_id] = (count + 1, max(last, row.committed_at))
        if not stats:
            return
        table = HistoryAuthorRepo.__table__
        values = [
            {"author_id": a, "repo_id": repo_id, "commit_count": n, "last_commit_at": last}
            for a, (n, last) in stats.items()
        ]
        statement: Any
        if session.get_bind().dialect.name == "postgresql":
            statement = postgresql.insert(HistoryAuthorRepo)
        else:
            statement = sqlite.insert(HistoryAuthorRepo)
        excluded = statement.excluded
        statement = statement.on_conflict_do_update(
            index_elements=["author_id", "repo_id"],
            set_={
                "commit_count": table.c.commit_count + excluded.commit_count,
                "last_commit_at": case(
                    (excluded.last_commit_at > table.c.last_commit_at, excluded.last_commit_at),
                    else_=table.c.last_commit_at,
                ),
            },
        )
        session.execute(statement, values)

    def _word_ids(self, session: Session, words: set[str], pending: dict[str, int]) -> dict[str, int]:
        """Ids of `words`, inserting new ones; like _author_ids, new ids go to `pending` until commit."""
        if len(self._words) > _WORD_CACHE_MAX:
            self._words.clear()
        missing = [w for w in words if w not in self._words]
        if missing:
            self._insert_or_ignore(session, HistoryWord, [{"word": w} for w in missing])
            for chunk in batched(missing, 500):
                for word_id, word in session.execute(
                    select(HistoryWord.id, HistoryWord.word).where(HistoryWord.word.in_(chunk))
                ):
                    pending[word] = word_id
        return {w: self._words.get(w) or pending[w] for w in words}

    def _insert_words(
        self, session: Session, ids: dict[str, int], rows: list[dict[str, Any]], pending: dict[str, int]
    ) -> None:
        """Postings (word, commit) for the messages of the commits just inserted (`ids`: sha -> commit id)."""
        words_of = {ids[row["sha"]]: message_words(row["search_text"]) for row in rows if row["sha"] in ids}
        vocabulary = self._word_ids(session, set().union(*words_of.values()) if words_of else set(), pending)
        postings = [
            {"word_id": vocabulary[word], "commit_id": commit_id}
            for commit_id, words in words_of.items()
            for word in words
        ]
        for chunk in batched(postings, 5000):
            self._insert_or_ignore(session, HistoryWordCommit, chunk)

    def _update_ref(self, repo_id: int, git_dir: Path, name: str, sha: str, old: tuple[int, str] | None) -> None:
        """Move a ref to `sha`; for branches also record which commits it now reaches (one transaction)."""
        with self.db.session() as session:
            if old is None:
                ref_id = session.execute(
                    insert(HistoryRef).values(repo_id=repo_id, name=name, target=sha).returning(HistoryRef.id)
                ).scalar_one()
            else:
                ref_id = old[0]
                session.execute(update(HistoryRef).where(HistoryRef.id == ref_id).values(target=sha))
            if not name.startswith("refs/heads/"):
                return  # tags: "contains" is answered by git at query time (see service); no per-commit rows
            exclude: list[str] = []
            if old is not None and gitlog.is_ancestor(git_dir, old[1], sha):
                exclude = [old[1]]  # fast-forward: only the newly reachable commits
            else:
                session.execute(delete(HistoryCommitRef).where(HistoryCommitRef.ref_id == ref_id))
            for chunk in batched(gitlog.rev_list(git_dir, [sha], exclude), 500):
                session.execute(
                    insert(HistoryCommitRef).from_select(
                        ["ref_id", "commit_id"],
                        select(literal(ref_id), HistoryCommit.id).where(
                            HistoryCommit.repo_id == repo_id, HistoryCommit.sha.in_(chunk)
                        ),
                    )
                )


def sweep_orphan_words(db: Database) -> int:
    """Delete postings whose commit no longer exists (after a repository was removed); returns the count."""
    with db.session() as session:
        result = session.execute(
            delete(HistoryWordCommit).where(HistoryWordCommit.commit_id.not_in(select(HistoryCommit.id)))
        )
        return int(getattr(result, "rowcount", 0) or 0)
