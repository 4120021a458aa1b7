"""Precise code navigation: SCIP index uploads per (repository, commit), and the answers read from them.

A CI pipeline (or `codewell codeintel upload`) sends the `index.scip` a SCIP indexer wrote for one commit.
The upload is parsed whole (codenav/scip.py) before anything is written, then stored in one transaction
that also removes the previous upload of the same commit: a bad index leaves nothing behind, and a re-upload
replaces the old one atomically. What is kept, per document and symbol, is the identifier text at the
occurrences (read from the mirror at that commit, so that `symbol` arguments match what the file says) and
the ranges of its definitions and other occurrences (codenav/models.py).

go_to_definition and find_references ask here first (`definitions`, `references`): when the resolved commit has
an upload whose documents include the file, and the file has an occurrence under the name asked for, the
answer comes from the SCIP symbol (labelled `precise`). Otherwise they return None and the syntactic path
answers as before. Global SCIP symbols name their package and version, so a symbol defined in another
repository's upload (the latest upload of each repository the caller may read) is found by the same string:
that is the cross-repository step, and it costs one indexed query.
"""

from __future__ import annotations

import logging
import posixpath
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import pygit2
from sqlalchemy import delete, func, insert, select, update

from codewell.authz import Action, ensure
from codewell.codenav import scip
from codewell.codenav.models import ScipDocument, ScipOccurrence, ScipUpload
from codewell.codenav.results import PRECISE, Definition, Definitions, ReferenceFile, References
from codewell.core.actors import Actor
from codewell.core.errors import InvalidInput, NotFound
from codewell.repos.service import Repo, RepoRef, RepoService, clean_path

if TYPE_CHECKING:
    from codewell.runtime import Runtime

__all__ = ["AUTO", "UPLOADED", "PreciseService", "UploadInfo", "UploadSummary", "format_size"]

log = logging.getLogger(__name__)

SNIPPET_LINES = 8
MAX_CANDIDATES = 5
# Column limits of codenav_scip_occurrences (PostgreSQL enforces them; longer values are left out and counted).
_MAX_SYMBOL = 1024
_MAX_NAME = 255
_SCOPES = ("same file", "same package", "same repository", "other repository")
# Where a hit lives: the repository asked about, or another readable one (its cheap reference suffices).
_Owner = Repo | RepoRef
# Where an upload came from (ScipUpload.source).
UPLOADED = "upload"
AUTO = "auto"


def format_size(size: int) -> str:
    """A byte count for error messages: "512 MB", "64 KB", "900 bytes" (limits below 1 MB happen in tests)."""
    if size >= 1 << 20:
        return f"{size / (1 << 20):.4g} MB"
    if size >= 1 << 10:
        return f"{size / (1 << 10):.4g} KB"
    return f"{size} bytes"


@dataclass(frozen=True, slots=True)
class UploadSummary:
    repo: str
    commit: str
    tool: str
    documents: int
    occurrences: int
    rows: int
    replaced: bool
    # Documents whose path is not a file of the commit (their occurrences are kept; names come from symbols).
    missing_files: list[str]
    skipped_occurrences: int  # malformed ranges, empty or over-long symbols
    seconds: float


@dataclass(frozen=True, slots=True)
class UploadInfo:
    commit: str
    tool: str
    uploaded_at: datetime
    documents: int
    source: str  # UPLOADED or AUTO


@dataclass(frozen=True, slots=True)
class _Site:
    line: int
    column: int
    end_line: int
    end_column: int
    def_line: int
    def_end_line: int


@dataclass(frozen=True, slots=True)
class _Row:
    upload_id: int
    document_id: int
    path: str
    language: str
    symbol: str
    name: str
    kind: str
    container: str
    definitions: list[_Site]
    references: list[_Site]


@dataclass(frozen=True, slots=True)
class _Upload:
    id: int
    repo_id: int
    commit: str
    tool: str


def _pack(sites: Iterable[_Site]) -> str:
    return ";".join(f"{s.line}:{s.column}:{s.end_line}:{s.end_column}:{s.def_line}:{s.def_end_line}" for s in sites)


def _unpack(text: str) -> list[_Site]:
    return [_Site(*(int(v) for v in item.split(":"))) for item in text.split(";") if item]


def _read_lines(mirror: Path | pygit2.Repository, commit: str, path: str) -> list[str] | None:
    """The lines of `path` at `commit` (split at \\n only, as codenav counts lines), or None when absent.

    `mirror` may be an opened repository: an upload reads every document of the commit through one.
    """
    try:
        repository = mirror if isinstance(mirror, pygit2.Repository) else pygit2.Repository(str(mirror))
        blob = repository[commit].peel(pygit2.Tree)[path]
    except (KeyError, ValueError, pygit2.GitError):
        return None
    if not isinstance(blob, pygit2.Blob):
        return None
    lines = blob.data.decode("utf-8", "replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _site(rng: Iterable[int], enclosing: Iterable[int], lines: list[str] | None, encoding: int) -> _Site | None:
    """A SCIP range ([line, start, end] or [line, start, end line, end], 0-based) as 1-based lines and byte columns."""
    r = list(rng)
    if len(r) == 3:
        r = [r[0], r[1], r[0], r[2]]
    if len(r) != 4 or min(r) < 0 or (r[2], r[3]) < (r[0], r[1]):
        return None

    def column(line: int, offset: int) -> int:
        if lines is None or line >= len(lines):
            return offset + 1
        return scip.byte_column(lines[line], offset, encoding) + 1

    e = list(enclosing)
    if len(e) == 3:
        e = [e[0], e[1], e[0], e[2]]
    def_line, def_end = (e[0], e[2]) if len(e) == 4 and 0 <= e[0] <= r[0] <= e[2] else (r[0], r[2])
    return _Site(r[0] + 1, column(r[0], r[1]), r[2] + 1, column(r[2], r[3]), def_line + 1, def_end + 1)


def _text_at(lines: list[str] | None, site: _Site) -> str:
    if lines is None or site.line != site.end_line or site.line > len(lines):
        return ""
    data = lines[site.line - 1].encode("utf-8")
    return data[site.column - 1 : site.end_column - 1].decode("utf-8", "replace")


def _qualifier_matches(path: list[str], qualifier: list[str]) -> bool:
    return bool(qualifier) and path[-len(qualifier) :] == qualifier


def _rank(row: _Row) -> tuple[bool, int]:
    """Of the symbols a file names so, module- and class-level ones first (a parameter or a local is what the name
    means only inside one function), then the most used in the file."""
    parsed = scip.parse_symbol(row.symbol)
    inner = parsed is None or parsed.local or (bool(parsed.descriptors) and parsed.descriptors[-1].suffix == "()")
    return inner, -(len(row.definitions) + len(row.references))


class PreciseService:
    """SCIP uploads: store them (site admins), and answer go_to_definition / find_references from them."""

    def __init__(self, runtime: Runtime, max_bytes: int | None = None) -> None:
        self.runtime = runtime
        self._max_bytes = max_bytes

    @property
    def max_bytes(self) -> int:
        """The size limit of one index: site config `codeIntel.maxUploadBytes`, read per call (it may change)."""
        return self._max_bytes if self._max_bytes is not None else self.runtime.config.code_intel_max_upload_bytes

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    @property
    def repos(self) -> RepoService:
        return self.runtime.get(RepoService)

    # --- uploads ---------------------------------------------------------------------------------------

    def upload(self, actor: Actor, repo: str, commit: str, data: bytes, *, source: str = UPLOADED) -> UploadSummary:
        """Store the SCIP index `data` for `commit` of `repo`, replacing an earlier upload of that commit.

        `source` records who sent it: UPLOADED (CLI, REST) or AUTO (an auto-indexing job, through this same path).
        """
        # Site admins only (they read every repository, so this refusal tells nothing about which exist).
        ensure(actor, Action.REPOS_MANAGE)
        if not commit.strip():
            raise InvalidInput("commit is required", hint="give the commit the index was built from, e.g. $GIT_COMMIT")
        started = time.monotonic()
        self.repos.get(actor, repo)  # a missing repository: repos' own NotFound, unchanged
        try:
            resolved = self.repos.resolve(actor, repo, commit.strip())
        except NotFound as exc:
            # CI often uploads right after pushing, before codewell has fetched the commit.
            raise NotFound(
                exc.message,
                hint="upload indexes of commits the mirror has: sync the repository first "
                "(codewell repos sync NAME, or POST /.api/repos/NAME/-/sync), then upload again",
            ) from None
        limit = self.max_bytes
        if len(data) > limit:
            raise InvalidInput(
                f"the SCIP index is {format_size(len(data))}, over the {format_size(limit)} limit of one upload",
                hint="index a smaller part of the repository, or raise the site config option codeIntel.maxUploadBytes",
            )
        index = scip.parse_index(data, limit)
        tool = index.metadata.tool_info
        tool_text = f"{tool.name} {tool.version}".strip()[:200] or "unknown indexer"
        kinds: dict[str, int] = {s.symbol: s.kind for s in index.external_symbols if s.kind}
        # Every document path is checked before anything is written (a later duplicate of a path is ignored).
        documents: dict[str, Any] = {}
        for document in index.documents:
            kinds.update((s.symbol, s.kind) for s in document.symbols if s.kind)
            try:
                path = clean_path(document.relative_path, required=True)
            except InvalidInput as exc:
                raise InvalidInput(
                    f"document path {document.relative_path[:200]!r} in the SCIP index: {exc.message}",
                    hint="index from the repository root (relative_path is relative to it)",
                ) from None
            documents.setdefault(path, document)
        stats = self._store(resolved.repo, resolved.commit, tool_text, len(data), documents, kinds, source)
        summary = UploadSummary(
            resolved.repo.name,
            resolved.commit,
            tool_text,
            len(documents),
            *stats,
            time.monotonic() - started,
        )
        log.info(
            "scip index uploaded",
            extra={"repo": summary.repo, "commit": summary.commit, "documents": summary.documents},
        )
        return summary

    @staticmethod
    def _rows(document: Any, lines: list[str] | None, kinds: dict[str, int]) -> tuple[list[dict[str, Any]], int]:
        """One row per (symbol, name) of a document, and how many occurrences were left out."""
        grouped: dict[tuple[str, str], tuple[list[_Site], list[_Site]]] = {}
        bad = 0
        for occurrence in document.occurrences:
            symbol = occurrence.symbol
            site = _site(occurrence.range, occurrence.enclosing_range, lines, document.position_encoding)
            if site is None or not symbol or len(symbol) > _MAX_SYMBOL:
                bad += 1
                continue
            parsed = scip.parse_symbol(symbol)
            name = _text_at(lines, site) or (parsed.name if parsed else "")
            if len(name) > _MAX_NAME:
                bad += 1
                continue
            definitions, references = grouped.setdefault((symbol, name), ([], []))
            if occurrence.symbol_roles & scip.DEFINITION:
                definitions.append(site)
            else:
                references.append(site)
        rows = []
        for (symbol, name), (definitions, references) in grouped.items():
            parsed = scip.parse_symbol(symbol)
            kind = scip.KINDS.get(kinds.get(symbol, 0)) or (parsed.kind() if parsed else "variable")
            rows.append(
                {
                    "symbol": symbol,
                    "name": name,
                    "kind": kind,
                    "container": parsed.container if parsed else "",
                    "definitions": _pack(definitions),
                    "references": _pack(references),
                }
            )
        return rows, bad

    def _store(
        self,
        repo: Repo,
        commit: str,
        tool: str,
        size: int,
        documents: dict[str, Any],
        kinds: dict[str, int],
        source: str,
    ) -> tuple[int, int, bool, list[str], int]:
        """Write the upload in one transaction, replacing the commit's earlier one; one document's rows in memory
        at a time. (occurrences, rows, replaced, paths not in the commit, occurrences left out)."""
        mirror = pygit2.Repository(str(repo.mirror_path))
        occurrences = row_count = skipped = 0
        missing: list[str] = []
        with self.runtime.db.session() as session:
            same_commit = (ScipUpload.repo_id == repo.id, ScipUpload.commit == commit)
            replaced = session.execute(select(ScipUpload.id).where(*same_commit)).first() is not None
            session.execute(delete(ScipUpload).where(*same_commit))
            upload_id = session.execute(
                insert(ScipUpload)
                .values(
                    repo_id=repo.id,
                    commit=commit,
                    tool=tool,
                    uploaded_at=datetime.now(UTC),
                    size=size,
                    documents=len(documents),
                    occurrences=0,
                    source=source,
                )
                .returning(ScipUpload.id)
            ).scalar_one()
            for path, document in documents.items():
                lines = _read_lines(mirror, commit, path)
                if lines is None:
                    missing.append(path)
                    lines = document.text.split("\n") if document.text else None
                rows, bad = self._rows(document, lines, kinds)
                skipped += bad
                occurrences += len(document.occurrences) - bad
                row_count += len(rows)
                document_id = session.execute(
                    insert(ScipDocument)
                    .values(upload_id=upload_id, path=path, language=document.language.lower()[:100])
                    .returning(ScipDocument.id)
                ).scalar_one()
                if rows:
                    session.execute(
                        insert(ScipOccurrence),
                        [{**row, "upload_id": upload_id, "document_id": document_id} for row in rows],
                    )
            session.execute(update(ScipUpload).where(ScipUpload.id == upload_id).values(occurrences=occurrences))
        return occurrences, row_count, replaced, missing, skipped

    def drop(self, repo: Repo) -> None:
        """Forget every upload of `repo` (removal listener; the foreign keys cascade to documents and rows)."""
        with self.runtime.db.session() as session:
            session.execute(delete(ScipUpload).where(ScipUpload.repo_id == repo.id))

    # --- reading ---------------------------------------------------------------------------------------

    def _upload(self, repo_id: int, commit: str) -> _Upload | None:
        with self.runtime.db.session() as session:
            row = session.execute(
                select(ScipUpload.id, ScipUpload.repo_id, ScipUpload.commit, ScipUpload.tool).where(
                    ScipUpload.repo_id == repo_id, ScipUpload.commit == commit
                )
            ).first()
        return None if row is None else _Upload(*row)

    def _named(self, upload: _Upload, path: str, name: str) -> list[_Row] | None:
        """Rows of `path` under `name` (None when the upload has no such document)."""
        with self.runtime.db.session() as session:
            document = session.execute(
                select(ScipDocument.id, ScipDocument.language).where(
                    ScipDocument.upload_id == upload.id, ScipDocument.path == path
                )
            ).first()
            if document is None:
                return None
            rows = session.execute(
                select(ScipOccurrence).where(ScipOccurrence.document_id == document.id, ScipOccurrence.name == name)
            ).scalars()
            return [self._row(r, path, document.language) for r in rows]

    @staticmethod
    def _row(r: ScipOccurrence, path: str, language: str) -> _Row:
        return _Row(
            r.upload_id,
            r.document_id,
            path,
            language,
            r.symbol,
            r.name,
            r.kind,
            r.container,
            _unpack(r.definitions),
            _unpack(r.references),
        )

    def _symbol_rows(self, upload_ids: list[int], symbol: str, document_id: int | None) -> list[_Row]:
        """Every row of `symbol` in the uploads (of one document for a `local` symbol, which is file-scoped)."""
        if not upload_ids:
            return []
        query = (
            select(ScipOccurrence, ScipDocument.path, ScipDocument.language)
            .join(ScipDocument, ScipDocument.id == ScipOccurrence.document_id)
            .where(ScipOccurrence.symbol == symbol, ScipOccurrence.upload_id.in_(upload_ids))
        )
        if document_id is not None:
            query = query.where(ScipOccurrence.document_id == document_id)
        with self.runtime.db.session() as session:
            return [self._row(r, path, language) for r, path, language in session.execute(query)]

    def _other_uploads(self, actor: Actor, current: Repo, symbol: str) -> dict[int, tuple[_Owner, _Upload]]:
        """The latest upload of each other readable repository that has `symbol` (upload id → repo, upload)."""
        # The latest upload per repository does not depend on the other repositories: find them for every
        # repository holding the symbol (few), then keep the readable ones, instead of passing thousands of
        # readable ids into the query or building a ref per readable repository.
        with self.runtime.db.session() as session:
            holders = select(ScipOccurrence.upload_id).where(ScipOccurrence.symbol == symbol).distinct()
            latest = (
                select(func.max(ScipUpload.id))
                .where(ScipUpload.id.in_(holders), ScipUpload.repo_id != current.id)
                .group_by(ScipUpload.repo_id)
            )
            rows = session.execute(
                select(ScipUpload.id, ScipUpload.repo_id, ScipUpload.commit, ScipUpload.tool).where(
                    ScipUpload.id.in_(latest)
                )
            ).all()
        refs = self.repos.refs_of(actor, {row[1] for row in rows})
        return {row[0]: (refs[row[1]], _Upload(*row)) for row in rows if row[1] in refs}

    # --- answers ---------------------------------------------------------------------------------------

    def _start(
        self, actor: Actor, repo: str, path: str, revision: str | None, name: str
    ) -> tuple[Repo, str, _Upload, list[_Row]] | None:
        clean = clean_path(path, required=True)
        found = self.repos.get(actor, repo)
        # Most repositories have no upload: one indexed query before resolving the revision in the mirror.
        with self.runtime.db.session() as session:
            if session.execute(select(ScipUpload.id).where(ScipUpload.repo_id == found.id).limit(1)).first() is None:
                return None
        resolved = self.repos.resolve(actor, repo, revision)
        upload = self._upload(resolved.repo.id, resolved.commit)
        if upload is None:
            return None
        rows = self._named(upload, clean, name)
        if not rows:
            return None
        return resolved.repo, resolved.commit, upload, rows

    @staticmethod
    def _qualified(rows: list[_Row], qualifier: list[str]) -> list[_Row]:
        if not qualifier:
            return rows
        matching = []
        for row in rows:
            parsed = scip.parse_symbol(row.symbol)
            if parsed is not None and _qualifier_matches(parsed.path, qualifier):
                matching.append(row)
        return matching or rows

    def definitions(
        self, actor: Actor, repo: str, path: str, symbol: str, name: str, qualifier: list[str], revision: str | None
    ) -> Definitions | None:
        """go_to_definition from an uploaded SCIP index, or None when there is none for this file and name."""
        start = self._start(actor, repo, path, revision, name)
        if start is None:
            return None
        current, commit, upload, rows = start
        hits: list[tuple[_Owner, str, _Row, _Site, str]] = []
        seen: set[str] = set()
        for row in sorted(self._qualified(rows, qualifier), key=_rank):
            if row.symbol in seen:
                continue
            seen.add(row.symbol)
            local = row.symbol.startswith("local ")
            found = self._symbol_rows([upload.id], row.symbol, row.document_id if local else None)
            owners: dict[int, tuple[_Owner, _Upload]] = {upload.id: (current, upload)}
            reason = f"SCIP index ({upload.tool})"
            if not any(r.definitions for r in found) and not local:
                owners = self._other_uploads(actor, current, row.symbol)
                found = [r for r in self._symbol_rows(list(owners), row.symbol, None) if r.definitions]
                reason = f"SCIP index ({upload.tool}), defined in another repository's upload"
            for r in found:
                owner, owner_upload = owners[r.upload_id]
                hits += [(owner, owner_upload.commit, r, site, reason) for site in r.definitions]
        if not hits:
            return None
        texts: dict[tuple[str, str, str], list[str]] = {}
        shown = []
        for owner, owner_commit, r, site, reason in hits[:MAX_CANDIDATES]:
            key = (owner.name, owner_commit, r.path)
            if key not in texts:
                texts[key] = _read_lines(owner.mirror_path, owner_commit, r.path) or []
            shown.append(self._definition(owner, owner_commit, r, site, reason, texts[key]))
        notes = [f"{len(hits)} candidate definitions, best first."] if len(hits) > 1 else []
        return Definitions(current.name, clean_path(path, required=True), symbol, commit, shown, notes)

    @staticmethod
    def _definition(
        repo: _Owner, commit: str, row: _Row, site: _Site, reason: str, text: list[str] | None = None
    ) -> Definition:
        if text is None:
            text = _read_lines(repo.mirror_path, commit, row.path) or []
        last = min(site.def_end_line, site.def_line + SNIPPET_LINES - 1)
        snippet = [(n, text[n - 1][:256]) for n in range(site.def_line, last + 1) if n - 1 < len(text)]
        return Definition(
            repo.name,
            row.path,
            commit,
            row.language,
            row.name or (scip.parse_symbol(row.symbol) or scip.ParsedSymbol(True, "", ())).name,
            row.kind,
            row.container,
            site.line,
            site.column,
            site.end_line,
            site.end_column,
            site.def_line,
            site.def_end_line,
            PRECISE,
            reason,
            snippet,
        )

    def references(
        self,
        actor: Actor,
        repo: str,
        path: str,
        symbol: str,
        name: str,
        qualifier: list[str],
        revision: str | None,
        limit: int,
    ) -> References | None:
        """find_references from an uploaded SCIP index, or None when `path` has no SCIP definition of the name."""
        start = self._start(actor, repo, path, revision, name)
        if start is None:
            return None
        current, commit, upload, rows = start
        defined = [r for r in self._qualified(rows, qualifier) if r.definitions]
        if not defined:
            return None
        # Of several symbols defined under the name in the file, a module-level one is meant unless qualified.
        defined.sort(key=lambda r: (r.kind in ("method", "field"), r.container.count(".") + bool(r.container)))
        chosen = defined[0]
        site = chosen.definitions[0]
        definition = self._definition(current, commit, chosen, site, f"SCIP index ({upload.tool})")
        local = chosen.symbol.startswith("local ")
        # (scope, repository, commit, path) → places; a file's rows (one per name) merge into one entry.
        places: dict[tuple[int, str, str, str], set[tuple[int, int]]] = {}
        owners: dict[str, _Owner] = {current.name: current}
        here = posixpath.dirname(chosen.path)
        for r in self._symbol_rows([upload.id], chosen.symbol, chosen.document_id if local else None):
            scope = 0 if r.path == chosen.path else 1 if posixpath.dirname(r.path) == here else 2
            spots = places.setdefault((scope, current.name, commit, r.path), set())
            spots.update((s.line, s.column) for s in [*r.references, *r.definitions])
            if r.document_id == chosen.document_id:
                spots.discard((site.line, site.column))  # the definition itself
        if not local:
            others = self._other_uploads(actor, current, chosen.symbol)
            for r in self._symbol_rows(list(others), chosen.symbol, None):
                owner, owner_upload = others[r.upload_id]
                owners[owner.name] = owner
                spots = places.setdefault((3, owner.name, owner_upload.commit, r.path), set())
                spots.update((s.line, s.column) for s in [*r.references, *r.definitions])
        found = [(*key, sorted(spots)) for key, spots in places.items() if spots]
        found.sort(key=lambda f: (f[0], f[1], f[3]))
        total = sum(len(f[4]) for f in found)
        files: list[ReferenceFile] = []
        shown = 0
        for scope, owner_name, owner_commit, file_path, ordered in found:
            if shown >= limit:
                break
            take = ordered[: limit - shown]
            text = _read_lines(owners[owner_name].mirror_path, owner_commit, file_path) or []
            lines = [(line, col, text[line - 1][:256] if line - 1 < len(text) else "") for line, col in take]
            files.append(ReferenceFile(owner_name, file_path, owner_commit, _SCOPES[scope], lines, len(ordered)))
            shown += len(take)
        notes: list[str] = []
        if total > shown:
            notes.append(
                f"({total - shown} more references not shown; showing {shown} of {total}. Raise limit to see more.)"
            )
        return References(
            current.name, definition.path, symbol, commit, definition, files, total, shown, PRECISE, False, notes
        )

    def uploads(self, actor: Actor, repo: str) -> list[UploadInfo]:
        """Every upload of a readable repository, newest first."""
        found = self.repos.get(actor, repo)
        with self.runtime.db.session() as session:
            rows = session.execute(
                select(
                    ScipUpload.commit,
                    ScipUpload.tool,
                    ScipUpload.uploaded_at,
                    ScipUpload.documents,
                    ScipUpload.source,
                )
                .where(ScipUpload.repo_id == found.id)
                .order_by(ScipUpload.id.desc())
            ).all()
        return [UploadInfo(*row) for row in rows]

    def has_upload(self, repo: Repo, commit: str) -> bool:
        """Whether `commit` of `repo` has an upload (of either source); for the auto-indexing queue."""
        return self._upload(repo.id, commit) is not None
