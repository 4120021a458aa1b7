"""JavaScript and TypeScript navigation: the rules their modules and types add to the shared ones (navigation.py).

- Modules: ES imports through barrels (`export * from`, `export { x } from`, a few hops) and default exports;
  CommonJS (`require` in every form, `module.exports`, `exports.name`: codenav/commonjs.py reads the assignments).
- Types: receivers typed by JSDoc (`@param {import('./x').T}`, jsdoc.py), named like a class (`block.x` →
  `Block`), destructured from a receiver (`const { name } = this`), `this.x` up the `extends` chain.
- References: local scopes that shadow a module-level name (js_scopes.py), members seen from every file.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import replace

from codewell.codenav.commonjs import Binding, default_export, member_export
from codewell.codenav.extract import Symbol
from codewell.codenav.js_scopes import destructured_members, shadowed_uses
from codewell.codenav.jsdoc import JsDocTypes
from codewell.codenav.languages import grammar_of
from codewell.codenav.navigation import (
    _JS_BASE_CLASSES,
    _JS_DEFAULT_EXPORT,
    _JS_EXTENDS,
    _JS_REEXPORT_HOPS,
    _RECEIVER_CHAIN,
    Hit,
    Resolver,
    Target,
    names_class,
    receiver_name,
    resolved_import,
)
from codewell.codenav.python_refs import ReceiverTypes
from codewell.codenav.resolve import module_files
from codewell.codenav.results import SEARCH_BASED, SYNTACTIC
from codewell.codenav.store import ImportRow, Indexed, SymbolRow

__all__ = ["JavaScriptResolver"]

# Lines of one import statement looked at for its `require` (a destructuring spread over lines).
_STATEMENT_LINES = 30
# The context that types an object's property (js_scopes._typing_context): `of:xs`, `arg:1:this.add`, `var:v`,
# `ret:12`, `param:2:12`.
_CONTEXT_PREFIX = re.compile(r"^(?:of:|var:|arg:\d+:|ret:\d+$|param:\d+:\d+$)")


class JavaScriptResolver(Resolver):
    """go_to_definition and find_references in JavaScript and TypeScript files."""

    def _first(self, target: Target, name: str, qualifier: list[str]) -> tuple[list[Hit], list[str]]:
        """CommonJS bindings, a name destructured from a receiver, JSDoc-typed and class-named receivers."""
        if qualifier == ["super"]:  # the member a base class defines (the file's own class overrides it)
            return self._js_inherited_member(target, target.path, name, depth=_JS_BASE_CLASSES), qualifier
        types = self._jsdoc_types(target) if target.queries == "javascript" else None
        hits = self._commonjs(target, name, qualifier, _JS_REEXPORT_HOPS)
        qualifier = qualifier or ([] if hits else self._js_destructuredreceiver_name(target, name, types))
        hits = hits or (self._js_contextual_property(target, name, types) if not qualifier else [])
        hits = hits or self._js_jsdoc_member(target, name, qualifier, types)
        hits = hits or self._js_receiver_member(target, name, qualifier)
        return hits, qualifier

    def _imports_first(self, hits: list[Hit]) -> bool:
        # A bare name in a method is never a member of its class (`hash()` beside a `hash()` method is the import's).
        return all(h.row.symbol.kind in ("method", "field") and h.row.symbol.container for h in hits)

    def _reexported(self, target: Target, imp: ImportRow, name: str, files: list[str], module: str) -> list[Hit]:
        found = self._js_reexport(target, name, files, module, depth=_JS_REEXPORT_HOPS)
        return found or (self._js_default_export(target, files, module) if imp.name == "default" else [])

    def _last(self, target: Target, name: str, qualifier: list[str]) -> list[Hit]:
        if qualifier != ["this"]:
            return []
        return self._js_inherited_member(target, target.path, name, depth=_JS_BASE_CLASSES)

    def _reference_occurrences(
        self, target: Target, definition: Symbol
    ) -> tuple[
        ReceiverTypes | None,
        dict[str, list[tuple[int, int, str]]],
        dict[str, dict[tuple[int, int], str]],
        JsDocTypes | None,
    ]:
        jsdoc = self._jsdoc_types(target)
        occurrences = target.index.occurrences(definition.name)
        occurrences, destructured = self._js_occurrences(target, definition, occurrences, jsdoc)
        return None, occurrences, destructured, jsdoc

    def _visible_without_import(
        self, target: Target, name: str, kind: str, visible: dict[str, int], aliases: dict[str, set[str]]
    ) -> None:
        self._js_visible_everywhere(target.index, target.path, name, kind, visible, aliases)

    def _module_value(self, target: Target) -> str | None:
        if target.queries != "javascript":
            return None
        value = default_export(self._lines(target.repo, target.commit, target.path))
        return value.name if value is not None and value.name and not value.variable else None

    def _base_class(self, target: Target, path: str, cls: Symbol, lines: list[str]) -> tuple[str, Symbol] | None:
        """`class A extends B`: B as the file names it (same file, else its imports: a default import too)."""
        extends = _JS_EXTENDS.search(" ".join(lines[cls.def_line - 1 : cls.def_line + 1]))
        if extends is None:
            return None
        base = extends.group(1).split(".")[-1]
        at = replace(target, path=path)
        found = [h for h in self._same_file(at, base, []) if h.row.symbol.kind == "class"]
        found = found or [h for h in self._through_imports(at, base, [])[0] if h.row.symbol.kind == "class"]
        return (found[0].row.path, found[0].row.symbol) if found else None

    def _renamed(self, target: Target, name: str, imp: ImportRow) -> tuple[str, int] | None:
        """`import Local from './m'` where m's default export is `name`, and `var Local = require('./m')` where
        `module.exports = name`: the importer's Local is the definition (the `require` line declares a variable)."""
        if not imp.alias or imp.alias == name or imp.name not in ("default", ""):
            return None
        lines = self._lines(target.repo, target.commit, target.path)
        if imp.name == "default":
            exported = next((m.group(1) for m in map(_JS_DEFAULT_EXPORT.match, lines) if m), None)
            return (imp.alias, 0) if exported == name else None
        if target.queries != "javascript" or not self._required(target, imp.path, imp):
            return None
        value = default_export(lines)
        return (imp.alias, imp.line) if value is not None and value.name == name and not value.variable else None

    def _visible_through_reexports(
        self, target: Target, name: str, importers: set[str], visible: dict[str, int], aliases: dict[str, set[str]]
    ) -> None:
        barrels = sorted(p for p in importers if "" in aliases.get(p, set()))
        self._js_reexport_importers(target.index, target.queries, name, barrels, visible, aliases)

    def _js_inherited_member(self, target: Target, path: str, name: str, depth: int) -> list[Hit]:
        """JS/TS `this.name` that no class of `path` defines: the member of a base class (`class A extends B`),
        B found like go_to_definition finds any name used in `path` (same file, then its imports)."""
        if depth == 0:
            return []
        lines = self._lines(target.repo, target.commit, path)
        at = replace(target, path=path)
        for cls in (s for s in target.index.symbols_in(path) if s.kind == "class"):
            header = " ".join(lines[cls.def_line - 1 : cls.def_line + 1])
            extends = _JS_EXTENDS.search(header)
            if extends is None:
                continue
            base = extends.group(1).split(".")[-1]
            bases = [h for h in self._same_file(at, base, []) if h.row.symbol.kind == "class"]
            bases = bases or [h for h in self._through_imports(at, base, [])[0] if h.row.symbol.kind == "class"]
            for found in bases[:1]:
                members = [
                    s
                    for s in target.index.symbols_in(found.row.path)
                    if s.name == name and s.container.split(".")[-1] == base and s.kind in ("method", "field")
                ]
                reason = f"inherited from {base}"
                if members:
                    row = SymbolRow(found.row.path, found.row.language, members[0])
                    return [Hit(target.repo, target.commit, row, SYNTACTIC, reason)]
                deeper = self._js_inherited_member(target, found.row.path, name, depth - 1)
                if deeper:
                    return deeper
        return []

    def _jsdoc_types(self, target: Target) -> JsDocTypes | None:
        if target.queries not in ("javascript", "typescript"):
            return None
        return JsDocTypes(
            lambda path: self._lines(target.repo, target.commit, path),
            target.index.symbols_in,
            lambda path, module: module_files(target.index, path, "javascript", module),
            lambda path: [(i.module, i.name, i.alias) for i in target.index.imports_of(path)],
            target.commit,
        )

    def _js_destructuredreceiver_name(self, target: Target, name: str, types: JsDocTypes | None) -> list[str]:
        """A bare JavaScript `name` the file binds with `const { name } = receiver`: that local is `receiver.name`, so
        its definition is the member's (`const { renderer } = this`). Not when the file defines or imports a `name`
        of its own, or destructures it from several receivers."""
        if types is None or self._alias_bound(target, name):
            return []
        if any(s.kind not in ("method", "field") for s in target.index.symbols_in(target.path, name)):
            return []
        receivers = {receiver for _, key, local, receiver in types.destructured(target.path) if key == local == name}
        return next(iter(receivers)).split(".") if len(receivers) == 1 else []

    def _js_contextual_property(self, target: Target, name: str, types: JsDocTypes | None) -> list[Hit]:
        """A bare JavaScript `name` the file writes as the property of objects their context types (`this.add({
        name })` with add's `@param`, `xs.map(({ name }) => ...)` over a typed array: js_scopes._typing_context):
        the member of that type, when those the file's uses reach agree. Not when the file defines or imports a
        `name` of its own."""
        if types is None or self._alias_bound(target, name):
            return []
        if any(s.kind not in ("method", "field") for s in target.index.symbols_in(target.path, name)):
            return []
        grammar = grammar_of(target.path)
        spots = target.index.occurrences(name).get(target.path, [])
        if grammar is None or not spots:
            return []
        data = "\n".join(types.read(target.path)).encode()
        found: set[tuple[str, Symbol]] = set()
        for (line, _column), owner in destructured_members(grammar, data, name, spots).items():
            if _CONTEXT_PREFIX.match(owner):
                members = types.members(target.path, owner.split("."), name, line)
                found |= members if len(members) == 1 else set()
        if len(found) != 1:
            return []
        path, symbol = found.pop()
        grammar = grammar_of(path)
        row = SymbolRow(path, grammar.label if grammar else target.language, symbol)
        return [Hit(target.repo, target.commit, row, SYNTACTIC, "member of the type its context gives the object")]

    def _js_jsdoc_member(self, target: Target, name: str, qualifier: list[str], types: JsDocTypes | None) -> list[Hit]:
        """JavaScript `obj.name` where JSDoc says what `obj` is (`@param {import('./x.js').T} obj`): jsdoc.py."""
        if types is None or not qualifier or self._alias_bound(target, qualifier[0]):
            return []
        found = types.member(target.path, qualifier, name) or self._js_narrowed_member(target, name, qualifier, types)
        if found is None:
            return []
        path, symbol = found
        grammar = grammar_of(path)
        row = SymbolRow(path, grammar.label if grammar else target.language, symbol)
        return [Hit(target.repo, target.commit, row, SYNTACTIC, "member of its JSDoc type")]

    @staticmethod
    def _js_narrowed_member(
        target: Target, name: str, qualifier: list[str], types: JsDocTypes
    ) -> tuple[str, Symbol] | None:
        """`node.data` on a union where the file's uses read it narrowed (`node.type === 'Text' && node.data`): the
        member each use reaches, when they agree (uses the union leaves open say nothing)."""
        written = re.compile(r"(?<![\w$.])" + re.escape(".".join([*qualifier, name])) + r"(?![\w$])")
        found: set[tuple[str, Symbol]] = set()
        for number, line in enumerate(types.read(target.path), start=1):
            if name in line:
                for use in written.finditer(line):
                    members = types.members(target.path, qualifier, name, number, line[: use.start()])
                    found |= members if len(members) == 1 else set()
        return found.pop() if len(found) == 1 else None

    def _js_receiver_member(self, target: Target, name: str, qualifier: list[str]) -> list[Hit]:
        """JS/TS `block.name`: a member of a class named like its receiver (`Block`), nearest file first.

        Without types the receiver's name is the best hint there is, and JavaScript code names a variable after
        its class (`renderer`, `parser`, `this.block_`); an import alias or `this` is left to the other steps.
        """
        if target.queries not in ("javascript", "typescript") or not qualifier:
            return []
        receiver = receiver_name(qualifier[-1])
        if receiver in ("this", "self", "super", "") or self._alias_bound(target, qualifier[0]):
            return []
        rows = [
            r
            for r in target.index.symbols_named(name)
            if r.symbol.kind in ("method", "field") and names_class(receiver, r.symbol.container.split(".")[-1])
        ]
        here = target.path.split("/")

        def nearness(row: SymbolRow) -> tuple[int, str]:
            there = row.path.split("/")
            shared = next((i for i, (a, b) in enumerate(zip(here, there, strict=False)) if a != b), len(here))
            return (-shared, row.path)

        rows.sort(key=nearness)
        reason = "member of the class named like its receiver"
        return [Hit(target.repo, target.commit, r, SEARCH_BASED, reason) for r in rows]

    def _js_reexport(
        self, target: Target, name: str, files: list[str], module: str, depth: int, seen: set[str] | None = None
    ) -> list[Hit]:
        """`export * from "./x"`, `export { name } from "./x"` in a barrel (index.ts): follow the re-export."""
        seen = set() if seen is None else seen
        if depth == 0:
            return []
        for path in files:
            if path in seen:
                continue
            seen.add(path)  # barrels that re-export each other would otherwise go round
            for imp in target.index.imports_of(path):
                if imp.name == "*" or (imp.alias == name and imp.name not in ("", "default")):
                    wanted = name if imp.name == "*" else imp.name
                    further = [p for p in module_files(target.index, path, target.queries, imp.module) if p not in seen]
                    found = self._hits_in(target, wanted, further, [], f"imported from {module} (re-exported)")
                    found = [h for h in found if not h.row.symbol.container]  # a module exports top-level names
                    if not found:
                        found = self._js_reexport(target, wanted, further, module, depth - 1, seen)
                    if found:
                        return found
        return []

    def _js_default_export(self, target: Target, files: list[str], module: str) -> list[Hit]:
        """`import Local from "./x"`: what x exports as default, whatever its own name (`export default class X`)."""
        for path in files:
            for line in self._lines(target.repo, target.commit, path):
                found = _JS_DEFAULT_EXPORT.match(line)
                if found:
                    hits = self._hits_in(target, found.group(1), [path], [], f"default export of {module}")
                    if hits:
                        return hits
        return []

    def _commonjs(self, target: Target, name: str, qualifier: list[str], depth: int) -> list[Hit]:
        """JS/TS names that CommonJS binds in target.path, followed to their definitions: `exports.name` (what the
        file exports under that name), a local bound by `require` (`var X = require('./x')`, `var f =
        require('./x').f`, `const { f } = require('./x')`), and `x.name` with `x` such a local. [] when the name is
        not bound that way (the other rules then decide)."""
        if target.queries not in ("javascript", "typescript") or depth == 0:
            return []
        if qualifier in (["exports"], ["module", "exports"]):
            binding = member_export(self._lines(target.repo, target.commit, target.path), name)
            return self._commonjs_follow(target, target.path, binding, depth) if binding else []
        if len(qualifier) > 1:
            return []
        alias = qualifier[0] if qualifier else name
        for imp in target.index.imports_of(target.path):
            if imp.alias != alias or imp.name in ("*", "default") or not self._required(target, target.path, imp):
                continue
            files = module_files(target.index, target.path, target.queries, imp.module)
            if qualifier and imp.name == "":
                found = self._commonjs_member(target, files, name, depth)  # `x.name`, x = require('./m')
            elif qualifier:
                found = []  # `f.name` with f = require('./m').f: a member of whatever f is
            elif imp.name == "":
                found = self._commonjs_value(target, files, depth)  # `X`, X = require('./m')
            else:
                found = self._commonjs_member(target, files, imp.name, depth)  # f = require('./m').f, { f }
            if found:
                reason = f"required from {imp.module}"
                return [replace(h, reason=reason if h.reason.startswith("same file") else h.reason) for h in found]
        return []

    def _required(self, target: Target, path: str, imp: ImportRow) -> bool:
        """Whether the import statement `imp` of `path` is a `require` call (not an ES import)."""
        lines = self._lines(target.repo, target.commit, path)
        for text in lines[imp.line - 1 : imp.line + _STATEMENT_LINES]:
            if "require" in text:
                return True
            if re.search(r"\bfrom\s*[\"']|^\s*import\b", text):
                return False
        return False

    def _bound_by_require(self, target: Target, path: str, name: str) -> bool:
        return any(i.alias == name and self._required(target, path, i) for i in target.index.imports_of(path))

    def _commonjs_value(self, target: Target, files: list[str], depth: int) -> list[Hit]:
        """What `require('./m')` returns: m's `module.exports = X` followed to X, else its ES default export."""
        for path in files:
            value = default_export(self._lines(target.repo, target.commit, path))
            found = self._commonjs_follow(target, path, value, depth - 1) if value else []
            if found:
                return found
        return self._js_default_export(target, files, files[0]) if files else []

    def _commonjs_member(self, target: Target, files: list[str], name: str, depth: int) -> list[Hit]:
        """`require('./m').name`: what m exports as `name` (`exports.name = ...`, `module.exports = { name }`, a
        top-level definition, or the member of the module m hands out with `module.exports = require(...)`)."""
        for path in files:
            lines = self._lines(target.repo, target.commit, path)
            binding = member_export(lines, name)
            found = self._commonjs_follow(target, path, binding, depth - 1) if binding else []
            if not found:
                found = [
                    h
                    for h in self._hits_in(target, name, [path], [], f"exported by {path}")
                    if not h.row.symbol.container
                ]
            if not found:
                value = default_export(lines)
                if value is not None and value.module:
                    further = module_files(target.index, path, target.queries, value.module)
                    found = self._commonjs_member(target, further, value.member or name, depth - 1)
            if found:
                return found
        return []

    def _commonjs_follow(self, target: Target, path: str, binding: Binding, depth: int) -> list[Hit]:
        """The definition a CommonJS binding of `path` stands for."""
        if depth <= 0:
            return []
        if binding.module:
            files = module_files(target.index, path, target.queries, binding.module)
            if binding.member:
                return self._commonjs_member(target, files, binding.member, depth)
            return self._commonjs_value(target, files, depth)
        at = replace(target, path=path)
        if path != target.path or self._bound_by_require(target, path, binding.name):
            found = self._commonjs(at, binding.name, [], depth - 1)
            if found:
                return found
        found = [h for h in self._same_file(at, binding.name, []) if not h.row.symbol.container]
        return found or self._through_imports(at, binding.name, [])[0]

    @staticmethod
    def _js_visible_everywhere(
        index: Indexed, path: str, name: str, kind: str, visible: dict[str, int], aliases: dict[str, set[str]]
    ) -> None:
        """JS/TS names that need no import: members, enum members, and the globals of declaration files.

        A member is reached through objects that any file may hold (`Enum.member` likewise), and a declaration file
        without imports (`declare const __DEV__: boolean` in global.d.ts) declares globals: every file naming it
        may use it.
        """
        script_globals = path.endswith(".d.ts") and not index.imports_of(path)
        enum_member = kind == "constant" and any(
            s.kind == "constant" and s.container for s in index.symbols_in(path, name)
        )
        if kind not in ("method", "field") and not enum_member and not script_globals:
            return
        here = posixpath.dirname(path)
        for p in index.occurrences(name):
            grammar = grammar_of(p)
            if grammar is not None and grammar.queries in ("javascript", "typescript"):
                visible.setdefault(p, 1 if posixpath.dirname(p) == here else 2)
                if script_globals:
                    aliases.setdefault(p, set()).add("")

    @staticmethod
    def _js_occurrences(
        target: Target,
        definition: Symbol,
        occurrences: dict[str, list[tuple[int, int, str]]],
        types: JsDocTypes | None,
    ) -> tuple[dict[str, list[tuple[int, int, str]]], dict[str, dict[tuple[int, int], str]]]:
        """JS/TS occurrences as scopes and destructuring read them (unchanged for other languages)."""
        if types is None:
            return occurrences, {}
        unshadowed = JavaScriptResolver._js_unshadowed(definition, occurrences, types)
        return JavaScriptResolver._js_destructured(definition, unshadowed, types)

    @staticmethod
    def _js_unshadowed(
        definition: Symbol, occurrences: dict[str, list[tuple[int, int, str]]], types: JsDocTypes
    ) -> dict[str, list[tuple[int, int, str]]]:
        """The occurrences of a module-level JS/TS name without the plain uses a local binding of the same name
        covers (a parameter, a `const` in a block, a catch or `for ... of` binding: js_scopes.py)."""
        if definition.container or definition.kind in ("method", "field"):
            return occurrences
        kept: dict[str, list[tuple[int, int, str]]] = {}
        for path, spots in occurrences.items():
            grammar = grammar_of(path)
            if grammar is None or grammar.queries not in ("javascript", "typescript"):
                kept[path] = spots
                continue
            data = "\n".join(types.read(path)).encode()
            hidden = shadowed_uses(grammar, data, definition.name, spots)
            kept[path] = [spot for spot in spots if spot not in hidden]
        return kept

    @staticmethod
    def _js_destructured(
        definition: Symbol, occurrences: dict[str, list[tuple[int, int, str]]], types: JsDocTypes
    ) -> tuple[dict[str, list[tuple[int, int, str]]], dict[str, dict[tuple[int, int], str]]]:
        """A JS/TS member's occurrences with `const { name } = receiver` read as the member access
        `receiver.name` (role "m"), and per file those spots' receivers."""
        if definition.kind not in ("method", "field") or not definition.container:
            return occurrences, {}
        receivers: dict[str, dict[tuple[int, int], str]] = {}
        kept: dict[str, list[tuple[int, int, str]]] = {}
        for path, spots in occurrences.items():
            grammar = grammar_of(path)
            found: dict[tuple[int, int], str] = {}
            if grammar is not None and grammar.queries in ("javascript", "typescript"):
                data = "\n".join(types.read(path)).encode()
                found = {
                    spot: receiver
                    for spot, receiver in destructured_members(grammar, data, definition.name, spots).items()
                    if _RECEIVER_CHAIN.fullmatch(receiver)
                    or (
                        _CONTEXT_PREFIX.match(receiver)
                        and _RECEIVER_CHAIN.fullmatch(_CONTEXT_PREFIX.sub("", receiver) or "_")
                    )
                }
            if found:
                receivers[path] = found
            kept[path] = [(line, col, "m" if (line, col) in found else role) for line, col, role in spots]
        return kept, receivers

    @staticmethod
    def _js_reexport_importers(
        index: Indexed,
        queries: str,
        name: str,
        barrels: list[str],
        visible: dict[str, int],
        aliases: dict[str, set[str]],
    ) -> None:
        """Files that get `name` through barrels (`export * from`, `export { name } from`), a few hops deep.

        `barrels`: files that import `name` itself (or everything) from the defining file, so they may re-export
        it. A file importing `name` (or `*`) from one of them sees the bare name; `import * as ns` sees `ns.name`.
        """
        seen = set(barrels) | set(visible)
        frontier = barrels
        resolved: dict[tuple[str, str], list[str]] = {}
        mentioning: dict[str, list[ImportRow]] = {}
        for _ in range(_JS_REEXPORT_HOPS):
            further: list[str] = []
            for via in frontier:
                stem = posixpath.basename(via).split(".", 1)[0]
                # An index file is imported by its folder's name (`"./core"`) or as `"./core/index"`.
                fragments = [stem]
                if stem == "index" and posixpath.dirname(via):
                    fragments.insert(0, posixpath.basename(posixpath.dirname(via)))
                for fragment in fragments:
                    if fragment not in mentioning:
                        mentioning[fragment] = index.imports_mentioning(fragment)
                for imp in dict.fromkeys(i for fragment in fragments for i in mentioning[fragment]):
                    if imp.path == via or via not in resolved_import(index, queries, imp, resolved):
                        continue
                    if imp.name in (name, "*"):
                        aliases.setdefault(imp.path, set()).add("")
                    elif imp.name == "" and imp.alias:
                        aliases.setdefault(imp.path, set()).add(imp.alias)
                    else:
                        continue
                    visible.setdefault(imp.path, 2)
                    if imp.path not in seen and imp.name in (name, "*"):
                        seen.add(imp.path)
                        further.append(imp.path)
            frontier = further
