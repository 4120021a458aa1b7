"""Go to definition and find references over the symbol index of one revision: the steps every language shares.

`Resolver` answers a question about one file (`Target`: repository, revision, path, its index) with the rules
that hold for any language: the file's own definitions, then what its imports name (resolve.py), the same
package, other repositories, names anywhere in the repository; and for references the files that can see the
definition and the occurrences there that can mean it. A language whose modules or types need more rules
subclasses it and fills in the hooks (`_first`, `_reexported`, `_reference_occurrences`, ...): codenav/javascript.py
(CommonJS, barrels, JSDoc types) and codenav/python_nav.py (re-exports, receiver types). CodeNavService
(service.py) is the facade that resolves the repository, picks the resolver of the file's language and keeps the
indexes.
"""

from __future__ import annotations

import difflib
import io
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Protocol

import pygit2

from codewell.codenav.extract import Symbol
from codewell.codenav.jsdoc import JsDocTypes
from codewell.codenav.languages import grammar_of
from codewell.codenav.python_refs import ReceiverTypes
from codewell.codenav.resolve import module_files, python_module_name
from codewell.codenav.results import (
    SEARCH_BASED,
    SYNTACTIC,
    Definition,
    Definitions,
    ReferenceFile,
    References,
)
from codewell.codenav.store import ImportRow, Indexed, SymbolRow
from codewell.core.actors import Actor
from codewell.core.errors import InvalidInput, NotFound
from codewell.repos.service import Repo, RepoService

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "Hit", "Host", "Resolver", "Target", "split_symbol"]

DEFAULT_LIMIT = 10
MAX_LIMIT = 1000
MAX_CANDIDATES = 5
SNIPPET_LINES = 8
# Cross-repository lookups build the other repositories' indexes on demand only up to this many repositories.
MAX_PROVIDER_REPOS = 50
_SPLIT = re.compile(r"::|->|[.#\\]")
_KIND_RANK = {
    "class": 0,
    "struct": 0,
    "interface": 0,
    "enum": 1,
    "function": 1,
    "type alias": 1,
    "module": 2,
    "method": 2,
    "macro": 2,
    "constant": 3,
    "variable": 4,
    "field": 4,
}
# Languages where a member is only ever reached through an object (`self.x`, `this.x`, `p->x`), never by its
# bare name: there, a bare occurrence of a method's name is something else.
_MEMBERS_THROUGH_OBJECTS = frozenset({"python", "javascript", "typescript", "go", "php", "rust", "c"})
# Members of Python's built-in types (`d.items()`, `f.close()`): `obj.name` with one of these names is at least as
# likely the built-in's as a class's of the repository, so it counts only through `self`/`Class` there.
_PYTHON_BUILTIN_MEMBERS = frozenset(
    name
    for kind in (dict, list, str, bytes, set, tuple, int, float, io.TextIOWrapper, io.BufferedReader, object)
    for name in dir(kind)
)
# Members of JavaScript's built-in objects (arrays, strings, maps, sets, promises, functions, errors, iterators):
# `x.length` is at least as likely an array's as a class's of the repository, so it counts through `this`/`Class`
# or a receiver named like the class only.
_JS_BUILTIN_MEMBER_NAMES = """
    length push pop shift unshift slice splice concat join reverse sort indexOf lastIndexOf includes find findIndex
    findLast findLastIndex filter map forEach reduce reduceRight some every flat flatMap fill keys values entries at
    charAt charCodeAt codePointAt startsWith endsWith trim trimStart trimEnd split replace replaceAll match matchAll
    search substring substr toLowerCase toUpperCase padStart padEnd repeat get set has delete clear add size then
    catch finally call apply bind name message stack cause next done value return throw test exec toString valueOf
    toJSON hasOwnProperty constructor prototype
"""
_JS_BUILTIN_MEMBERS = frozenset(_JS_BUILTIN_MEMBER_NAMES.split())
_JS_SUFFIXES = (".js", ".mjs", ".cjs", ".jsx")  # JavaScript files, where JSDoc types receivers
_RECEIVER_CHAIN = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*")  # `this`, `obj`, `this.node`
# The dotted (or `::`/`->`) chain right before a member name: `a.b.` in `a.b.name`.
_QUALIFIER = re.compile(r"([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)\s*(?:\.|::|->)\s*$")
_SCOPES = ("same file", "same package", "same repository", "other repository")
# The base classes on a Python class header line: `class Name(Base, mod.Other, metaclass=M):`.
_CLASS_BASES = re.compile(r"^\s*class\s+\w+\s*\(([^)]*)\)")
# Re-export hops followed through JavaScript/TypeScript barrels (`export * from`, `export { x } from`).
_JS_REEXPORT_HOPS = 4
# Base classes followed up from a JS/TS class for an inherited `this.name`, and the `extends` of a class header.
_JS_BASE_CLASSES = 4
_JS_EXTENDS = re.compile(r"\bclass\s+[\w$]*\s*(?:<[^{]*?>)?\s*extends\s+([\w$.]+)")
# `export default class Name`, `export default async function name`, `export default name;`
_JS_DEFAULT_EXPORT = re.compile(
    r"^\s*export\s+default\s+(?:(?:abstract\s+)?class\s+|(?:async\s+)?function\s*\*?\s*)?([A-Za-z_$][\w$]*)\s*(?:[;{(<]|extends\b|implements\b|$)"
)
# Base classes followed up from a class to tell whether it extends the class of a definition.
_BASE_HOPS = 4
# Classes looked at when following a method's override hierarchy (bounds the work on huge hierarchies).
_MAX_FAMILY = 200


@dataclass(frozen=True, slots=True)
class Target:
    repo: Repo
    revision: str
    commit: str
    path: str
    index: Indexed
    language: str
    queries: str
    skipped: str


@dataclass(frozen=True, slots=True)
class Hit:
    repo: Repo
    commit: str
    row: SymbolRow
    how: str
    reason: str


def split_symbol(symbol: str) -> tuple[str, list[str]]:
    text = symbol.strip()
    if not text or len(text) > 200 or "\x00" in text or any(c.isspace() for c in text):
        raise InvalidInput(
            f"invalid symbol {symbol[:60]!r}",
            hint="give an identifier as written in the file, e.g. parse or Config.load",
        )
    parts = [p for p in _SPLIT.split(text.removesuffix("()")) if p]
    if not parts:
        raise InvalidInput(f"invalid symbol {symbol!r}", hint="give an identifier, e.g. parse or Config.load")
    return parts[-1], parts[:-1]


def _submodule(module: str, name: str) -> str:
    """Python's `from <module> import <name>` as a module path: `pkg.mod`, `.mod` (from `.`), `..mod`."""
    return module + name if module.endswith(".") else f"{module}.{name}"


def _container_matches(container: str, qualifier: list[str]) -> bool:
    if not qualifier:
        return False
    if container.split(".")[-len(qualifier) :] == qualifier:
        return True
    # A package path ending in the qualifier (`example.com/acme/mathx` for `mathx.Square`), at a name boundary:
    # `Filter` is not the end of `Filterer.addFilter`.
    last = qualifier[-1]
    before = container[: -len(last)]
    return container.endswith(last) and (not before or not (before[-1].isalnum() or before[-1] in "_$"))


class Host(Protocol):
    """What a resolver needs of CodeNavService: repositories, indexes of other revisions, and file lines."""

    @property
    def repos(self) -> RepoService: ...

    def index_revision(self, repo: Repo, commit: str) -> Indexed: ...

    def lines(self, repo: Repo, commit: str, path: str) -> list[str]: ...


class Resolver:
    """The language-independent rules of go_to_definition and find_references (subclasses add a language's)."""

    def __init__(self, host: Host) -> None:
        self.host = host

    @property
    def repos(self) -> RepoService:
        return self.host.repos

    def index_revision(self, repo: Repo, commit: str) -> Indexed:
        return self.host.index_revision(repo, commit)

    def _lines(self, repo: Repo, commit: str, path: str) -> list[str]:
        return self.host.lines(repo, commit, path)

    def definitions(self, actor: Actor, target: Target, symbol: str, name: str, qualifier: list[str]) -> Definitions:
        """Where `symbol` (`qualifier.name`), as used in target.path, is defined."""
        return self._go_to_definition(actor, target, symbol, name, qualifier)

    def references(
        self, actor: Actor, target: Target, symbol: str, name: str, qualifier: list[str], limit: int
    ) -> References:
        """References to `symbol` defined in target.path."""
        return self._find_references(actor, target, symbol, name, qualifier, limit)

    # --- what each language adds (JavaScriptResolver, PythonResolver) --------------------------------------

    def _first(self, target: Target, name: str, qualifier: list[str]) -> tuple[list[Hit], list[str]]:
        """Definitions a language decides before the file's own names, and the qualifier as it reads it."""
        return [], qualifier

    def _imports_first(self, hits: list[Hit]) -> bool:
        """Whether the file's imports answer better than these same-file `hits`."""
        return False

    def _reexported(self, target: Target, imp: ImportRow, name: str, files: list[str], module: str) -> list[Hit]:
        """`name` that the imported `files` do not define themselves but pass on (barrels, re-exports)."""
        return []

    def _last(self, target: Target, name: str, qualifier: list[str]) -> list[Hit]:
        """What a language still finds when nothing else did, before matching by name."""
        return []

    def _reference_occurrences(
        self, target: Target, definition: Symbol
    ) -> tuple[
        ReceiverTypes | None,
        dict[str, list[tuple[int, int, str]]],
        dict[str, dict[tuple[int, int], str]],
        JsDocTypes | None,
    ]:
        """The occurrences of a definition's name that can be references, and what types the language reads:
        Python receiver rules, JavaScript destructured receivers and JSDoc types."""
        return None, target.index.occurrences(definition.name), {}, None

    def _visible_without_import(
        self, target: Target, name: str, kind: str, visible: dict[str, int], aliases: dict[str, set[str]]
    ) -> None:
        """Files that see the definition without importing it (JS/TS members, declared globals)."""

    def _module_value(self, target: Target) -> str | None:
        """The name of the definition that is target.path's module value (CommonJS `module.exports = Name`)."""
        return None

    def _renamed(self, target: Target, name: str, imp: ImportRow) -> tuple[str, int] | None:
        """(local name, line not to count) when the import `imp` binds the definition `name` under another name."""
        return None

    def _visible_through_reexports(
        self, target: Target, name: str, importers: set[str], visible: dict[str, int], aliases: dict[str, set[str]]
    ) -> None:
        """Files that get the definition through a module that re-exports it (`importers` import its file)."""

    def _definition(self, hit: Hit, lines: list[str] | None = None) -> Definition:
        s = hit.row.symbol
        text = self._lines(hit.repo, hit.commit, hit.row.path) if lines is None else lines
        last = min(s.def_end_line, s.def_line + SNIPPET_LINES - 1)
        snippet = [(n, text[n - 1][:256]) for n in range(s.def_line, last + 1) if n - 1 < len(text)]
        return Definition(
            hit.repo.name,
            hit.row.path,
            hit.commit,
            hit.row.language,
            s.name,
            s.kind,
            s.container,
            s.line,
            s.column,
            s.end_line,
            s.end_column,
            s.def_line,
            s.def_end_line,
            hit.how,
            hit.reason,
            snippet,
        )

    def _go_to_definition(
        self, actor: Actor, target: Target, symbol: str, name: str, qualifier: list[str]
    ) -> Definitions:
        notes: list[str] = []
        if not target.queries:
            notes.append(f"{target.path} is not in a language codenav parses; these are search-based matches by name.")
        elif target.skipped:
            notes.append(f"{target.path} was not parsed ({target.skipped}); these are search-based matches by name.")
        hits: list[Hit] = []
        unresolved: list[tuple[str, str]] = []
        if target.queries and not target.skipped:
            hits, qualifier = self._first(target, name, qualifier)
            hits = hits or self._same_file(target, name, qualifier)
            if not hits or self._imports_first(hits):
                imported, unresolved = self._through_imports(target, name, qualifier)
                hits = imported or hits
            if not hits and unresolved:
                hits = self._other_repos(actor, target, name, unresolved)
            hits = hits or self._last(target, name, qualifier)
        if not hits:
            hits = self._by_name(target, name, qualifier)
        if not hits:
            raise NotFound(
                f"no definition of {symbol!r} found from {target.path}",
                hint="check the spelling (names are case-sensitive), or try keyword_search for the name",
            )
        if len(hits) > 1:
            notes.insert(0, f"{len(hits)} candidate definitions, best first.")
        return Definitions(
            target.repo.name,
            target.path,
            symbol,
            target.commit,
            [self._definition(h) for h in hits[:MAX_CANDIDATES]],
            notes,
        )

    def _same_file(self, target: Target, name: str, qualifier: list[str]) -> list[Hit]:
        symbols = target.index.symbols_in(target.path, name)
        if qualifier:
            matching = [s for s in symbols if _container_matches(s.container, qualifier)]
            # `mod.name` with `mod` an import alias means the imported module, not a same-file definition.
            if not matching and self._alias_bound(target, qualifier[0]):
                return []
            symbols = matching or symbols
        # Top-level definitions first (a name used in the file most often means the module's own); of several
        # at one level the last wins, as it does once the module has run (`X = 1` ... `X = 2`). A bare name never
        # means a member where members are reached through objects (Python's `self.x`).
        bare_members_last = not qualifier and target.queries in _MEMBERS_THROUGH_OBJECTS
        # `this.name` / `self.name` is a member, not a function some method declares locally.
        members_first = qualifier[:1] in (["this"], ["self"])
        symbols.sort(
            key=lambda s: (
                bare_members_last and s.kind in ("method", "field"),
                members_first and s.kind not in ("method", "field"),
                s.kind in ("variable", "field") and bool(s.container),
                s.container.count("."),
                -s.line,
            )
        )
        return [
            Hit(target.repo, target.commit, SymbolRow(target.path, target.language, s), SYNTACTIC, "same file")
            for s in symbols
        ]

    def _alias_bound(self, target: Target, alias: str) -> bool:
        return any(i.alias == alias for i in target.index.imports_of(target.path))

    def _through_imports(
        self, target: Target, name: str, qualifier: list[str]
    ) -> tuple[list[Hit], list[tuple[str, str]]]:
        index, queries = target.index, target.queries
        hits: list[Hit] = []
        unresolved: list[tuple[str, str]] = []
        # Languages where a package spans a folder or a declared package see its names without importing them.
        if queries == "go" and not qualifier:
            same = [p for p in index.files_in_dir(posixpath.dirname(target.path), "go") if p != target.path]
            hits += self._hits_in(target, name, same, [], "same package")
        if queries in ("java", "kotlin", "csharp") and not qualifier:
            package = index.file(target.path)
            if package is not None and package.package:
                same = [p for p in index.files_in_package(package.package, queries) if p != target.path]
                hits += self._hits_in(target, name, same, [], "same package")
        if hits:
            return hits, unresolved
        for imp in index.imports_of(target.path):
            wanted, module, member = self._binding(imp.module, imp.name, imp.alias, name, qualifier, queries)
            if wanted is None:
                continue
            files = module_files(index, target.path, queries, module, member)
            if queries == "python" and member and not files:
                files = module_files(index, target.path, queries, module)
            if not files:
                if not module.startswith("."):
                    unresolved.append((module, wanted))
                continue
            found = self._hits_in(target, wanted, files, qualifier[1:], f"imported from {module}")
            found = found or self._reexported(target, imp, wanted, files, module)
            hits += found
        if not hits and queries in ("c", "cpp"):
            # #include is a hint: the definition is in an included file, or in the file that implements it.
            included = [
                p
                for imp in index.imports_of(target.path)
                for p in module_files(index, target.path, queries, imp.module)
            ]
            hits += self._hits_in(target, name, included, [], "via #include")
        return hits, unresolved

    @staticmethod
    def _binding(
        module: str, imported: str, alias: str, name: str, qualifier: list[str], queries: str
    ) -> tuple[str | None, str, str]:
        """(name to look up, module to resolve, member) when this import explains `qualifier.name`, else None."""
        if qualifier:
            if alias != qualifier[0] and not (
                queries == "python" and not imported and module.split(".", maxsplit=1)[0] == qualifier[0]
            ):
                return None, module, ""
            if queries == "python" and not imported:
                # `import a.b` + `a.b.name`, or `import a.b as m` + `m.name`.
                dotted = module if alias != module.split(".", maxsplit=1)[0] else ".".join(qualifier)
                return name, dotted, ""
            if imported in ("", "*", "default"):
                return name, module, ""
            if queries == "python":
                # `from pkg import mod` + `mod.name`: a submodule, or a class and its member.
                return name, _submodule(module, imported), imported
            return name, module, imported
        if imported == "*":
            return name, module, ""
        if alias == name and imported not in ("", "default"):
            return imported, module, imported
        if alias == name and imported == "default":
            return name, module, ""
        return None, module, ""

    def _hits_in(self, target: Target, name: str, files: list[str], qualifier: list[str], reason: str) -> list[Hit]:
        if not files:
            return []
        rows = target.index.symbols_named(name, files)
        rows = [
            r
            for r in rows
            if r.symbol.kind != "variable" or not r.symbol.container or r.symbol.container.count(".") == 0
        ]
        if qualifier:
            rows = [r for r in rows if _container_matches(r.symbol.container, qualifier)] or rows
        order = {p: i for i, p in enumerate(files)}
        rows.sort(key=lambda r: (order.get(r.path, 0), _KIND_RANK.get(r.symbol.kind, 5), r.symbol.line))
        return [Hit(target.repo, target.commit, r, SYNTACTIC, reason) for r in rows]

    def _by_name(self, target: Target, name: str, qualifier: list[str]) -> list[Hit]:
        rows = target.index.symbols_named(name)
        if qualifier:
            rows = [r for r in rows if _container_matches(r.symbol.container, qualifier)] or rows
        here = posixpath.dirname(target.path)

        family = target.queries in ("javascript", "typescript")
        folders = here.split("/")

        def rank(r: SymbolRow) -> tuple[int, int, int, int, int, str]:
            same_language = r.language == target.language
            # An ES module sees another module's top-level names only through imports (which found nothing): a
            # member (`{ subscribe }`, `obj.subscribe`) is what the name can be, or a global of a declaration file.
            unreachable = (
                family
                and r.path != target.path
                and r.symbol.kind not in ("method", "field")
                and not r.path.endswith(".d.ts")
            )
            if family:
                # JavaScript and the TypeScript declarations that type it are one program; of the folders, the
                # nearest (longest shared path) first: a declaration file higher up serves the files below it.
                grammar = grammar_of(r.path)
                same_language = grammar is not None and grammar.queries in ("javascript", "typescript")
                there = posixpath.dirname(r.path).split("/")
                shared = 0
                for a, b in zip(folders, there, strict=False):
                    if a != b:
                        break
                    shared += 1
                distance = len(folders) + len(there) - 2 * shared
            else:
                distance = 0 if posixpath.dirname(r.path) == here else 1
            local = r.symbol.kind == "variable" and bool(r.symbol.container)
            return (not same_language, unreachable, local, distance, _KIND_RANK.get(r.symbol.kind, 5), r.path)

        rows.sort(key=rank)
        return [Hit(target.repo, target.commit, r, SEARCH_BASED, "same repository, matched by name") for r in rows]

    def _providers(self, actor: Actor, current: Repo, queries: str, module: str) -> Iterator[tuple[Repo, str, Indexed]]:
        """Readable repositories (other than `current`) that provide `module`, with their indexed default branch."""
        # Page by page, stopping at the cap: no record (nor stat) for repositories beyond it.
        readable = (r for r in self.repos.iter_readable(actor) if r.id != current.id and r.default_branch and r.cloned)
        for repo in islice(readable, MAX_PROVIDER_REPOS):
            try:
                commit = self.repos.resolve(actor, repo.name).commit
                tree = pygit2.Repository(str(repo.mirror_path))[commit].peel(pygit2.Tree)
            except (NotFound, InvalidInput, KeyError, ValueError, pygit2.GitError):
                continue
            if _provides(tree, queries, module):
                yield repo, commit, self.index_revision(repo, commit)

    def _other_repos(self, actor: Actor, target: Target, name: str, unresolved: list[tuple[str, str]]) -> list[Hit]:
        hits: list[Hit] = []
        for module, wanted in unresolved:
            for repo, commit, index in self._providers(actor, target.repo, target.queries, module):
                files = module_files(index, "", target.queries, module)
                rows = index.symbols_named(wanted, files)
                rows.sort(key=lambda r: (_KIND_RANK.get(r.symbol.kind, 5), r.path))
                index.close()
                reason = f"imported from {module}, provided by repository {repo.name}"
                hits += [Hit(repo, commit, r, SYNTACTIC, reason) for r in rows]
        return hits

    def _find_references(
        self, actor: Actor, target: Target, symbol: str, name: str, qualifier: list[str], limit: int
    ) -> References:
        if target.skipped:
            raise InvalidInput(
                f"{target.path} was not parsed ({target.skipped})",
                hint="use keyword_search for the name instead",
            )
        symbols = target.index.symbols_in(target.path, name)
        if qualifier:
            symbols = [s for s in symbols if _container_matches(s.container, qualifier)] or symbols
        if not symbols:
            names = target.index.names_in(target.path)
            near = difflib.get_close_matches(name, names, n=5, cutoff=0.6) or names[:5]
            hint = (
                "names defined there include: " + ", ".join(near)
                if near
                else "nothing is defined there; find_references needs the file that defines the symbol"
            )
            if not target.queries:
                hint = f"{target.path} is not in a language codenav parses; use keyword_search for the name"
            raise NotFound(f"symbol {symbol!r} not found in {target.path}", hint=hint)
        # Of several definitions of the name in the file, the top-level one is meant unless the name is qualified.
        symbols.sort(key=lambda s: (s.kind in ("method", "field"), s.container.count("."), s.line))
        definition = self._definition(
            Hit(
                target.repo,
                target.commit,
                SymbolRow(target.path, target.language, symbols[0]),
                SYNTACTIC,
                "defined here",
            )
        )
        renamed: dict[str, dict[str, int]] = {}
        visible, aliases = self._visible_files(target, name, symbols[0].kind, renamed)
        # Other classes defining a member of the same name make `obj.name` on an object of unknown type ambiguous.
        # (Deciding that per file, from what each file imports, measured P 89 % / R 94 % against 94 % / 90 %.)
        other_definers = (
            {
                row.path
                for row in target.index.symbols_named(name)
                if row.symbol.kind in ("method", "field")
                and (row.path, row.symbol.container) != (target.path, symbols[0].container)
            }
            if symbols[0].kind in ("method", "field")
            else set()
        )
        family_calls, family_selves = self._override_family(target, symbols[0])
        receivers, occurrences, destructured, jsdoc = self._reference_occurrences(target, symbols[0])
        occurrences = self._with_renamed(target, occurrences, renamed)
        found: list[tuple[int, Repo, str, str, list[tuple[int, int]]]] = []
        for file_path, scope in visible.items():
            spots = self._uses(
                target,
                symbols[0],
                file_path,
                occurrences.get(file_path, []),
                aliases.get(file_path, set()),
                # Python and JavaScript importers see the bare name only when they import that name.
                bare=scope < 2
                or target.queries not in ("python", "javascript", "typescript")
                or "" in aliases.get(file_path, set()),
                ambiguous=bool(other_definers)
                or (target.queries == "python" and name in _PYTHON_BUILTIN_MEMBERS)
                or (target.queries in ("javascript", "typescript") and name in _JS_BUILTIN_MEMBERS),
                family_calls=family_calls,
                family_selves=family_selves,
                receivers=receivers,
                destructured=destructured.get(file_path),
                jsdoc=jsdoc,
            )
            if spots:
                found.append((scope, target.repo, target.commit, file_path, spots))
        found += self._references_elsewhere(actor, target, name)
        text_matches = False
        how = SYNTACTIC
        if not found:
            found = self._text_matches(target, name, visible)
            text_matches = bool(found)
        if any(scope >= 2 for scope, *_ in found) and target.queries in ("rust", "ruby", "php", "csharp"):
            how = SEARCH_BASED
        found.sort(key=lambda f: (f[0], f[3]))
        total = sum(len(f[4]) for f in found)
        files: list[ReferenceFile] = []
        shown = 0
        for scope, ref_repo, commit, file_path, spots in found:
            if shown >= limit:
                break
            take = sorted(spots)[: limit - shown]
            text = self._lines(ref_repo, commit, file_path)
            lines = [(line, col, text[line - 1][:256] if line - 1 < len(text) else "") for line, col in take]
            files.append(ReferenceFile(ref_repo.name, file_path, commit, _SCOPES[scope], lines, len(spots)))
            shown += len(take)
        notes: list[str] = []
        if text_matches:
            notes.append(f"No identifier references to {name!r}; these lines mention it in comments or strings.")
        if total > shown:
            notes.append(
                f"({total - shown} more references not shown; showing {shown} of {total}. Raise limit to see more.)"
            )
        return References(
            target.repo.name,
            target.path,
            symbol,
            target.commit,
            definition,
            files,
            total,
            shown,
            how,
            text_matches,
            notes,
        )

    @staticmethod
    def _with_renamed(
        target: Target, occurrences: dict[str, list[tuple[int, int, str]]], renamed: dict[str, dict[str, int]]
    ) -> dict[str, list[tuple[int, int, str]]]:
        """The occurrences with those of the local names importers give the definition (their import binding
        included, as for any import; not a CommonJS `var Local = require(...)`, a declaration of its own)."""
        for path, names in renamed.items():
            for local, skipped in names.items():
                found = [spot for spot in target.index.occurrences(local).get(path, []) if spot[0] != skipped]
                occurrences[path] = sorted({*occurrences.get(path, []), *found})
        return occurrences

    def _visible_files(  # noqa: PLR0912 - one rule per language family
        self, target: Target, name: str, kind: str, renamed: dict[str, dict[str, int]] | None = None
    ) -> tuple[dict[str, int], dict[str, set[str]]]:
        """Files of the same repository that can see a definition in target.path → scope rank (0 file, 1 package,
        2 repository), and per importing file the names its imports give the defining module (`mod` of `mod.name`).
        `renamed` receives, per importing file, the local names it gives the definition itself (`import Local from`
        a module whose default export it is), each with the line of a binding not to count (0: none).
        """
        index, queries, path = target.index, target.queries, target.path
        visible: dict[str, int] = {path: 0}
        aliases: dict[str, set[str]] = {}
        renamed = {} if renamed is None else renamed
        here = posixpath.dirname(path)
        row = index.file(path)
        if queries == "go":
            for p in index.files_in_dir(here, "go"):
                visible.setdefault(p, 1)
        elif queries in ("java", "kotlin", "csharp") and row is not None and row.package:
            for p in index.files_in_package(row.package, queries):
                visible.setdefault(p, 1)
        if queries in ("c", "cpp"):
            static = kind in ("function", "variable") and self._is_static(target, name)
            if static:
                return visible, aliases
            # C has one global namespace per program: every C file naming it may use it (and includes tell which).
            for p in index.paths_naming(name):
                if p != path and grammar_of(p) is not None:
                    visible.setdefault(p, 1 if posixpath.dirname(p) == here else 2)
            return visible, aliases
        if queries in ("rust", "ruby", "php", "csharp"):
            # No import resolution for these yet: same-folder files first, then any file naming it (search-based).
            for p in index.occurrences(name):
                if grammar_of(p) is not None and index.file(p) is not None:
                    visible.setdefault(p, 1 if posixpath.dirname(p) == here else 2)
            return visible, aliases
        self._visible_without_import(target, name, kind, visible, aliases)
        stem = posixpath.basename(path).rsplit(".", 1)[0]
        fragment = posixpath.basename(here) if stem in ("__init__", "index", "mod") or queries == "go" else stem
        importers: set[str] = set()
        resolved: dict[tuple[str, str], list[str]] = {}
        # A module whose value is this definition (CommonJS `module.exports = Name`): `var Name = require('./m')`
        # uses it under its own name.
        module_value = self._module_value(target) == name
        for imp in index.imports_mentioning(fragment or stem):
            if imp.path in visible:
                continue
            if path in resolved_import(index, queries, imp, resolved):
                importers.add(imp.path)
                if (
                    imp.name in (name, "*")
                    or (imp.name == "default" and queries != "python")
                    or (module_value and imp.name == "" and imp.alias == name)
                ):
                    # The file uses the bare name: mark it with the empty alias.
                    aliases.setdefault(imp.path, set()).add("")
                local = self._renamed(target, name, imp)
                if local is not None:
                    renamed.setdefault(imp.path, {})[local[0]] = local[1]
                    aliases.setdefault(imp.path, set()).add("")
                if imp.name == "" and imp.alias:
                    # `import a.b` is used as `a.b.name`; `import a.b as m`, `import * as m`, Go's `m.Name` as `m.name`.
                    unaliased = queries == "python" and imp.alias == imp.module.split(".")[0]
                    aliases.setdefault(imp.path, set()).add(imp.module if unaliased else imp.alias)
            elif (
                queries == "python"
                and imp.name not in ("", "*")
                and path in module_files(index, imp.path, queries, _submodule(imp.module, imp.name))
            ):
                # `from pkg import mod` binds the module itself.
                importers.add(imp.path)
                aliases.setdefault(imp.path, set()).add(imp.alias)
        for p in importers:
            visible.setdefault(p, 2)
        self._visible_through_reexports(target, name, importers, visible, aliases)
        return visible, aliases

    def _uses(  # noqa: PLR0912, PLR0915 - one branch per kind of occurrence
        self,
        target: Target,
        definition: Symbol,
        path: str,
        spots: list[tuple[int, int, str]],
        aliases: set[str],
        *,
        bare: bool,
        ambiguous: bool,
        family_calls: frozenset[str] = frozenset(),
        family_selves: frozenset[str] = frozenset(),
        receivers: ReceiverTypes | None = None,
        destructured: dict[tuple[int, int], str] | None = None,
        jsdoc: JsDocTypes | None = None,
    ) -> list[tuple[int, int]]:
        """The occurrences in `path` that can mean `definition`: members through objects, others by name or module.

        `ambiguous`: other classes define a member of the same name, so `obj.name` on an object of unknown type
        is not counted; `self.name` in the class (or a subclass) and `Class.name` still are. For a Python method
        with an override hierarchy (_override_family): `Class.name` with a class of `family_calls`, and `self.name`
        in a class of `family_selves`, count. `receivers` (Python members): what the file says `obj` of `obj.name` is
        decides first when it says anything (python_refs.py). `destructured` (JS/TS): `{ name } = receiver`
        occurrences, read as `receiver.name`. `jsdoc` (JS/TS members): in a JavaScript file, a receiver whose
        JSDoc type is known decides (jsdoc.py).
        """
        # A TypeScript enum member is reached as `Enum.member`, like a class member.
        member = definition.kind in ("method", "field") or (
            target.queries == "typescript" and definition.kind == "constant" and bool(definition.container)
        )
        strict = target.queries in _MEMBERS_THROUGH_OBJECTS
        owner_class = definition.container.split(".")[-1]
        keep: list[tuple[int, int]] = []
        lines: list[str] | None = None
        classes: list[Symbol] | None = None
        import_names: set[str] | None = None
        for line, column, role in spots:
            if role == "d" or (path == target.path and line == definition.line and role == "i"):
                continue  # the definition itself (`var f = require('./m').f` reads as an import there too)
            if member and strict and role != "m":
                if (
                    target.queries == "python"
                    and path == target.path
                    and self._in_class_body(target, line, owner_class)
                ):
                    keep.append((line, column))  # `name = property(get_name)`, `@name.setter` in the class body
                continue  # `name` alone is a local or a global there, never this member
            if not member and not bare and role != "m":
                continue  # this importer reaches the module, not the bare name
            if role != "m":
                if target.queries == "python":
                    if lines is None:
                        lines = self._lines(target.repo, target.commit, path)
                    if line <= len(lines) and lines[line - 1].lstrip().startswith(("global ", "nonlocal ")):
                        continue  # a declaration of the name's scope, not a use
                keep.append((line, column))
                continue
            if not member and not aliases and target.queries == "c":
                # In C `x.name`/`x->name` is a struct member, never this top-level definition: no need to read the
                # file for what comes before it (below, such an occurrence is kept only through a module alias).
                continue
            if lines is None:
                lines = self._lines(target.repo, target.commit, path)
            before = lines[line - 1].encode()[: column - 1].decode("utf-8", "replace") if line <= len(lines) else ""
            qualifier = _QUALIFIER.search(before)
            owner = qualifier.group(1) if qualifier else ""
            if destructured and (line, column) in destructured:
                owner = destructured[line, column]
            if not member:
                # A top-level name reached through a member access is only ours through the module's name.
                if owner in aliases or (before.endswith("::") and target.queries != "c"):
                    keep.append((line, column))
                continue
            last = owner.split(".")[-1]
            evident = (
                receivers.verdict(path, line, owner, before, method=definition.kind == "method")
                if receivers is not None
                else None
            )
            if evident is None and jsdoc is not None and owner and path.endswith(_JS_SUFFIXES):
                typed = jsdoc.members(path, owner.split("."), definition.name, line, before)
                evident = (target.path, definition) in typed if typed else None
            if evident is None and ":" in owner:
                continue  # an object's property that only its context's type (read in JavaScript) could make ours
            if evident is not None:
                if evident:
                    keep.append((line, column))
                continue
            if last in family_calls:
                keep.append((line, column))  # `Base.name(self)`, `mod.Sub.name`: a class of the override hierarchy
                continue
            if import_names is None:
                import_names = self._import_names(target, path)
            if owner.split(".")[0] in import_names:
                continue  # `module.name`: something a module defines, not a member of a class here
            if last == owner_class:
                keep.append((line, column))
                continue
            if last in ("self", "this", "cls"):
                if classes is None:
                    classes = [s for s in target.index.symbols_in(path) if s.kind in ("class", "struct")]
                enclosing = [c for c in classes if c.def_line <= line <= c.def_end_line]
                if enclosing and enclosing[-1].name in family_selves:
                    keep.append((line, column))
                    continue
                if enclosing and self._defines_other(target, path, enclosing[-1], definition):
                    continue  # that class has its own member of this name
                if ambiguous and not (
                    enclosing and self._is_or_extends(target, path, enclosing[-1], owner_class, lines)
                ):
                    continue
                keep.append((line, column))
                continue
            if last[:1].isupper() and self._other_class_defines(target, owner, definition):
                continue  # `OtherClass.name`: that class's own member
            if not ambiguous or (
                target.queries in ("javascript", "typescript") and names_class(receiver_name(last), owner_class)
            ):
                keep.append((line, column))  # `block.chunks` in JS/TS: a receiver named like the class
        return keep

    @staticmethod
    def _in_class_body(target: Target, line: int, owner_class: str) -> bool:
        """Whether `line` of target.path is directly in the body of class `owner_class` (not in one of its methods)."""
        inside = [
            s
            for s in target.index.symbols_in(target.path)
            if s.kind in ("class", "function", "method") and s.def_line < line <= s.def_end_line
        ]
        innermost = max(inside, key=lambda s: s.def_line) if inside else None
        return innermost is not None and innermost.kind == "class" and innermost.name == owner_class

    def _override_family(  # noqa: PLR0912 - up the bases, then down the subclasses
        self, target: Target, definition: Symbol
    ) -> tuple[frozenset[str], frozenset[str]]:
        """Names of the classes of a Python method's override hierarchy, or nothing when it overrides nothing.

        The hierarchy: the topmost base class (by name, from `class X(Base):` headers in the revision) that also
        defines the method, and every class below it. A call `self.name()` in any of them, or `Base.name(self)`,
        may run this definition (or the one it overrides and calls), so both count as references to it.
        """
        if target.queries != "python" or definition.kind != "method" or not definition.container:
            return frozenset(), frozenset()
        index = target.index
        owner = definition.container.split(".")[-1]
        definers = {
            r.symbol.container.split(".")[-1]
            for r in index.symbols_named(definition.name)
            if r.symbol.kind == "method" and r.language == target.language
        }
        if definers == {owner}:
            return frozenset(), frozenset()
        lines: dict[str, list[str]] = {}
        classes: dict[str, list[tuple[str, Symbol]]] = {}

        def class_rows(name: str) -> list[tuple[str, Symbol]]:
            if name not in classes:
                classes[name] = [
                    (r.path, r.symbol)
                    for r in index.symbols_named(name)
                    if r.symbol.kind == "class" and r.language == target.language
                ]
            return classes[name]

        def bases(path: str, cls: Symbol) -> list[str]:
            text = lines.setdefault(path, self._lines(target.repo, target.commit, path))
            header = text[cls.def_line - 1] if cls.def_line <= len(text) else ""
            found = _CLASS_BASES.search(header)
            return [b.strip().split(".")[-1] for b in found.group(1).split(",")] if found else []

        # Up: the farthest ancestor that defines the method is the root of the hierarchy.
        root, seen, todo = owner, {owner}, [owner]
        while todo and len(seen) < _MAX_FAMILY:
            current = todo.pop()
            for path, cls in class_rows(current):
                for base in bases(path, cls):
                    if base and base not in seen and class_rows(base):
                        seen.add(base)
                        todo.append(base)
                        if base in definers:
                            root = base
        # Down: every class whose header names the root or one of its descendants.
        family, todo = {root}, [root]
        parent: dict[str, str] = {}
        while todo and len(family) < _MAX_FAMILY:
            current = todo.pop()
            for path, spots in index.occurrences(current).items():
                if grammar_of(path) is None or grammar_of(path) != grammar_of(target.path):
                    continue
                on = {line for line, _, role in spots if role != "d"}
                for cls in index.symbols_in(path):
                    if (
                        cls.kind == "class"
                        and cls.def_line in on
                        and cls.name not in family
                        and current in bases(path, cls)
                    ):
                        family.add(cls.name)
                        parent[cls.name] = current
                        todo.append(cls.name)
        if len(family & definers) < 2:  # the definition's class and at least one other
            return frozenset(), frozenset()

        def below_owner(name: str) -> bool:
            while name in parent and name != owner:
                name = parent[name]
            return name == owner

        # `X.name(...)`: X the root declaration, the class itself or a subclass of it (an intermediate base's or a
        # sibling branch's own implementation is never this one). `self.name`: anywhere in the family but in the
        # definition's own bases.
        calls = frozenset({root, owner} | {name for name in family if below_owner(name)})
        return calls, frozenset(family - (seen - {owner}))

    def _is_or_extends(self, target: Target, path: str, cls: Symbol, owner_class: str, lines: list[str]) -> bool:
        """Whether class `cls` is the definition's class or names it among its bases (on its header line; a
        language resolver may follow the bases further: _base_class)."""
        for _ in range(_BASE_HOPS):
            if cls.name == owner_class:
                return True
            header = lines[cls.def_line - 1] if cls.def_line <= len(lines) else ""
            if re.search(rf"\b{re.escape(owner_class)}\b", header) is not None:
                return True
            base = self._base_class(target, path, cls, lines)
            if base is None:
                return False
            path, cls = base
            lines = self._lines(target.repo, target.commit, path)
        return False

    def _base_class(self, target: Target, path: str, cls: Symbol, lines: list[str]) -> tuple[str, Symbol] | None:
        """The class that class `cls` of `path` extends (its file and definition), when the language says."""
        return None

    def _import_names(self, target: Target, path: str) -> set[str]:
        """The names a file's imports bind to modules (`os` of `import os.path`, `np` of `import numpy as np`)."""
        names = set()
        for imp in target.index.imports_of(path):
            if imp.name == "" and imp.alias:
                names.add(imp.alias.split(".")[0])
        return names

    def _other_class_defines(self, target: Target, owner: str, definition: Symbol) -> bool:
        """Whether `owner` (`Base`, `mod.Base`) names another class of the revision that defines this member."""
        cls = owner.rsplit(".", maxsplit=1)[-1]
        if cls == definition.container.split(".")[-1]:
            return False
        return any(row.symbol.container.split(".")[-1] == cls for row in target.index.symbols_named(definition.name))

    def _defines_other(self, target: Target, path: str, owner: Symbol, definition: Symbol) -> bool:
        """Whether class `owner` in `path` is another class that defines a member named like `definition`."""
        if path == target.path and owner.name == definition.container.split(".")[-1]:
            return False
        qualified = f"{owner.container}.{owner.name}" if owner.container else owner.name
        return any(s.container == qualified for s in target.index.symbols_in(path, definition.name))

    def _is_static(self, target: Target, name: str) -> bool:
        lines = self._lines(target.repo, target.commit, target.path)
        for s in target.index.symbols_in(target.path, name):
            if s.def_line - 1 < len(lines):
                return lines[s.def_line - 1].lstrip().startswith("static")
        return False

    def _references_elsewhere(
        self, actor: Actor, target: Target, name: str
    ) -> list[tuple[int, Repo, str, str, list[tuple[int, int]]]]:
        """References in other readable repositories that import the module defining `name` (Python, Go)."""
        if target.queries == "python":
            module = python_module_name(target.path)
        elif target.queries == "go":
            module = ""
            for directory, path in target.index.go_modules():
                here = posixpath.dirname(target.path)
                if not directory or here == directory or here.startswith(directory + "/"):
                    rest = here[len(directory) :].lstrip("/")
                    module = f"{path}/{rest}" if rest else path
        else:
            return []
        if not module:
            return []
        out: list[tuple[int, Repo, str, str, list[tuple[int, int]]]] = []
        readable = (
            r for r in self.repos.iter_readable(actor) if r.id != target.repo.id and r.default_branch and r.cloned
        )
        for repo in islice(readable, MAX_PROVIDER_REPOS):
            try:
                commit = self.repos.resolve(actor, repo.name).commit
            except (NotFound, InvalidInput):
                continue
            index = self.index_revision(repo, commit)
            try:
                importers = {
                    imp.path
                    for imp in index.imports_mentioning(module.rsplit(".", 1)[-1].rsplit("/", 1)[-1])
                    if imp.module == module or (imp.module == module.rsplit(".", 1)[0] and imp.name in (name, "*"))
                }
                occurrences = index.occurrences(name)
            finally:
                index.close()
            for p in sorted(importers):
                spots = [(line, col) for line, col, role in occurrences.get(p, []) if role != "d"]
                if spots:
                    out.append((3, repo, commit, p, spots))
        return out

    def _text_matches(
        self, target: Target, name: str, visible: dict[str, int]
    ) -> list[tuple[int, Repo, str, str, list[tuple[int, int]]]]:
        out: list[tuple[int, Repo, str, str, list[tuple[int, int]]]] = []
        if not name:
            return out
        definition_lines = {s.line for s in target.index.symbols_in(target.path, name)}
        for file_path, scope in visible.items():
            spots: list[tuple[int, int]] = []
            # One pass over the whole text, not a call per line (a generated header has 100k+ lines), by str.find:
            # an expression that starts with a look-behind is tried at every position. The newline between lines
            # reads like the line ends did (neither a word character nor `$`).
            text = "\n".join(self._lines(target.repo, target.commit, file_path))
            number, last, start = 1, 0, text.find(name)
            while start >= 0:
                if not _stands_alone(text, start, start + len(name)):
                    start = text.find(name, start + 1)
                    continue
                number += text.count("\n", last, start)
                last = start
                spots.append((number, start - text.rfind("\n", 0, start)))
                start = text.find(name, start + len(name))
            if file_path == target.path:
                spots = [s for s in spots if s[0] not in definition_lines]
            if spots:
                out.append((scope, target.repo, target.commit, file_path, spots))
        return out


def _stands_alone(text: str, start: int, end: int) -> bool:
    """Whether text[start:end] is a whole word: no word character (as `\\w` matches) nor `$` right before or after."""
    return not any(c in "_$" or c.isalnum() for c in text[max(0, start - 1) : start] + text[end : end + 1])


def receiver_name(name: str) -> str:
    """A receiver's name as a class name would read it, lower-cased: `block_`, `_block` and `$block` → `block`."""
    return name.strip("_$").lower()


def names_class(receiver: str, cls: str) -> bool:
    """Whether a receiver (as `_receiver` reads it) is named like class `cls`: `atom` for Atom, or for IAtom
    (TypeScript's interface prefix)."""
    lowered = cls.lower()
    return bool(receiver) and (receiver == lowered or (cls[:2].isupper() and cls[0] == "I" and receiver == lowered[1:]))


def resolved_import(index: Indexed, queries: str, imp: ImportRow, memo: dict[tuple[str, str], list[str]]) -> list[str]:
    """The files an import names. A JS/TS module spelling means the same from every file of a folder (and a
    project's files import their barrel alike), so those are resolved once per (folder, spelling) in `memo`."""
    if queries not in ("javascript", "typescript"):
        return module_files(index, imp.path, queries, imp.module, imp.name)
    key = (posixpath.dirname(imp.path), imp.module)
    if key not in memo:
        memo[key] = module_files(index, imp.path, queries, imp.module)
    return memo[key]


def _provides(tree: pygit2.Tree, queries: str, module: str) -> bool:
    """Whether a repository's tree provides `module` (a Go module path, a Python top-level package, an npm name)."""

    def blob(path: str) -> bytes | None:
        try:
            obj = tree[path]
        except KeyError:
            return None
        return obj.data if isinstance(obj, pygit2.Blob) else None

    if queries == "go":
        data = blob("go.mod")
        if data is None:
            return False
        for line in data.decode("utf-8", "replace").splitlines():
            words = line.split()
            if len(words) >= 2 and words[0] == "module":
                path = words[1].strip('"')
                return module == path or module.startswith(path + "/")
        return False
    if queries == "python":
        top = module.split(".", maxsplit=1)[0]
        candidates = (f"{top}/__init__.py", f"{top}.py", f"src/{top}/__init__.py", f"src/{top}.py")
        return any(blob(c) is not None for c in candidates)
    return False
