"""JavaScript members through JSDoc types: `info.children` where `@param {import('./x.js').Node} info` says what
`info` is, `this.node.expression` where the field carries `/** @type {import('./Binding.js').default} */`.

A type is followed where the file names it the way TypeScript's checker binds it in a JavaScript file:
`import('module').Name`; a plain `Name` that is a class, interface or type alias of the same file, a
`@typedef {...} Name` there, or a name the file imports (`import Block from './Block.js'`); `Name | null` (the
value is that or nothing); `Name[]` and `Array<Name>` for their elements. A variable is typed by its `@param`, the
`@type` above it or cast on its value (`/** @type {Name} */ (value)`), what it is built with (`new Name()`), the
receiver it is assigned (`const parent = this.parent`), the `@returns` of the function whose result it is
(`const block = create_block()`, `block.child()`), the receiver it is destructured from (`const { renderer } = this`)
and the array it walks or indexes (`for (const x of list)`, the parameter of `list.forEach((x) => ...)`, also after
`list.filter(...)`, `list[0]`, `list.find(...)`).

Members are looked up in the class, then its bases (`extends`, in the same file or imported); `this.x` of a field a
base class in another module declares has the type the base gives it; a union's member is the one its types that
have such a member agree on (the code reading it has narrowed the union to them), and for find_references each of
its types' members, once the union is narrowed by the tests that guard the use (`node.type === 'Text' &&`,
`instanceof`, the `if`/`while` conditions around it). An object's properties take the type of their context
(`members` with a receiver from js_scopes._typing_context: an array's element, a parameter, a `@returns`).
A variable bound several times in a file is read through the binding nearest above the use when the use's line
is known (a `const` nothing types included), else through the bindings that answer, when they agree. Anything else
(generics, types of libraries) answers nothing and leaves the question to the other rules.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Generic, TypeVar

from codewell.codenav.extract import Symbol

__all__ = ["JsDocTypes"]

_V = TypeVar("_V")
_Member = tuple[str, Symbol]  # (the path that declares it, the member)

# `import('./x.js').Name`, type arguments (`PromiseInfo<T>`) dropped: the members are the generic type's.
_IMPORT_TYPE = re.compile(r"""\s*import\(\s*['"]([^'"]+)['"]\s*\)\.([A-Za-z_$][\w$]*)\s*(?:<.*>)?\s*""")
# `/** @extends Wrapper<import('./Text.js').default> */`: the type argument a subclass gives its base.
_EXTENDS_TAG = re.compile(r"@extends\s*\{?\s*([A-Za-z_$][\w$]*)\s*<(.+)>\s*\}?")
_TEMPLATE_DEFAULT = re.compile(r"@template\s*(?:\{.*?\}\s*)?\[\s*([A-Za-z_$][\w$]*)\s*=\s*(.+?)\s*\]\s*$")
_TEMPLATE_TAG = re.compile(r"@template\s*(?:\{.*?\}\s*)?\[?([A-Za-z_$][\w$]*)")
_TYPE_NAME = re.compile(r"[A-Za-z_$][\w$]*")
_PLAIN_TYPE = re.compile(r"\s*([A-Za-z_$][\w$]*)\s*(?:<.*>)?\s*")
_ARRAY_TYPE = re.compile(r"\s*(?:Array\s*<(.+)>|(.+?)\s*\[\s*\])\s*")
_NOTHING = re.compile(r"^\s*(?:null|undefined)\s*$")
_TYPEDEF = re.compile(r"@typedef\s*\{")
_TYPEDEF_NAME = re.compile(r"\s*([A-Za-z_$][\w$]*)")
_COMMENT_MARGIN = re.compile(r"\n\s*\*(?!/)")  # a doc comment's line start: ` * `
_CHAIN = r"(this(?:\.[A-Za-z_$][\w$]*)+|[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)"
# Array methods whose callback's first parameter is an element of the array.
_ELEMENT_CALLBACKS = r"(?:forEach|map|filter|find|findLast|some|every|flatMap|findIndex)"
_RECEIVER_BEFORE = re.compile(r"(?<![\w$.)\]])" + _CHAIN + r"\s*$")  # the receiver a `.method(` follows
# `const { a, b: local, c = 1 } = receiver` (a flat pattern; a nested one or a call's result is left out).
_DESTRUCTURING = re.compile(r"\b(?:const|let|var)\s*\{([^{}]*)\}\s*=\s*" + _CHAIN + r"(?![\w$.(\[])")
_PATTERN_ITEM = re.compile(r"\s*([A-Za-z_$][\w$]*)\s*(?::\s*([A-Za-z_$][\w$]*)\s*)?(?:=[^,]*)?")
_DECLARED_KINDS = frozenset({"class", "interface", "type alias", "enum"})
_CHAIN_DEPTH = 3  # `for (const a of b.c)` whose `b` is itself a loop variable, and so on
_EXTENDS = re.compile(r"\b(?:interface|class)\s+([A-Za-z_$][\w$]*)[^{]*?\bextends\s+([^{]+)\{")
_BASE_HOPS = 4
_DOC_LINES_ABOVE = 3  # a field's `/** @type {T} */` sits on the lines just above it
_TYPE_TAG = re.compile(r"@type\s*\{(.+)\}")
_RETURNS_TAG = re.compile(r"@returns?\s*\{(.+)\}")
# Narrowing a union: the lines above a use searched for the `if` blocks around it, a block's header, a guard's rest.
_GUARD_LINES_ABOVE = 200
_DECLARATION = re.compile(r"\s*(?:export\s+)?(?:const|let|var)\s")
_HEADER_LINES = 3
# Array methods whose result is an element of the array, and those whose result is such an array.
_ARRAY_ELEMENT_RESULTS = frozenset({"find", "findLast", "at", "pop", "shift"})
_ARRAY_RESULTS = frozenset({"filter", "slice", "concat", "reverse", "sort", "toSorted", "toReversed"})
_ARRAY_CALL_BEFORE = re.compile(r"\.\s*(?:" + "|".join(sorted(_ARRAY_RESULTS)) + r")\s*$")
_CALL_CHARS = 2000  # how far back the `(` of a call's arguments is looked for
_PARAM_TAG = re.compile(r"@param\s*\{(.+)\}")  # a function's parameter list may run over the lines after its name
_IF_HEADER = re.compile(r"\s*(?:\}\s*else\s+)?(?:if|while)\s*\((.*)\)\s*\{?\s*$")
_IF_OPEN = re.compile(r"\bif\s*\(")
_HEADER_END = re.compile(r"\s*\)\s*\{\s*")
_GUARDS_REST = re.compile(r"\s*\)*\s*(?:&&|\?)")
_STRING_LITERAL = re.compile(r"\s*(['\"])([^'\"]*)\1\s*")


@lru_cache(maxsize=2048)
def _variable_patterns(variable: str, field: bool) -> tuple[re.Pattern[str], ...]:
    """The patterns `_spellings_in` reads a variable's (or a `this.` field's) types with, compiled once per name:
    `@param`, a declaration, `new`, a cast, an assigned receiver, a call's result, `for ... of`, an indexed element,
    element callbacks."""
    name = re.escape(variable)
    declaring = r"\bthis\." if field else r"\b(?:const|let|var)\s+"
    return (
        re.compile(r"@param\s*\{(.+)\}\s*\[?" + name + r"\b(?![.\w$])"),
        re.compile(r"\s*(?:(?:export\s+)?(?:const|let|var)\s+|this\.)?" + name + r"\s*(?:[;=]|$)"),
        re.compile(declaring + name + r"\s*=\s*new\s+([A-Za-z_$][\w$]*)\s*[(<]"),
        re.compile(declaring + name + r"\s*=\s*/\*\*\s*@type\s*\{(.+?)\}\s*\*/\s*\("),
        re.compile(declaring + name + r"\s*=\s*" + _CHAIN + r"\s*;?\s*$"),
        re.compile(declaring + name + r"\s*=\s*(?:await\s+)?" + _CHAIN + r"\s*\("),
        re.compile(r"\bfor\s*\(\s*(?:const|let|var)\s+" + name + r"\s+of\s+" + _CHAIN + r"\s*\)"),
        # `const variable = list[i]`: an element of the array.
        re.compile(declaring + name + r"\s*=\s*" + _CHAIN + r"\s*\[[^\[\]]*\]\s*;?\s*$"),
        # `.forEach((variable) =>`, on the receiver's line or a later one (`xs\n  .filter(...)`).
        re.compile(
            r"\.\s*"
            + _ELEMENT_CALLBACKS
            + r"\s*\(\s*(?:async\s+)?(?:function\s*)?(?:\(\s*"
            + name
            + r"\b(?!\s*[.:=])|"
            + name
            + r"\s*=>)"
        ),
    )


class _Memo(Generic[_V]):
    """A bounded map shared by the questions of every thread: the oldest entries go first."""

    def __init__(self, size: int) -> None:
        self._data: dict[tuple[str, str, str, bool], _V] = {}
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str, bool]) -> _V | None:
        with self._lock:
            return self._data.get(key)

    def put(self, key: tuple[str, str, str, bool], value: _V) -> None:
        with self._lock:
            self._data[key] = value
            while len(self._data) > self._size:
                del self._data[next(iter(self._data))]


# (revision, path, variable, is a field) → what the file says; a few files' lines (a file is read whole).
_LINES: _Memo[list[str]] = _Memo(64)
_DESTRUCTURED: _Memo[tuple[tuple[int, str, str, str], ...]] = _Memo(1024)
_SPELLINGS: _Memo[frozenset[tuple[int, str]]] = _Memo(8192)
_BASES: _Memo[dict[str, list[str]]] = _Memo(1024)
_TYPEDEFS: _Memo[dict[str, str]] = _Memo(1024)
_SYMBOLS: _Memo[tuple[Symbol, ...]] = _Memo(2048)  # a revision's symbols never change either (indexed once)


@dataclass(frozen=True, slots=True)
class _Type:
    path: str  # the module that declares it
    name: str  # a class, an interface or a type alias there; "default" for the default export
    alternatives: tuple[_Type, ...] = ()  # a union `A | B` of types it names (path and name then empty)


@dataclass(slots=True)
class JsDocTypes:
    lines_of: Callable[[str], list[str]]
    symbols_of: Callable[[str], Sequence[Symbol]]
    resolve: Callable[[str, str], list[str]]  # (importing path, module spelling) → files
    imports_of: Callable[[str], Sequence[tuple[str, str, str]]]  # path → (module, imported name, local name)
    # The commit the files are read at: what is read from its files' text is kept across questions under it (a
    # commit's files never change). Empty: kept for this instance only.
    revision: str = ""
    # One question answers many occurrences of a file: lines and declared types are kept per instance.
    _lines: dict[str, list[str]] = field(default_factory=dict)
    _types: dict[tuple[str, str, bool, bool], _Type | None] = field(default_factory=dict)
    _names: dict[tuple[str, str], _Type | None] = field(default_factory=dict)
    _bases: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    _texts: dict[str, str] = field(default_factory=dict)
    _symbol_lists: dict[str, Sequence[Symbol]] = field(default_factory=dict)
    _members: dict[tuple[_Type, str], tuple[str, Symbol] | None] = field(default_factory=dict)

    def read(self, path: str) -> list[str]:
        """`path`'s lines, read once per instance (and kept a while for the next questions about the revision)."""
        if path not in self._lines:
            kept = _LINES.get((self.revision, path, "", False)) if self.revision else None
            self._lines[path] = kept if kept is not None else self.lines_of(path)
            if self.revision and kept is None:
                _LINES.put((self.revision, path, "", False), self._lines[path])
        return self._lines[path]

    def destructured(self, path: str) -> tuple[tuple[int, str, str, str], ...]:
        """`const { key: local } = receiver` (and `{ key }`, `{ key = fallback }`) in `path`: (line, key, local,
        receiver as written), for receivers that are names or member chains (`this`, `node`, `this.renderer`)."""
        key = (self.revision, path, "", False)
        found = _DESTRUCTURED.get(key) if self.revision else None
        if found is None:
            found = _destructurings(self._text(path))
            if self.revision:
                _DESTRUCTURED.put(key, found)
        return found

    def _bases_in(self, path: str) -> dict[str, list[str]]:
        """The classes and interfaces `path` declares with `extends`: name → the names it extends."""
        if path not in self._bases:
            kept = _BASES.get((self.revision, path, "", False)) if self.revision else None
            if kept is None:
                found = _EXTENDS.finditer(self._text(path)) if "extends" in self._text(path) else iter(())
                kept = {m.group(1): re.findall(r"[A-Za-z_$][\w$]*", m.group(2)) for m in found}
                if self.revision:
                    _BASES.put((self.revision, path, "", False), kept)
            self._bases[path] = kept
        return self._bases[path]

    def _text(self, path: str) -> str:
        if path not in self._texts:
            self._texts[path] = "\n".join(self.read(path))
        return self._texts[path]

    def _symbols(self, path: str) -> Sequence[Symbol]:
        if path not in self._symbol_lists:
            kept = _SYMBOLS.get((self.revision, path, "", False)) if self.revision else None
            if kept is None:
                kept = tuple(self.symbols_of(path))
                if self.revision:
                    _SYMBOLS.put((self.revision, path, "", False), kept)
            self._symbol_lists[path] = kept
        return self._symbol_lists[path]

    def member(
        self, path: str, qualifier: list[str], name: str, line: int | None = None, depth: int = _CHAIN_DEPTH
    ) -> tuple[str, Symbol] | None:
        """The definition of `qualifier.name` used in `path` when JSDoc types say what each receiver is.

        A variable the file binds several times (`node` in many functions) is read at `line` through its nearest
        binding above; without a line, through every binding whose type has such a member, when they agree."""
        found = self._answer(path, qualifier, name, line, depth, every=False)
        return next(iter(found)) if found else None

    def members(
        self, path: str, qualifier: list[str], name: str, line: int | None = None, before: str = ""
    ) -> frozenset[_Member]:
        """What `qualifier.name` in `path` may read, for find_references: like `member`, but a receiver typed by a
        union (`node: INode`) reads the member of each of its types that has one. TypeScript's checker gives a
        union's property every declaration of its constituents, and find-all-references of any of them lists the
        access (`node.type` is a reference to `Slot.type` and to the `Node.type` the other classes inherit).
        The union is narrowed first where the code at `line` (`before`: its text up to the use) tests the receiver
        (`_narrowed`). Empty: the JSDoc types say nothing."""
        return self._answer(path, qualifier, name, line, _CHAIN_DEPTH, every=True, before=before)

    def _answer(
        self,
        path: str,
        qualifier: list[str],
        name: str,
        line: int | None,
        depth: int,
        *,
        every: bool,
        before: str = "",
    ) -> frozenset[_Member]:
        """`member` (`every`: `members`): the definitions of the receiver's type, or nothing when unknown."""
        first = qualifier[0]
        if depth <= 0:
            return frozenset()

        def look(kind: _Type, member: str) -> frozenset[_Member]:
            if not every:
                return self._member_set(kind, member)
            if kind.alternatives and line is not None:
                kind = self._narrowed(path, line, before, ".".join(qualifier), kind)
            return self._members_of_each(kind, member)

        if first == "this":
            current = self._chain(path, qualifier, element=False, depth=depth)
            return look(current, name) if current is not None else frozenset()
        if ":" in first:  # an object typed by its context (js_scopes._typing_context)
            current = self._context(path, ".".join(qualifier), line, depth)
            return look(current, name) if current is not None else frozenset()
        spelled = self._spelled_as(path, first, False)
        if line is not None:
            nearest = max((number for number, _ in spelled if number <= line), default=0)
            spelled = frozenset(s for s in spelled if s[0] == nearest)
        answers: set[frozenset[_Member]] = set()
        for number, spelling in spelled:
            current = self._spelled(path, spelling, element=False, depth=depth, line=number)
            for at, part in enumerate(qualifier[1:], start=1):
                if every and current is not None and current.alternatives and line is not None:
                    # `owner.type === 'Attribute' && owner.parent.name`: the receiver narrowed first.
                    current = self._narrowed(path, line, before, ".".join(qualifier[:at]), current)
                found = self._member_of(current, part) if current is not None else None
                current = self._type_of_member(*found, via=current) if found is not None else None
            answers.add(look(current, name) if current is not None else frozenset())
        if line is None:
            answers.discard(frozenset())
        return answers.pop() if len(answers) == 1 else frozenset()

    def _context(self, path: str, context: str, line: int | None, depth: int) -> _Type | None:
        """The type an object literal or pattern takes from its context: `of:xs` an element of `xs`, `var:v` the
        type of `v`, `arg:N:callee` the type of the callee's parameter N (its `@param`)."""
        kind, _, rest = context.partition(":")
        if kind in ("of", "var"):
            return self._receiver(path, rest.split("."), line, element=kind == "of", depth=depth)
        if kind in ("ret", "param"):
            position, _, named = rest.rpartition(":") if kind == "param" else ("", "", rest)
            functions = [s for s in self._symbols(path) if s.kind in ("function", "method") and str(s.line) == named]
            if len(functions) != 1:
                return None
            if kind == "ret":
                return self._returned(path, functions[0], element=False)
            return self._nth_parameter(path, functions[0], int(position)) if position.isdigit() else None
        position, _, callee = rest.partition(":")
        parts = callee.split(".")
        if not position.isdigit() or not all(_TYPE_NAME.fullmatch(p) for p in parts):
            return None
        if len(parts) == 1:
            called = self._function(path, parts[0])
        elif parts[0] == "this" and len(parts) == 2 and line is not None:
            # `this.method(...)`: the method of the class around the call (or of its bases).
            around = [
                s
                for s in self._symbols(path)
                if s.kind == "class" and not s.container and s.def_line <= line <= s.def_end_line
            ]
            called = self._member_of(_Type(path, around[-1].name), parts[1]) if around else None
        else:
            called = self.member(path, parts[:-1], parts[-1], line, depth=depth - 1)
        return self._parameter(*called, int(position)) if called is not None else None

    def _receiver(self, path: str, parts: list[str], line: int | None, *, element: bool, depth: int) -> _Type | None:
        """The type of the receiver `parts` at `line` (`element`: of its elements), a variable read through its
        binding nearest above the line."""
        if depth <= 0:
            return None
        if parts[0] == "this" or line is None:
            return self._chain(path, parts, element=element, depth=depth)
        spelled = self._spelled_as(path, parts[0], False)
        nearest = max((number for number, _ in spelled if number <= line), default=0)
        kinds: set[_Type | None] = set()
        for _number, spelling in (s for s in spelled if s[0] == nearest):
            current = self._spelled(path, spelling, element=element and len(parts) == 1, depth=depth, line=nearest)
            for number, part in enumerate(parts[1:], start=2):
                found = self._member_of(current, part) if current is not None else None
                current = self._type_of_member(*found, element=element and number == len(parts)) if found else None
            kinds.add(current)
        return kinds.pop() if len(kinds) == 1 else None

    def _parameter(self, path: str, function: Symbol, position: int) -> _Type | None:
        """The type the `@param` of `function`'s parameter at `position` names (a plain name; not a pattern)."""
        lines = self.read(path)
        header = " ".join(lines[function.def_line - 1 : function.def_line + _HEADER_LINES])
        written = re.search(re.escape(function.name) + r"\s*\(([^()]*)\)", header)
        if written is None:
            return None
        parameters = [p.split("=")[0].strip().removeprefix("...") for p in written.group(1).split(",")]
        if position >= len(parameters) or not _TYPE_NAME.fullmatch(parameters[position]):
            return None
        tag = re.compile(r"@param\s*\{(.+)\}\s*\[?" + re.escape(parameters[position]) + r"\b(?![.\w$])")
        number = function.def_line - 1
        while number > 0 and lines[number - 1].strip().startswith(("*", "/**")):
            number -= 1
            if tagged := tag.search(lines[number]):
                return self._parsed(path, tagged.group(1), element=False)
        return None

    def _nth_parameter(self, path: str, function: Symbol, position: int) -> _Type | None:
        """The type of `function`'s parameter at `position` written as a pattern: its `@param` tag at that position
        (TypeScript's checker pairs an unnamed parameter with the tag in its place)."""
        lines = self.read(path)
        number, tags = function.def_line - 1, []
        while number > 0 and lines[number - 1].strip().startswith(("*", "/**")):
            number -= 1
            if tagged := _PARAM_TAG.search(lines[number]):
                tags.append(tagged.group(1))
        tags.reverse()  # read upwards
        return self._parsed(path, tags[position], element=False) if position < len(tags) else None

    def _narrowed(self, path: str, line: int, before: str, receiver: str, union: _Type) -> _Type:
        """The types of `union` left where the code tests `receiver` before using it, as TypeScript narrows: on the
        use's line (`receiver.type === 'Text' && ...`, `receiver instanceof Element ? ...`), or in the conditions of
        the `if` and `while` blocks around it (`if (receiver.type === 'A' || receiver.type === 'B') {`). A type whose
        discriminant this rule cannot read stays (as TypeScript keeps one typed `string`)."""
        lines = self.read(path)
        tests = _guards(before, receiver)
        indent = _indent(before) if before.strip() else None
        number = min(line, len(lines))
        while number > max(1, line - _GUARD_LINES_ABOVE):
            number -= 1
            text = lines[number - 1]
            if not text.strip():
                continue
            if indent is None:
                indent = _indent(text)
                continue
            if _indent(text) >= indent:
                continue
            indent = _indent(text)
            if _HEADER_END.fullmatch(text) and number > 1:
                # `) {` closing a condition over several lines: the header starts on the line above at this indentation.
                start = number - 1
                while start > 1 and _indent(lines[start - 1]) != indent:
                    start -= 1
                text = " ".join(part.strip() for part in lines[start - 1 : number])
                number = start
            header = _IF_HEADER.match(text)
            if header is not None:
                tests += _conditions(header.group(1), receiver)
            if indent == 0:
                break
        kept = list(union.alternatives)
        for member, values in tests:
            if member:
                narrowed = [k for k in kept if (v := self._discriminant(k, member)) is None or v & values]
            else:  # `instanceof`: the class the name means here (`default` or its own name: the same class)
                classes = {(c.path, self._class_name(c)) for value in values if (c := self._named(path, value))}
                narrowed = [k for k in kept if (k.path, self._class_name(k)) in classes]
            kept = narrowed or kept
        if len(kept) == len(union.alternatives):
            return union
        return kept[0] if len(kept) == 1 else _Type("", "", tuple(kept))

    def _discriminant(self, kind: _Type, member: str) -> frozenset[str] | None:
        """The string literals `kind`'s `member` may hold (`type: 'Text' | 'Comment'`, `/** @type {'Slot'} */`,
        `type = 'Slot'`, a base's `@template` parameter that `/** @extends Node<'Text'> */` fills), or None."""
        found = self._member_of(kind, member)
        if found is None:
            return None
        path, symbol = found
        lines = self.read(path)
        line = lines[symbol.def_line - 1] if symbol.def_line <= len(lines) else ""
        spelling = ""
        if path.endswith(".ts"):
            written = re.search(re.escape(member) + r"\??\s*:\s*([^;]+?)\s*;?\s*$", line)
            spelling = written.group(1) if written else ""
        else:
            for above in reversed(lines[max(0, symbol.def_line - 1 - _DOC_LINES_ABOVE) : symbol.def_line - 1]):
                if tagged := _TYPE_TAG.search(above):
                    spelling = tagged.group(1)
                    break
            if not spelling and (assigned := re.search(r"=\s*('[^']*'|\"[^\"]*\")\s*;?\s*$", line)):
                spelling = assigned.group(1)
        values = _literals(spelling)
        if values is not None or path == kind.path or not _TYPE_NAME.fullmatch(spelling.strip()):
            return values
        # `@type {Type}` of a base's template parameter: the argument the subclass's `@extends` gives it.
        templates = [m.group(1) for text in lines if (m := _TEMPLATE_TAG.search(text))]
        if spelling.strip() not in templates:
            return None
        position = templates.index(spelling.strip())
        own = self._class_name(kind)
        declared = [s for s in self._symbols(kind.path) if s.kind == "class" and s.name == own]
        if len(declared) != 1:
            return None
        kind_lines = self.read(kind.path)
        start = declared[0].def_line - 1
        for above in reversed(kind_lines[max(0, start - _DOC_LINES_ABOVE) : start]):
            if tagged := _EXTENDS_TAG.search(above):
                arguments = _alternatives(tagged.group(2), separator=",")
                return _literals(arguments[position]) if position < len(arguments) else None
        return None

    def _member_set(self, kind: _Type, name: str) -> frozenset[_Member]:
        found = self._member_of(kind, name)
        return frozenset() if found is None else frozenset({found})

    def _members_of_each(self, kind: _Type, name: str) -> frozenset[_Member]:
        """`name` in `kind`, or in each type of a union that has one (unknown when one of them cannot be read)."""
        if not kind.alternatives:
            return self._member_set(kind, name)
        return frozenset(m for k in kind.alternatives for m in self._members_of_each(k, name))

    def _chain(self, path: str, parts: list[str], *, element: bool, depth: int) -> _Type | None:
        """The type of the receiver `parts` (`info`, `this.node`, `a.b.c`) in `path`; `element`: of its elements."""
        if depth <= 0 or not parts:
            return None
        first, rest = parts[0], parts[1:]
        if first == "this":
            if not rest:
                return None
            last = element and len(rest) == 1
            current = (
                self._declared(path, rest[0], field=True, element=last, depth=depth)
                or (None if last else self._from_type_argument(path, rest[0]))
                or self._inherited_field(path, rest[0], element=last)
            )
            rest = rest[1:]
        else:
            current = self._declared(path, first, field=False, element=element and not rest, depth=depth)
        for number, part in enumerate(rest, start=1):
            found = self._member_of(current, part) if current is not None else None
            current = self._type_of_member(*found, element=element and number == len(rest)) if found else None
        return current

    def _declared(self, path: str, variable: str, *, field: bool, element: bool, depth: int) -> _Type | None:
        """The one type `path` gives `variable` (or its elements): every way the file types it must agree."""
        key = (path, variable, field, element)
        if key not in self._types:
            self._types[key] = None  # a loop variable typed through itself (`for (const c of c.children)`)
            kinds: set[_Type | None] = set()
            for _line, spelling in self._spelled_as(path, variable, field):
                kind = self._spelled(path, spelling, element=element, depth=depth)
                # What inference cannot tell (`xs.map((x) => ...)` over an untyped `xs`) says nothing either way; a
                # written type this rule cannot follow (`@param {string} x`) is another type.
                if kind is not None or not spelling.startswith(("of:", "new:", "at:", "call:", "untyped:")):
                    kinds.add(kind)
            self._types[key] = kinds.pop() if len(kinds) == 1 else None
        return self._types[key]

    def _spelled(self, path: str, spelling: str, *, element: bool, depth: int, line: int | None = None) -> _Type | None:
        """The type `spelling` (what `_spellings_in` read at `line`) gives a variable (`element`: its elements)."""
        if spelling.startswith("of:"):  # an element of the receiver that follows, as bound at that line
            parts = spelling[3:].split(".")
            return None if element else self._receiver(path, parts, line, element=True, depth=depth - 1)
        if spelling.startswith("untyped:"):  # `const x = []`: a binding nothing here types
            return None
        if spelling.startswith("new:"):  # built with `new Name(...)`
            return None if element else self._named(path, spelling[4:])
        if spelling.startswith("at:"):  # `variable = receiver`, `const { key: variable } = receiver` (receiver.key)
            return self._receiver(path, spelling[3:].split("."), line, element=element, depth=depth - 1)
        if spelling.startswith("call:"):  # `const x = f(...)`: what f's `@returns` says
            parts = spelling[5:].split(".")
            if len(parts) > 1 and parts[-1] in _ARRAY_ELEMENT_RESULTS | _ARRAY_RESULTS and not element:
                # `xs.find(...)` is an element of the array `xs`, `xs.filter(...)` such an array.
                whole = parts[-1] in _ARRAY_RESULTS
                array = self._receiver(path, parts[:-1], line, element=not whole, depth=depth - 1)
                if array is not None:
                    return array
            called = (
                self._function(path, parts[0])
                if len(parts) == 1
                else self.member(path, parts[:-1], parts[-1], depth=depth - 1)
            )
            return self._returned(*called, element=element) if called is not None else None
        return self._parsed(path, spelling, element=element)

    def _spelled_as(self, path: str, variable: str, field: bool) -> frozenset[tuple[int, str]]:
        key = (self.revision, path, variable, field)
        found = _SPELLINGS.get(key) if self.revision else None
        if found is None:
            found = _spellings_in(self._text(path), variable, field, () if field else self.destructured(path))
            if self.revision:
                _SPELLINGS.put(key, found)
        return found

    def _function(self, path: str, name: str) -> tuple[str, Symbol] | None:
        """The function a plain call `name(...)` in `path` runs: the file's own top-level one, or the one it imports
        under that name."""
        own = [s for s in self._symbols(path) if s.name == name and s.kind == "function" and not s.container]
        if own:
            return (path, own[0]) if len(own) == 1 else None
        for module, imported, alias in self.imports_of(path):
            if alias != name or imported in ("", "*"):
                continue
            files = self.resolve(path, module)
            if not files:
                return None
            lines = self.read(files[0])
            for symbol in self._symbols(files[0]):
                if symbol.kind != "function" or symbol.container:
                    continue
                line = lines[symbol.def_line - 1] if symbol.def_line <= len(lines) else ""
                if symbol.name == imported or (imported == "default" and "export default" in line):
                    return files[0], symbol
            return None
        return None

    def _returned(self, path: str, function: Symbol, *, element: bool) -> _Type | None:
        """The type the `@returns {T}` (or `@return`) of the doc comment just above `function` names."""
        lines = self.read(path)
        number = function.def_line - 1  # 0-based: the definition's own line
        while number > 0 and lines[number - 1].strip().startswith(("*", "/**")):
            number -= 1
            if tagged := _RETURNS_TAG.search(lines[number]):
                return self._parsed(path, tagged.group(1), element=element)
        return None

    def _inherited_field(self, path: str, name: str, *, element: bool) -> _Type | None:
        """`this.name` in a class of `path` that inherits the field from a base in another file: the base's type
        for it (every class of the file that inherits one must agree)."""
        kinds: set[_Type | None] = set()
        for cls in self._symbols(path):
            if cls.kind != "class" or cls.container:
                continue
            found = self._member_of(_Type(path, cls.name), name)
            if found is not None and found[0] != path:  # the file's own fields are _declared's
                kinds.add(self._type_of_member(*found, element=element))
        return kinds.pop() if len(kinds) == 1 else None

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
        templates = [m.group(1) for line in base_lines if (m := _TEMPLATE_TAG.search(line))]
        declared = re.compile(r"\s*" + re.escape(field) + r"\s*[;=]")
        for number, line in enumerate(base_lines):
            if declared.match(line):
                for above in base_lines[max(0, number - _DOC_LINES_ABOVE) : number]:
                    tagged = re.search(r"@type\s*\{\s*([A-Za-z_$][\w$]*)\s*\}", above)
                    if tagged and tagged.group(1) in templates:
                        # The argument in the parameter's place (`@extends Node<'Text', Parent>`), else its default.
                        arguments = _alternatives(argument, separator=",")
                        position = templates.index(tagged.group(1))
                        if position < len(arguments):
                            return self._parsed(path, arguments[position], element=False)
                        return self._template_default(files[0], tagged.group(1), element=False)
        return None

    def _type_argument(self, kind: _Type, base_path: str, template: str) -> _Type | None:
        """The argument the class `kind` gives the template parameter `template` of its base in `base_path`, by
        position in the `@extends Base<...>` above its declaration."""
        if kind.alternatives or kind.path == base_path:
            return None
        templates = [m.group(1) for line in self.read(base_path) if (m := _TEMPLATE_TAG.search(line))]
        own = self._class_name(kind)
        declared = [s for s in self._symbols(kind.path) if s.kind == "class" and s.name == own]
        if template not in templates or len(declared) != 1:
            return None
        lines = self.read(kind.path)
        start = declared[0].def_line - 1
        for above in reversed(lines[max(0, start - _DOC_LINES_ABOVE) : start]):
            if tagged := _EXTENDS_TAG.search(above):
                arguments = _alternatives(tagged.group(2), separator=",")
                position = templates.index(template)
                return (
                    self._parsed(kind.path, arguments[position], element=False) if position < len(arguments) else None
                )
        return None

    def _template_default(self, path: str, template: str, *, element: bool) -> _Type | None:
        """The default `path` gives its template parameter `template` (`@template {T} [Parent=T]`)."""
        for line in self.read(path):
            if (found := _TEMPLATE_DEFAULT.search(line)) and found.group(1) == template:
                return self._parsed(path, found.group(2), element=element)
        return None

    def _parsed(self, path: str, spelling: str, *, element: bool) -> _Type | None:
        """The type `spelling` names in `path` (`element`: the type of its elements, when it is an array)."""
        choices = [c for c in _alternatives(spelling) if not _NOTHING.match(c)]
        if len(choices) > 1 and not element:
            kinds = {self._parsed(path, choice, element=False) for choice in choices}
            if None in kinds:
                return None  # a type this rule cannot follow may have the member too
            known = tuple(sorted((k for k in kinds if k is not None), key=lambda k: (k.path, k.name)))
            return known[0] if len(known) == 1 else _Type("", "", known)
        if len(choices) != 1:
            return None
        spelling = choices[0].strip()
        if spelling.startswith("(") and spelling.endswith(")"):
            return self._parsed(path, spelling[1:-1], element=element)
        if element:
            array = _ARRAY_TYPE.fullmatch(spelling)
            return self._parsed(path, array.group(1) or array.group(2), element=False) if array else None
        found = _IMPORT_TYPE.fullmatch(spelling)
        if found is not None:
            files = self.resolve(path, found.group(1))
            if not files:
                return None
            # What the module calls that name: a type alias stands for its types, a `@typedef` for its own.
            named = self._named(files[0], found.group(2)) if found.group(2) != "default" else None
            return named or _Type(files[0], found.group(2))
        plain = _PLAIN_TYPE.fullmatch(spelling)
        return self._named(path, plain.group(1)) if plain is not None and plain.group(1) != "Array" else None

    def _named(self, path: str, name: str) -> _Type | None:
        """The type a plain `name` means in `path`: a class, interface or type alias declared there, a
        `@typedef {T} name` there, or what the file imports under that name."""
        key = (path, name)
        if key in self._names:
            return self._names[key]
        self._names[key] = None  # `@typedef {Foo} Foo` would go round
        found: _Type | None = None
        declared = [s for s in self._symbols(path) if s.name == name and s.kind in _DECLARED_KINDS and not s.container]
        if declared:
            # A type alias is what it stands for (`type INode = Action | Element | ...`, imported classes); one this
            # rule cannot read stays the alias, whose members the module declares (`_member_once`).
            standing = self._alias_of(path, declared[0]) if declared[0].kind == "type alias" else None
            found = standing or _Type(path, name)
        else:
            typedefs = self._typedefs(path)
            if name in typedefs:
                found = self._parsed(path, typedefs[name], element=False)
            else:
                for module, imported, alias in self.imports_of(path):
                    if alias == name and imported not in ("", "*"):
                        files = self.resolve(path, module)
                        found = _Type(files[0], imported) if files else None
                        break
        self._names[key] = found
        return found

    def _typedefs(self, path: str) -> dict[str, str]:
        """`@typedef {T} Name` in `path`: Name → T (a type written over several lines of the comment joined)."""
        key = (self.revision, path, "", False)
        kept = _TYPEDEFS.get(key) if self.revision else None
        if kept is None:
            kept = _typedefs_in(self._text(path))
            if self.revision:
                _TYPEDEFS.put(key, kept)
        return kept

    def _alias_of(self, path: str, alias: Symbol) -> _Type | None:
        """The type `type Name = ...` in `path` stands for, when it names types (a union of them, or one)."""
        lines = self.read(path)
        text = " ".join(lines[alias.def_line - 1 : alias.def_end_line]).strip()
        written = re.match(r"(?:export\s+)?(?:declare\s+)?type\s+[A-Za-z_$][\w$]*\s*=\s*(.+?)\s*;?$", text)
        return self._parsed(path, written.group(1), element=False) if written is not None else None

    def _class_name(self, kind: _Type) -> str:
        if kind.name != "default":
            return kind.name
        lines = self.read(kind.path)
        for symbol in self._symbols(kind.path):
            if symbol.kind == "class" and "export default" in lines[symbol.def_line - 1]:
                return symbol.name
        return ""

    def _member_of(self, kind: _Type, name: str) -> tuple[str, Symbol] | None:
        if kind.alternatives:
            # A union's member, read where the code has narrowed it to the types that have one: they must agree
            # (`StyleAttribute` inheriting `Attribute`'s).
            found = {self._member_of(k, name) for k in kind.alternatives} - {None}
            return found.pop() if len(found) == 1 else None
        if (kind, name) not in self._members:
            self._members[kind, name] = None  # bases that extend each other
            self._members[kind, name] = self._member_once(kind, name)
        return self._members[kind, name]

    def _member_once(self, kind: _Type, name: str) -> tuple[str, Symbol] | None:
        """`name` in the class or interface `kind`, or its bases (declared in the same file or imported); for a
        type alias (`type Node = A | B`) the module's only member of that name, else the one whose owner the
        module's other types extend."""
        owner = self._class_name(kind)
        if not owner:
            return None
        symbols = self._symbols(kind.path)
        members = [s for s in symbols if s.name == name and s.kind in ("method", "field")]
        bases = self._bases_in(kind.path)
        chain = [owner]
        for _ in range(_BASE_HOPS):
            chain += [b for c in chain for b in bases.get(c, []) if b not in chain]
        # A property of an inline object type (`content: { start: number }`) is that type's, not the owner's.
        members = [m for m in members if not _nested(m, symbols)]
        for cls in chain:
            for member in members:
                if member.container.split(".")[-1] == cls:
                    return kind.path, member
        declared = {s.name for s in symbols if s.kind in ("class", "interface")}
        # A base the module imports (`class Element extends Wrapper`, Wrapper from './shared/Wrapper.js').
        for base in (b for c in chain if c in declared for b in bases.get(c, []) if b not in declared):
            imported = self._named(kind.path, base)
            inherited = self._member_of(imported, name) if imported is not None and imported != kind else None
            if inherited is not None:
                return inherited
        if owner in declared or not members:
            return None  # a class without that member: not this rule's to guess
        if len(members) == 1:
            return kind.path, members[0]  # the one type of the module with that member
        extended = {b for names in bases.values() for b in names}
        shared = [m for m in members if m.container.split(".")[-1] in extended]
        return (kind.path, min(shared, key=lambda s: s.line)) if shared else None

    def _type_of_member(
        self, path: str, member: Symbol, *, element: bool = False, via: _Type | None = None
    ) -> _Type | None:
        """The type of `member` (declared in `path`), read through `via`, the type it was reached on: a base's
        `@type {Parent}` of its `@template` parameter is the argument `via`'s class gives it (`@extends
        Node<'Attribute', Element>`), else the parameter's default."""
        lines = self.read(path)
        line = lines[member.def_line - 1] if member.def_line <= len(lines) else ""
        if path.endswith(".ts"):
            written = re.search(re.escape(member.name) + r"\??\s*:\s*([^;]+?)\s*;?\s*$", line)
            if written is None:
                return None
            spelling = written.group(1)
            found = self._parsed(path, spelling, element=element)
            if found is None and not element and _TYPE_NAME.fullmatch(spelling):
                return _Type(path, spelling)  # a type the declaration file leaves to its readers' scope
            return found
        for above in reversed(lines[max(0, member.def_line - 1 - _DOC_LINES_ABOVE) : member.def_line - 1]):
            if tagged := re.search(r"@type\s*\{(.+)\}", above):
                found = self._parsed(path, tagged.group(1), element=element)
                if found is None and _TYPE_NAME.fullmatch(tagged.group(1).strip()):
                    # `@type {Parent}` of the class's template parameter.
                    given = self._type_argument(via, path, tagged.group(1).strip()) if via is not None else None
                    return given or self._template_default(path, tagged.group(1).strip(), element=element)
                return found
        return None


def _array_before(text: str, end: int) -> str:
    """The array a `.method(` at `end` is called on: the receiver just before, or the one a chain of calls that
    return such an array starts from (`xs.filter((x) => ...).map(`). Empty when neither."""
    for _ in range(_CHAIN_DEPTH):
        if receiver := _RECEIVER_BEFORE.search(text, max(0, end - 200), end):
            return receiver.group(1)
        close = len(text[:end].rstrip()) - 1
        if close < 0 or text[close] != ")":
            return ""
        depth, at = 0, close
        while at >= max(0, close - _CALL_CHARS):
            depth += {")": 1, "(": -1}.get(text[at], 0)
            if depth == 0:
                break
            at -= 1
        method = _ARRAY_CALL_BEFORE.search(text, max(0, at - 40), at) if depth == 0 else None
        if method is None:
            return ""
        end = method.start()
    return ""


def _nested(member: Symbol, symbols: Sequence[Symbol]) -> bool:
    """Whether `member` lies inside another member of its owner (a property of an inline object type)."""
    return any(
        other is not member
        and other.kind in ("method", "field")
        and other.container == member.container
        and (other.def_line, other.def_column) < (member.def_line, member.def_column)
        and (member.def_end_line, member.def_end_column) <= (other.def_end_line, other.def_end_column)
        for other in symbols
    )


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


def _literals(spelling: str) -> frozenset[str] | None:
    """The strings a type written as string literals (`'A' | 'B'`) allows; None for any other type."""
    choices = _alternatives(spelling) if spelling.strip() else []
    found = [_STRING_LITERAL.fullmatch(c) for c in choices]
    return frozenset(m.group(2) for m in found if m) if choices and all(found) else None


def _guards(before: str, receiver: str) -> list[tuple[str, frozenset[str]]]:
    """The tests of `receiver` on a use's line that guard the rest of it: `r.type === 'A' &&`, `r instanceof C ?`
    (member, values; the member empty for `instanceof`, whose values are class names)."""
    found: list[tuple[str, frozenset[str]]] = []
    for test in _test_patterns(receiver):
        for match in test.finditer(before):
            if _GUARDS_REST.match(before, match.end()):
                tested = match.groupdict()
                found.append((tested.get("member") or "", frozenset({tested["value"]})))
    # `if (receiver.type === 'Text') return f(receiver.data)`: a condition closed before the use.
    for header in _IF_OPEN.finditer(before):
        depth, at = 1, header.end()
        while at < len(before) and depth:
            depth += {"(": 1, ")": -1}.get(before[at], 0)
            at += 1
        if depth == 0:
            found += _conditions(before[header.end() : at - 1], receiver)
    return found


def _conditions(condition: str, receiver: str) -> list[tuple[str, frozenset[str]]]:
    """The tests of `receiver` an `if` condition's every branch passes: its `&&` terms that are one test, or a
    disjunction of tests of the same member (`r.type === 'A' || r.type === 'B'`)."""
    found: list[tuple[str, frozenset[str]]] = []
    for conjunct in condition.split("&&"):
        term = conjunct.strip().removeprefix("(").removesuffix(")").strip()
        tests = [
            (m.groupdict().get("member") or "", m["value"])
            for part in term.split("||")
            for m in _whole_test(part.strip(), receiver)
        ]
        if tests and len(tests) == len(term.split("||")) and len({member for member, _ in tests}) == 1:
            found.append((tests[0][0], frozenset(value for _, value in tests)))
    return found


def _whole_test(part: str, receiver: str) -> list[re.Match[str]]:
    return [m for test in _test_patterns(receiver) if (m := test.fullmatch(part))]


@lru_cache(maxsize=1024)
def _test_patterns(receiver: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """`receiver.member === 'value'` (or `==`) and `receiver instanceof Value`."""
    name = r"(?<![\w$.])" + re.escape(receiver)
    return (
        re.compile(name + r"\.(?P<member>[A-Za-z_$][\w$]*)\s*===?\s*(['\"])(?P<value>[^'\"]*)\2"),
        re.compile(name + r"\s+instanceof\s+(?P<value>[A-Za-z_$][\w$]*)"),
    )


def _alternatives(spelling: str, separator: str = "|") -> list[str]:
    """The members of a union written in `spelling`, split at its top-level `|` (not inside `<>`, `()`, `{}`); with
    `separator` `,`, the arguments of a type argument list."""
    parts: list[str] = []
    depth = 0
    start = 0
    for at, char in enumerate(spelling):
        if char in "<({[":
            depth += 1
        elif char in ">)}]" and not (char == ">" and spelling[at - 1 : at] == "="):
            depth -= 1
        elif char == separator and depth == 0:
            parts.append(spelling[start:at])
            start = at + 1
    parts.append(spelling[start:])
    return [p.strip() for p in parts if p.strip()]


def _spellings_in(  # noqa: PLR0912 - a branch per form
    text: str, variable: str, field: bool, destructurings: tuple[tuple[int, str, str, str], ...]
) -> frozenset[tuple[int, str]]:
    """What a file's `text` writes about `variable`, with the (1-based) line that says it: a `@param`, the `@type`
    above its declaration or cast on its value (`/** @type {T} */ (value)`), `new Name(...)` it is built with, the
    receiver it is assigned (`at:this.parent`; `const { key: variable } = receiver` as `at:receiver.key`), the function
    whose result it is (`call:f`), or the array a `for ... of` loop or an element callback
    (`xs.forEach((variable) => ...)`) takes it from (`of:xs`)."""
    lines = text.split("\n")
    param, declared, built, cast, assigned, calls, looped, indexed, called = _variable_patterns(variable, field)
    spellings: set[tuple[int, str]] = set()
    untyped: list[int] = []  # lines declaring the variable (`const x = ...`)
    for number, line in enumerate(lines, start=1):
        if variable not in line:
            continue
        # Each form has a word of its own: lines without it (most uses of a variable) skip its pattern.
        if not field and "@param" in line and (found := param.search(line)):
            spellings.add((number, found.group(1)))
        if declared.match(line):
            # The doc comment just above (not one of an earlier declaration: code in between ends the search).
            for above in reversed(lines[max(0, number - 1 - _DOC_LINES_ABOVE) : number - 1]):
                if tagged := _TYPE_TAG.search(above):
                    spellings.add((number, tagged.group(1)))
                    break
                if above.strip() and not above.lstrip().startswith(("*", "/*", "//")):
                    break
            if not field and _DECLARATION.match(line):
                untyped.append(number)
        if not field and "for" in line:
            spellings.update((number, "of:" + m.group(1)) for m in looped.finditer(line))
        if "=" not in line:
            continue
        if "new" in line and (found := built.search(line)):
            spellings.add((number, "new:" + found.group(1)))
        if "@type" in line and (found := cast.search(line)):
            spellings.add((number, found.group(1)))
        if "[" in line and (found := indexed.search(line)):
            spellings.add((number, "of:" + found.group(1)))
        if (found := assigned.search(line)) and found.group(1) != "this":
            spellings.add((number, "at:" + found.group(1)))
        if "(" in line and (found := calls.search(line)):
            spellings.add((number, "call:" + found.group(1)))
    if not field and ("=>" in text or "function" in text):
        for call in called.finditer(text):
            if receiver := _array_before(text, call.start()):
                spellings.add((text.count("\n", 0, call.start()) + 1, "of:" + receiver))
    if not field:
        spellings.update(
            (number, f"at:{receiver}.{member}")
            for number, member, local, receiver in destructurings
            if local == variable
        )
    # A declaration nothing above types is a binding all the same: the uses below it are not an earlier one's.
    typed = {number for number, _ in spellings}
    spellings.update((number, "untyped:") for number in untyped if number not in typed)
    return frozenset(spellings)


def _destructurings(text: str) -> tuple[tuple[int, str, str, str], ...]:
    """`const { key: local } = receiver` patterns of a file's text: (line, key, local, receiver)."""
    found: list[tuple[int, str, str, str]] = []
    if "} =" in text or "}=" in text:
        for pattern in _DESTRUCTURING.finditer(text):
            line = text.count("\n", 0, pattern.start()) + 1
            for item in pattern.group(1).split(","):
                if binding := _PATTERN_ITEM.fullmatch(item):
                    found.append((line, binding.group(1), binding.group(2) or binding.group(1), pattern.group(2)))
    return tuple(found)


def _typedefs_in(text: str) -> dict[str, str]:
    """`@typedef {T} Name` of a file's text: Name → T, its braces balanced (`{{ a: A }}`), over lines if need be."""
    found: dict[str, str] = {}
    for tag in _TYPEDEF.finditer(text):
        depth, at = 1, tag.end()
        while at < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[at], 0)
            at += 1
        named = _TYPEDEF_NAME.match(text, at)
        if depth == 0 and named is not None:
            found.setdefault(named.group(1), _COMMENT_MARGIN.sub(" ", text[tag.end() : at - 1]).strip())
    return found
