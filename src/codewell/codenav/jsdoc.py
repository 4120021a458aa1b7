"""JavaScript members through JSDoc types: `info.children` where `@param {import('./x.js').Node} info` says what
`info` is, `this.node.expression` where the field carries `/** @type {import('./Binding.js').default} */`.

Only types written as `import('module').Name` (or a `.d.ts` member's `name: Type`) are followed: they name their
module, so no inference is needed. Anything else (unions, generics, arrays, a name declared twice with different
types in one file) answers nothing and leaves the question to the other rules.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from codewell.codenav.extract import Symbol

__all__ = ["JsDocTypes"]

# `import('./x.js').Name`, type arguments (`PromiseInfo<T>`) dropped: the members are the generic type's.
_IMPORT_TYPE = re.compile(r"""\s*import\(\s*['"]([^'"]+)['"]\s*\)\.([A-Za-z_$][\w$]*)\s*(?:<.*>)?\s*""")
# `/** @extends Wrapper<import('./Text.js').default> */`: the type argument a subclass gives its base.
_EXTENDS_TAG = re.compile(r"@extends\s*\{?\s*([A-Za-z_$][\w$]*)\s*<(.+)>\s*\}?")
_TEMPLATE_TAG = re.compile(r"@template\s*(?:\{.*?\}\s*)?\[?([A-Za-z_$][\w$]*)")
_TYPE_NAME = re.compile(r"[A-Za-z_$][\w$]*")
_EXTENDS = re.compile(r"\b(?:interface|class)\s+([A-Za-z_$][\w$]*)[^{]*?\bextends\s+([^{]+)\{")
_BASE_HOPS = 4
_DOC_LINES_ABOVE = 3  # a field's `/** @type {T} */` sits on the lines just above it


@dataclass(frozen=True, slots=True)
class _Type:
    path: str  # the module that declares it
    name: str  # a class, an interface or a type alias there; "default" for the default export


@dataclass(slots=True)
class JsDocTypes:
    lines_of: Callable[[str], list[str]]
    symbols_of: Callable[[str], Sequence[Symbol]]
    resolve: Callable[[str, str], list[str]]  # (importing path, module spelling) → files
    # One question answers many occurrences of a file: lines and declared types are kept per instance.
    _lines: dict[str, list[str]] = field(default_factory=dict)
    _types: dict[tuple[str, str, bool], _Type | None] = field(default_factory=dict)
    _bases: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    _members: dict[tuple[_Type, str], tuple[str, Symbol] | None] = field(default_factory=dict)

    def read(self, path: str) -> list[str]:
        """`path`'s lines, read once per instance."""
        if path not in self._lines:
            self._lines[path] = self.lines_of(path)
        return self._lines[path]

    def member(self, path: str, qualifier: list[str], name: str) -> tuple[str, Symbol] | None:
        """The definition of `qualifier.name` used in `path` when JSDoc types say what each receiver is."""
        first, rest = qualifier[0], qualifier[1:]
        if first == "this":
            if not rest:
                return None
            current = self._declared(path, rest[0], field=True) or self._from_type_argument(path, rest[0])
            rest = rest[1:]
        else:
            current = self._declared(path, first, field=False)
        for part in rest:
            found = self._member_of(current, part) if current is not None else None
            current = self._type_of_member(*found) if found is not None else None
        return self._member_of(current, name) if current is not None else None

    def _declared(self, path: str, variable: str, *, field: bool) -> _Type | None:
        """The one JSDoc type `path` gives `variable` (a `@param`, or the `@type` above its declaration)."""
        key = (path, variable, field)
        if key not in self._types:
            self._types[key] = self._declared_once(path, variable, field=field)
        return self._types[key]

    def _declared_once(self, path: str, variable: str, *, field: bool) -> _Type | None:
        lines = self.read(path)
        param = re.compile(r"@param\s*\{(.+)\}\s*\[?" + re.escape(variable) + r"\b(?![.\w$])")
        declared = re.compile(
            r"\s*(?:(?:export\s+)?(?:const|let|var)\s+|this\.)?" + re.escape(variable) + r"\s*(?:[;=]|$)"
        )
        spellings: set[str] = set()
        for number, line in enumerate(lines):
            if variable not in line:
                continue
            if not field and (found := param.search(line)):
                spellings.add(found.group(1))
            if declared.match(line):
                for above in lines[max(0, number - _DOC_LINES_ABOVE) : number]:
                    if tagged := re.search(r"@type\s*\{(.+)\}", above):
                        spellings.add(tagged.group(1))
        return self._parsed(path, spellings.pop()) if len(spellings) == 1 else None

    def _from_type_argument(self, path: str, field: str) -> _Type | None:
        """`this.field` in a class declared `@extends Base<Arg>` whose base types `field` with its template
        parameter (`@template NodeType` ... `/** @type {NodeType} */ field;`): Arg."""
        lines = self.read(path)
        tags = [m for line in lines if (m := _EXTENDS_TAG.search(line))]
        if len(tags) != 1:
            return None
        base, argument = tags[0].group(1), tags[0].group(2)
        imported = re.compile(r"""\s*import\s+""" + re.escape(base) + r"""\s+from\s+['"]([^'"]+)['"]""")
        modules = [m.group(1) for line in lines if (m := imported.match(line))]
        files = self.resolve(path, modules[0]) if len(modules) == 1 else []
        if not files:
            return None
        base_lines = self.read(files[0])
        templates = {m.group(1) for line in base_lines if (m := _TEMPLATE_TAG.search(line))}
        declared = re.compile(r"\s*" + re.escape(field) + r"\s*[;=]")
        for number, line in enumerate(base_lines):
            if declared.match(line):
                for above in base_lines[max(0, number - _DOC_LINES_ABOVE) : number]:
                    tagged = re.search(r"@type\s*\{\s*([A-Za-z_$][\w$]*)\s*\}", above)
                    if tagged and tagged.group(1) in templates:
                        return self._parsed(path, argument)
        return None

    def _parsed(self, path: str, spelling: str) -> _Type | None:
        found = _IMPORT_TYPE.fullmatch(spelling)
        if found is None:
            return None
        files = self.resolve(path, found.group(1))
        return _Type(files[0], found.group(2)) if files else None

    def _class_name(self, kind: _Type) -> str:
        if kind.name != "default":
            return kind.name
        lines = self.read(kind.path)
        for symbol in self.symbols_of(kind.path):
            if symbol.kind == "class" and "export default" in lines[symbol.def_line - 1]:
                return symbol.name
        return ""

    def _member_of(self, kind: _Type, name: str) -> tuple[str, Symbol] | None:
        if (kind, name) not in self._members:
            self._members[kind, name] = self._member_once(kind, name)
        return self._members[kind, name]

    def _member_once(self, kind: _Type, name: str) -> tuple[str, Symbol] | None:
        """`name` in the class or interface `kind`, or its bases declared in the same file; for a type alias
        (`type Node = A | B`) the module's only member of that name, else the one whose owner the module's other
        types extend."""
        owner = self._class_name(kind)
        if not owner:
            return None
        members = [s for s in self.symbols_of(kind.path) if s.name == name and s.kind in ("method", "field")]
        if not members:
            return None
        if kind.path not in self._bases:
            text = "\n".join(self.read(kind.path))
            found = _EXTENDS.finditer(text)
            self._bases[kind.path] = {m.group(1): re.findall(r"[A-Za-z_$][\w$]*", m.group(2)) for m in found}
        bases = self._bases[kind.path]
        chain = [owner]
        for _ in range(_BASE_HOPS):
            chain += [b for c in chain for b in bases.get(c, []) if b not in chain]
        for cls in chain:
            for member in members:
                if member.container.split(".")[-1] == cls:
                    return kind.path, member
        declared = {s.name for s in self.symbols_of(kind.path) if s.kind in ("class", "interface")}
        if owner in declared:
            return None  # a class without that member: not this rule's to guess
        if len(members) == 1:
            return kind.path, members[0]  # the one type of the module with that member
        extended = {b for names in bases.values() for b in names}
        shared = [m for m in members if m.container.split(".")[-1] in extended]
        return (kind.path, min(shared, key=lambda s: s.line)) if shared else None

    def _type_of_member(self, path: str, member: Symbol) -> _Type | None:
        lines = self.read(path)
        line = lines[member.def_line - 1] if member.def_line <= len(lines) else ""
        if path.endswith(".ts"):
            written = re.search(re.escape(member.name) + r"\??\s*:\s*([^;]+?)\s*;?\s*$", line)
            if written is None:
                return None
            spelling = written.group(1)
            if _TYPE_NAME.fullmatch(spelling):
                return _Type(path, spelling)
            return self._parsed(path, spelling)
        for above in reversed(lines[max(0, member.def_line - 1 - _DOC_LINES_ABOVE) : member.def_line - 1]):
            if tagged := re.search(r"@type\s*\{(.+)\}", above):
                return self._parsed(path, tagged.group(1))
        return None
