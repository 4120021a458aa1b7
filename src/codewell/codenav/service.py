"""CodeNavService: go_to_definition and find_references over the symbol index of a repository revision.

A facade: it resolves the repository through RepoService (`resolve` checks that the actor may read it, and an
unreadable repository is NotFound exactly like a missing one), asks an uploaded SCIP index first
(codenav/precise.py), and otherwise hands the question to the resolver of the file's language
(codenav/navigation.py holds the shared rules; javascript.py and python_nav.py add their languages'). Each
(repository, commit) is extracted once into an index file (builder.py writes it, store.py reads it): by
`index_revision` when a revision is indexed, or lazily on first use. It is also search's SymbolSource.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Self

import pygit2

from codewell.codenav.builder import build_index
from codewell.codenav.javascript import JavaScriptResolver
from codewell.codenav.navigation import DEFAULT_LIMIT, MAX_LIMIT, Resolver, Target, split_symbol
from codewell.codenav.precise import PreciseService
from codewell.codenav.python_nav import PythonResolver
from codewell.codenav.results import Definitions, References
from codewell.codenav.store import Indexed, OpenIndexes, SymbolRow, open_index
from codewell.core.actors import Actor
from codewell.core.errors import InvalidInput, NotFound
from codewell.core.processes import process_pool, stop_pool
from codewell.repos.service import Repo, RepoService, clean_path
from codewell.search.service import DefinitionSpans, SearchService, SymbolMatch

if TYPE_CHECKING:
    from codewell.runtime import Runtime

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "CodeNavService", "index_revision"]

log = logging.getLogger(__name__)

# Files whose lines CodeNavService keeps (per commit; callers never modify the lists).
_KEPT_FILES = 256
_KEPT_CHARACTERS = 16_000_000


class CodeNavService:
    """Code navigation: symbols per revision, definitions and references, across readable repositories."""

    def __init__(self, runtime: Runtime, root: Path) -> None:
        self.runtime = runtime
        self.root = root
        self._guard = threading.Lock()
        # Per-request readers (search's ranking and type:symbol) reuse open index handles.
        self._open = OpenIndexes()
        self._locks: dict[tuple[int, str], threading.Lock] = {}
        self._workers: ProcessPoolExecutor | None = None
        # A commit's file lines never change: the few files a question reads again and again (an importer's
        # `require` lines, a module's `module.exports`) are kept, most recently used last.
        self._texts: OrderedDict[tuple[int, str, str], list[str]] = OrderedDict()
        self._texts_size = 0
        javascript = JavaScriptResolver(self)
        self._resolvers: dict[str, Resolver] = {
            "javascript": javascript,
            "typescript": javascript,
            "python": PythonResolver(self),
        }
        self._generic = Resolver(self)

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        # Symbol tables are immutable per revision and read by key, like mirrors: on the shared volume, the
        # searcher that indexes a repository writes them and every web replica navigates with them.
        return cls(runtime, runtime.settings.shared_dir / "codenav")

    @property
    def repos(self) -> RepoService:
        return self.runtime.get(RepoService)

    def close(self) -> None:
        with self._guard:
            if self._workers is not None:
                stop_pool(self._workers)
                self._workers = None

    def _pool(self) -> ProcessPoolExecutor | None:
        cpus = os.cpu_count() or 1
        if cpus < 2:
            return None
        with self._guard:
            if self._workers is None:
                self._workers = process_pool(cpus)
            return self._workers

    def index_file(self, repo: Repo, commit: str) -> Path:
        return self.root / str(repo.id) / f"{commit}.sqlite"

    def index_revision(self, repo: Repo, commit: str) -> Indexed:
        """The index of `commit` of `repo`, extracted now unless it exists (one build at a time per revision)."""
        path = self.index_file(repo, commit)
        found = open_index(path)
        if found is not None:
            return found
        with self._guard:
            lock = self._locks.setdefault((repo.id, commit), threading.Lock())
        with lock:
            found = open_index(path)
            if found is not None:
                return found
            # The files of a commit search just indexed come from its shard (no inflating every blob again).
            files = self.runtime.get(SearchService).revision_files(repo, commit)
            stats = build_index(path, repo.mirror_path, commit, {"repo": repo.name}, self._pool(), files)
            log.info(
                "symbols indexed",
                extra={
                    "repo": repo.name,
                    "commit": commit,
                    "files": stats.parsed,
                    "bytes": stats.parsed_bytes,
                    "skipped": len(stats.skipped),
                    "seconds": round(stats.seconds, 3),
                },
            )
        indexed = open_index(path)
        if indexed is None:
            raise RuntimeError(f"symbol index {path} unreadable right after it was built")
        return indexed

    def drop(self, repo: Repo) -> None:
        """Forget every symbol index of `repo` (removal listener)."""
        shutil.rmtree(self.root / str(repo.id), ignore_errors=True)

    def on_indexed(self, repo: Repo, branches: dict[str, str]) -> None:
        """Search index listener: extract the symbols of every indexed branch commit, then drop the others.

        Runs in the indexing thread (big revisions go to the process pool), so no query waits for it. Index
        files of commits no branch points at any more are removed: those of the previous generation, and
        those built on demand for other revisions (a cache: the next request for such a revision rebuilds it).
        """
        keep = set(branches.values())
        for commit in sorted(keep):
            self.index_revision(repo, commit).close()
        folder = self.root / str(repo.id)
        for path in folder.glob("*.sqlite"):
            if path.stem not in keep:
                path.unlink(missing_ok=True)

    def symbols(
        self, repo: Repo, commit: str, match: Callable[[str], bool], include: Callable[[str], bool], limit: int
    ) -> list[SymbolMatch] | None:
        """Definitions in `commit` whose name satisfies `match` and path `include` (SymbolSource for search).

        Locals of functions are left out. Only reads an existing index (None without one): a search never
        waits for an extraction. When more
        than `limit` definitions match, the shortest names are kept: they are the closest to what was typed.
        """
        with self._open.use(self.index_file(repo, commit)) as index:
            if index is None:
                return None
            names = sorted((n for n in index.symbol_names() if match(n)), key=lambda n: (len(n), n))
            rows: list[SymbolRow] = []
            for name in names:
                rows.extend(r for r in index.outer_symbols_named(name) if include(r.path))
                if len(rows) >= limit:
                    break
        lines: dict[str, list[str]] = {}
        out: list[SymbolMatch] = []
        for r in rows[:limit]:
            s = r.symbol
            text = lines.setdefault(r.path, self.lines(repo, commit, r.path))
            line = text[s.line - 1] if 0 < s.line <= len(text) else ""
            end = s.end_column - 1 if s.end_line == s.line else len(line.encode("utf-8"))
            out.append(SymbolMatch(r.path, s.name, s.kind, s.container, s.line, s.column - 1, end, line))
        return out

    def known_names(self, repo: Repo, commit: str, names: Iterable[str]) -> set[str] | None:
        """Which of `names` are defined somewhere in `commit` (None without an index: pages never wait for one)."""
        with self._open.use(self.index_file(repo, commit)) as index:
            return None if index is None else index.defined_among(names)

    def definitions(self, repo: Repo, commit: str, paths: Sequence[str]) -> DefinitionSpans | None:
        """Byte spans of the names defined in each parsed file of `paths` (SymbolSource for search ranking)."""
        with self._open.use(self.index_file(repo, commit)) as index:
            if index is None:
                return None
            spans = index.definition_spans(paths)
        return {path: [(line, col - 1, end - 1) for line, col, end in found] for path, found in spans.items()}

    def go_to_definition(
        self, actor: Actor, repo: str, path: str, symbol: str, revision: str | None = None
    ) -> Definitions:
        """Where `symbol`, as used in `path`, is defined: same file, imports, same repository, other repositories."""
        name, qualifier = split_symbol(symbol)
        # Precise first: an uploaded SCIP index of this commit that covers the file (codenav/precise.py).
        precise = self.runtime.get(PreciseService).definitions(actor, repo, path, symbol, name, qualifier, revision)
        if precise is not None:
            return precise
        target = self._target(actor, repo, path, revision)
        try:
            return self._resolver(target.queries).definitions(actor, target, symbol, name, qualifier)
        finally:
            target.index.close()

    def find_references(
        self,
        actor: Actor,
        repo: str,
        path: str,
        symbol: str,
        revision: str | None = None,
        limit: int = DEFAULT_LIMIT,
    ) -> References:
        """References to `symbol` defined in `path`, in the files that can see it, grouped by file and ranked."""
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT} (got {limit})", hint="the default is 10")
        name, qualifier = split_symbol(symbol)
        precise = self.runtime.get(PreciseService).references(
            actor, repo, path, symbol, name, qualifier, revision, limit
        )
        if precise is not None:
            return precise
        target = self._target(actor, repo, path, revision)
        try:
            return self._resolver(target.queries).references(actor, target, symbol, name, qualifier, limit)
        finally:
            target.index.close()

    def _target(self, actor: Actor, repo: str, path: str, revision: str | None) -> Target:
        clean = clean_path(path, required=True)
        resolved = self.repos.resolve(actor, repo, revision)
        index = self.index_revision(resolved.repo, resolved.commit)
        row = index.file(clean)
        if row is None:
            if index.is_directory(clean):
                raise InvalidInput(
                    f"{clean!r} is a directory, not a file",
                    hint="give the file that uses (or defines) the symbol; list_files shows a directory's files",
                )
            raise NotFound(
                f"file {clean!r} not found in {repo}@{resolved.revision}",
                hint="list_files shows what a directory contains",
            )
        return Target(
            resolved.repo, resolved.revision, resolved.commit, clean, index, row.language, row.queries, row.skipped
        )

    def _resolver(self, queries: str) -> Resolver:
        """The rules of a file's language (its queries name): JavaScript/TypeScript, Python, or the shared ones."""
        return self._resolvers.get(queries, self._generic)

    def lines(self, repo: Repo, commit: str, path: str) -> list[str]:
        """A file's lines at a commit, as tree-sitter counts them (kept for the next questions)."""
        key = (repo.id, commit, path)
        with self._guard:
            kept = self._texts.get(key)
            if kept is not None:
                self._texts.move_to_end(key)
                return kept
        lines = self._read_lines(repo, commit, path)
        size = sum(map(len, lines))
        if size > _KEPT_CHARACTERS // 8:
            return lines  # a huge file is read again rather than crowding out the others
        with self._guard:
            if key not in self._texts:
                self._texts[key] = lines
                self._texts_size += size
            while len(self._texts) > _KEPT_FILES or self._texts_size > _KEPT_CHARACTERS:
                _, dropped = self._texts.popitem(last=False)
                self._texts_size -= sum(map(len, dropped))
        return lines

    def _read_lines(self, repo: Repo, commit: str, path: str) -> list[str]:
        try:
            mirror = pygit2.Repository(str(repo.mirror_path))
            blob = mirror[commit].peel(pygit2.Tree)[path]
        except (KeyError, ValueError, pygit2.GitError):
            return []
        if not isinstance(blob, pygit2.Blob):
            return []
        # Lines as tree-sitter counts them: split at \n only (str.splitlines also splits at form feeds and others).
        lines = blob.data.decode("utf-8", "replace").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return [line.removesuffix("\r") for line in lines]


def index_revision(runtime: Runtime, repo: Repo, commit: str) -> None:
    """Hook for "a repository revision was indexed": extract its symbols now (the search indexer calls this)."""
    runtime.get(CodeNavService).index_revision(repo, commit).close()
