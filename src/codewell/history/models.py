"""Tables of the commit index: one row per commit of every repository, its author identities and refs.

Metadata queries (message, author, date, paths, refs) across thousands of repositories are database
queries on these tables; only diff content (pickaxe, diff_search, compare) is read from the git mirrors.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from codewell.db.base import Base, UTCDateTime

# SQLite only auto-increments INTEGER PRIMARY KEY; PostgreSQL gets a 64-bit key for >2G commits.
BigId = BigInteger().with_variant(Integer(), "sqlite")


class HistoryAuthor(Base):
    """A distinct (name, e-mail) identity; commits point here so author lookups scan a small table."""

    __tablename__ = "history_authors"
    __table_args__ = (UniqueConstraint("name", "email", name="uq_history_authors_name_email"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(255))
    email: Mapped[str] = mapped_column(String(255))
    # lower("name <email>"): the case-insensitive substring match target of the `authors` filter.
    search_key: Mapped[str] = mapped_column(Text)


class HistoryCommit(Base):
    """One commit of one repository (the same SHA in two repositories is two rows)."""

    __tablename__ = "history_commits"
    __table_args__ = (
        UniqueConstraint("repo_id", "sha", name="uq_history_commits_repo_id_sha"),
        Index("ix_history_commits_committed_at", "committed_at"),
        Index("ix_history_commits_repo_id_committed_at", "repo_id", "committed_at"),
        Index("ix_history_commits_author_repo", "author_id", "repo_id", "committed_at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    repo_id: Mapped[int] = mapped_column(ForeignKey("repos.id", ondelete="CASCADE"))
    sha: Mapped[str] = mapped_column(String(40))
    # Parent SHAs separated by spaces ("" for a root commit).
    parents: Mapped[str] = mapped_column(String(400), default="")
    author_id: Mapped[int] = mapped_column(ForeignKey("history_authors.id"))
    committer_id: Mapped[int] = mapped_column(ForeignKey("history_authors.id"))
    authored_at: Mapped[datetime] = mapped_column(UTCDateTime)
    committed_at: Mapped[datetime] = mapped_column(UTCDateTime)
    subject: Mapped[str] = mapped_column(Text)
    message: Mapped[str] = mapped_column(Text)
    # lower(message): portable case-insensitive substring search (LIKE) on SQLite and PostgreSQL.
    search_text: Mapped[str] = mapped_column(Text)
    # Changed paths (against the first parent), one per line, capped (see indexer.MAX_PATHS).
    paths: Mapped[str] = mapped_column(Text, default="")


class HistoryRef(Base):
    """A ref of a repository as last indexed (its tip), so the next sync indexes only what is new."""

    __tablename__ = "history_refs"
    __table_args__ = (UniqueConstraint("repo_id", "name", name="uq_history_refs_repo_id_name"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    repo_id: Mapped[int] = mapped_column(ForeignKey("repos.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(500))
    target: Mapped[str] = mapped_column(String(40))


class HistoryCommitRef(Base):
    """Commit C is reachable from ref R (the `revisions` filter and "refs containing it")."""

    __tablename__ = "history_commit_refs"
    __table_args__ = (Index("ix_history_commit_refs_commit_id", "commit_id"),)

    ref_id: Mapped[int] = mapped_column(ForeignKey("history_refs.id", ondelete="CASCADE"), primary_key=True)
    commit_id: Mapped[int] = mapped_column(ForeignKey("history_commits.id", ondelete="CASCADE"), primary_key=True)


class HistoryWord(Base):
    """The vocabulary of commit messages: lower-cased word tokens (3-64 characters)."""

    __tablename__ = "history_words"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    word: Mapped[str] = mapped_column(String(64), unique=True)


class HistoryWordCommit(Base):
    """Commit C's message contains word W: the inverted index that finds rare message terms without a scan.

    No foreign keys on purpose: a cascade from history_commits would need a second index on commit_id over
    the largest table. Postings are only candidates (every hit is re-checked against search_text), so
    orphans left by a removed repository are harmless; the removal listener sweeps them.
    """

    __tablename__ = "history_word_commits"

    word_id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=False)
    commit_id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=False)


class HistoryAuthorRepo(Base):
    """Per (author, repository): how many commits and the latest commit date, kept up to date by the indexer.

    get_contributor_repos aggregates these few rows instead of every commit of a prolific author.
    """

    __tablename__ = "history_author_repos"

    author_id: Mapped[int] = mapped_column(ForeignKey("history_authors.id"), primary_key=True)
    repo_id: Mapped[int] = mapped_column(ForeignKey("repos.id", ondelete="CASCADE"), primary_key=True)
    commit_count: Mapped[int] = mapped_column(Integer)
    last_commit_at: Mapped[datetime] = mapped_column(UTCDateTime)
