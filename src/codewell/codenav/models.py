"""Tables of precise code navigation: SCIP index uploads per (repository, commit), written only by codenav.

The symbol indexes codenav builds itself are files under the data dir (a cache, rebuilt at will); uploads are
the only copy of what a CI pipeline sent, so they live in the database with everything else that is backed up.
An upload keeps, per document and SCIP symbol, the ranges of its definitions and of its other occurrences:
what go_to_definition and find_references read. Nothing else of the index (hover texts, diagnostics) is kept.
The last failed auto-indexing job of a commit is kept too (what `codewell codeintel list` shows operators).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from codewell.db.base import Base, UTCDateTime

# SQLite only auto-increments INTEGER PRIMARY KEY; PostgreSQL gets 64-bit keys (one row per document and symbol).
BigId = BigInteger().with_variant(Integer(), "sqlite")


class ScipUpload(Base):
    """One uploaded SCIP index of one commit of one repository (a re-upload replaces it)."""

    __tablename__ = "codenav_scip_uploads"
    __table_args__ = (UniqueConstraint("repo_id", "commit", name="uq_codenav_scip_uploads_repo_id_commit"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    repo_id: Mapped[int] = mapped_column(ForeignKey("repos.id", ondelete="CASCADE"))
    commit: Mapped[str] = mapped_column(String(40))
    # The indexer that wrote it, "name version" (Metadata.tool_info), shown with every precise answer.
    tool: Mapped[str] = mapped_column(String(200))
    uploaded_at: Mapped[datetime] = mapped_column(UTCDateTime)
    size: Mapped[int] = mapped_column(BigInteger)
    documents: Mapped[int] = mapped_column(Integer)
    occurrences: Mapped[int] = mapped_column(BigInteger)
    # Who sent it: "upload" (CLI, REST) or "auto" (an auto-indexing job, codenav/autoindex.py).
    source: Mapped[str] = mapped_column(String(20), default="upload", server_default="upload")


class ScipDocument(Base):
    """A file of an upload (Document.relative_path, relative to the repository root)."""

    __tablename__ = "codenav_scip_documents"
    __table_args__ = (UniqueConstraint("upload_id", "path", name="uq_codenav_scip_documents_upload_id_path"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    upload_id: Mapped[int] = mapped_column(ForeignKey("codenav_scip_uploads.id", ondelete="CASCADE"))
    path: Mapped[str] = mapped_column(String(1024))
    language: Mapped[str] = mapped_column(String(100))


class ScipOccurrence(Base):
    """Every occurrence of one SCIP symbol in one document under one name, ranges packed in two columns.

    One row per (document, symbol, name) rather than per occurrence keeps the table a few times smaller (as the
    symbol index's `occurrences` table does). `name` is the identifier text at the occurrences (what a caller
    types as `symbol`), so that `import numpy as np` finds the module under `np`. Ranges are
    `line:column:end line:end column[:definition start line:definition end line]` joined by `;`, lines and
    byte columns 1-based, end columns exclusive, as codenav's symbol index stores them.
    """

    __tablename__ = "codenav_scip_occurrences"
    __table_args__ = (
        Index("ix_codenav_scip_occurrences_document_name", "document_id", "name"),
        # By symbol first: the definition and references of a symbol in its upload, and in other repositories'.
        Index("ix_codenav_scip_occurrences_symbol_upload", "symbol", "upload_id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    upload_id: Mapped[int] = mapped_column(ForeignKey("codenav_scip_uploads.id", ondelete="CASCADE"))
    document_id: Mapped[int] = mapped_column(ForeignKey("codenav_scip_documents.id", ondelete="CASCADE"))
    # The SCIP symbol string (`scip-python python app 0.1 `app.util`/helper().`, or `local 3` within a document).
    symbol: Mapped[str] = mapped_column(String(1024))
    name: Mapped[str] = mapped_column(String(255))
    # codenav's kind (function, class, ...) from SymbolInformation.kind or the descriptor's suffix.
    kind: Mapped[str] = mapped_column(String(40))
    # Dotted enclosing types and terms of the symbol (`Config` of `Config#load().`), "" at module level.
    container: Mapped[str] = mapped_column(Text)
    definitions: Mapped[str] = mapped_column(Text)
    references: Mapped[str] = mapped_column(Text)


class AutoIndexFailure(Base):
    """The last failed auto-indexing job of one commit (removed when a later job of it succeeds).

    It also keeps the commit from being queued again after every index generation while the same indexers are
    configured (`indexers`); `codewell codeintel autoindex` retries by hand.
    """

    __tablename__ = "codenav_autoindex_failures"
    __table_args__ = (UniqueConstraint("repo_id", "commit", name="uq_codenav_autoindex_failures_repo_id_commit"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    repo_id: Mapped[int] = mapped_column(ForeignKey("repos.id", ondelete="CASCADE"))
    commit: Mapped[str] = mapped_column(String(40))
    # The indexer commands of the job ("python=/opt/scip/bin/scip-python"), to retry when an admin changes them.
    indexers: Mapped[str] = mapped_column(Text)
    # The indexer's exit code; None when it did not exit by itself (timeout) or never ran (nothing produced).
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    reason: Mapped[str] = mapped_column(String(500))
    # The last lines of the indexer's stderr (the job's temporary paths replaced by `.`).
    stderr_tail: Mapped[str] = mapped_column(Text)
    failed_at: Mapped[datetime] = mapped_column(UTCDateTime)
