"""Python find_references: what the receiver of `obj.name` evidently is, from its file alone (no inference).

A language server without type inference still reads what the code states next to a use: `obj = Parser()` or a
parameter `obj: Parser` in the same function, `self.obj = Parser()` in the same class, a literal (`obj = {}`), or
`super().name` inside a subclass. ReceiverTypes turns that into a verdict for one definition of a member: the
receiver is evidently an instance of the definition's class (or of a subclass that inherits the member), evidently
something else (another class of the repository, a class the repository does not define, a built-in literal), or
unknown, in which case the caller's name-based rules decide. Also the scope rules: a function nested in a
function is seen only there (local_scope), and a function binding a module-level name itself hides it (shadowed).
Nothing here names a library or a project.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from codewell.codenav.extract import Symbol
from codewell.codenav.resolve import module_files
from codewell.codenav.store import Indexed

__all__ = ["ReceiverTypes", "local_scope", "shadowed"]

# `super().name`, `super(Class, self).name`: the member as the next class up the hierarchy defines it.
_SUPER = re.compile(r"\bsuper\s*\([^()]*\)\s*\.\s*$")
# The base classes on a class header line: `class Name(Base, mod.Other, metaclass=M):`.
_CLASS_BASES = re.compile(r"^\s*class\s+\w+\s*\(([^)]*)\)")
# `name = value`, `name: T = value` (the start of an assignment's text).
_ASSIGNED = re.compile(r"^([A-Za-z_]\w*)\s*(?::\s*([^=]+?)\s*)?=(?!=)\s*(.+)$", re.DOTALL)
# `self.attr = value` / `cls.attr: T = value` anywhere on a line of a class.
_SELF_ASSIGNED = r"^\s*(?:self|cls)\.{attr}\s*(?::\s*[^=]+?)?=(?!=)\s*(.+)$"
# A call at the start of an expression: `Parser(...)`, `mod.Parser(...)`.
_CALL = re.compile(r"^([A-Za-z_][\w.]*)\s*\(")
# A parameter's annotation right after its name: `obj: Parser`, `obj: "Parser"`, `obj: mod.Parser | None`.
_ANNOTATION = re.compile(r"^\s*:\s*['\"]?([A-Za-z_][\w.]*)")
_LITERAL_STARTS = ("{", "[", "'", '"', "f'", 'f"', "b'", 'b"', "r'", 'r"')
# Annotations that wrap the type rather than name it.
_WRAPPERS = frozenset({"Optional", "typing.Optional", "Union", "typing.Union", "Final", "typing.Final"})
_MAX_ANCESTORS = 50
# `module.attribute` as an assigned value (`root = logging.root`).
_MODULE_ATTRIBUTE = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*\.[A-Za-z_]\w*$")
# Lines looked at for the assignments of one attribute name across the repository.
_MAX_ASSIGNMENTS = 200
# A function's return annotation on its (possibly wrapped) header: `def f(...) -> Parser:`.
_RETURNS = re.compile(r"\)\s*->\s*(.+?)\s*:\s*$")
_RETURN = re.compile(r"^\s*return\s+(.+?)\s*$")
_NAME = re.compile(r"[A-Za-z_]\w*")
# A parameter's default right after its name: `policy=compat32`.
_DEFAULT = re.compile(r"^\s*=\s*([^,)]+?)\s*(?:[,)]|$)")
# Calls and names followed to tell what a value is (`with helper() as x`, helper returning a local built by a call).
_DEPTH = 3
# Functions of one name looked at to tell what a call of that name returns (more: too common a name to tell).
_MAX_RETURNERS = 3


def local_scope(symbols: list[Symbol], definition: Symbol) -> tuple[int, int] | None:
    """The lines of the function a definition is local to (a function nested in a function), else None."""
    if not definition.container:
        return None
    for s in symbols:
        qualified = f"{s.container}.{s.name}" if s.container else s.name
        if (
            s.kind in ("function", "method")
            and qualified == definition.container
            and s.def_line <= definition.def_line <= s.def_end_line
        ):
            return s.def_line, s.def_end_line
    return None


def shadowed(symbols: list[Symbol], name: str, spots: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """The plain uses among `spots` (role "r") that are inside a function binding `name` itself (a parameter, a
    local variable, a nested definition): there the name means that local, not a module-level definition."""
    scopes = {b.container for b in symbols if b.name == name and b.container}
    binders = [
        (s.def_line, s.def_end_line)
        for s in symbols
        if s.kind in ("function", "method") and (f"{s.container}.{s.name}" if s.container else s.name) in scopes
    ]
    if not binders:
        return []
    return [spot for spot in spots if spot[2] == "r" and any(first <= spot[0] <= last for first, last in binders)]


@dataclass(frozen=True, slots=True)
class _Evidence:
    """What a binding says about a receiver: a class (by its last dotted name), something else, or nothing."""

    cls: str = ""  # "Parser" of `Parser()` / `mod.Parser()` / `obj: Parser`
    other: bool = False  # a literal: no instance of a repository class
    untyped: bool = False  # a parameter (or loop or `with` target) without annotation: its type is not known
    neutral: bool = False  # `obj = None`: says nothing either way


@dataclass
class ReceiverTypes:
    """Verdicts on `receiver.name` for one Python member definition (one find_references call)."""

    index: Indexed
    language: str
    read_lines: Callable[[str], list[str]]
    name: str  # the member's name
    owner_class: str  # the class defining it (last dotted name)
    _symbols: dict[str, list[Symbol]] = field(default_factory=dict)
    _lines: dict[str, list[str]] = field(default_factory=dict)
    _classes: dict[str, list[tuple[str, Symbol]]] = field(default_factory=dict)
    _definers: set[str] | None = None
    _anywhere: dict[str, list[_Evidence] | None] = field(default_factory=dict)

    def verdict(self, path: str, line: int, receiver: str, before: str, *, method: bool) -> bool | None:
        """Whether `receiver.name` on `line` of `path` means this definition: True, False, or None (unknown).

        `receiver` is the dotted chain before the name (`obj`, `self.obj`); `before` the line's text up to the name;
        `method`: the definition is a method (or property), not a data attribute.
        """
        if method and self._stored(path, line, before):
            return False  # `obj.name = value` makes an instance attribute; a method is not assigned to
        if _SUPER.search(before):
            cls = self._enclosing_class(path, line)
            return None if cls is None else self._inherited_from(cls.name, skip_self=True) == self.owner_class
        if not receiver:
            callee = _callee_before(before)  # `Parser(...).name`, `make_parser().name`
            built = self._value(path, f"{callee}()", 2) if callee else _Evidence()
            return self._judge([built]) if built.cls else None
        parts = receiver.split(".")
        if len(parts) == 1 and parts[0] in ("self", "cls"):
            return self._self_verdict(path, line)
        if len(parts) == 1 and parts[0] and self._imports_module_or_foreign_class(path, parts[0]):
            return False  # `module.name`, `LibraryClass.name`: not a member of a class of this repository
        if parts[-1][:1].isupper() and self._class_rows(parts[-1]):
            return self._class_access(parts[-1])
        if len(parts) == 1 and parts[0]:
            evidence = self._local_bindings(path, line, parts[0])
        elif len(parts) == 2 and parts[0] in ("self", "cls"):
            evidence = self._attribute_bindings(path, line, parts[1]) or self._attribute_anywhere(parts[1])
        else:
            evidence = self._attribute_anywhere(parts[-1])  # `obj.attr.name`: what `self.attr = ...` says anywhere
        return self._judge(evidence)

    # --- evidence ------------------------------------------------------------------------------------------

    def _file_symbols(self, path: str) -> list[Symbol]:
        if path not in self._symbols:
            self._symbols[path] = self.index.symbols_in(path)
        return self._symbols[path]

    def _file_lines(self, path: str) -> list[str]:
        if path not in self._lines:
            self._lines[path] = self.read_lines(path)
        return self._lines[path]

    def _enclosing_class(self, path: str, line: int) -> Symbol | None:
        inside = [s for s in self._file_symbols(path) if s.kind == "class" and s.def_line <= line <= s.def_end_line]
        return max(inside, key=lambda s: s.def_line) if inside else None

    def _local_bindings(self, path: str, line: int, variable: str, depth: int = _DEPTH) -> list[_Evidence] | None:
        """What the bindings of `variable` in the innermost scope that binds it (function, then module) say."""
        symbols = self._file_symbols(path)
        scopes = [
            (f"{s.container}.{s.name}" if s.container else s.name)
            for s in symbols
            if s.kind in ("function", "method") and s.def_line <= line <= s.def_end_line
        ]
        for scope in [*reversed(scopes), ""]:
            bindings = [s for s in symbols if s.name == variable and s.kind == "variable" and s.container == scope]
            if bindings:
                return [self._binding_evidence(path, b, depth) for b in bindings]
            if scope and any(s.name == variable and s.container == scope for s in symbols):
                return None  # bound by something else there (a nested function or class): not a value we can read
        return None

    def _binding_evidence(self, path: str, binding: Symbol, depth: int = _DEPTH) -> _Evidence:
        lines = self._file_lines(path)
        if binding.line > len(lines):
            return _Evidence()
        text = lines[binding.line - 1].encode()
        after = text[binding.end_column - 1 :].decode("utf-8", "replace")
        start = text[binding.def_column - 1 :].decode("utf-8", "replace")
        if (binding.def_end_line, binding.def_end_column) == (binding.end_line, binding.end_column):
            # A parameter (or a `for`/`with` target): only an annotation says what it holds, or for `with f() as x`
            # what f returns (a context manager's `__enter__` hands out the instance). Without either, a language
            # server without inference does not know its type either, so its members are not linked.
            annotation = _ANNOTATION.match(after)
            if annotation is None:
                managed = _with_target(lines[binding.line - 1], binding.name)
                default = _DEFAULT.match(after)
                if managed is not None:
                    evidence = self._value(path, managed, depth)
                elif default is not None:
                    # `policy=compat32`: what the default is, as the module binds it (the call's own value aside).
                    evidence = self._value(path, default.group(1).strip(), depth, line=0)
                else:
                    evidence = _Evidence()
                return evidence if evidence.cls else _Evidence(untyped=True)
            return _Evidence(cls=_annotated_class(annotation.group(1), after))
        assigned = _ASSIGNED.match(start)
        if assigned is None or assigned.group(1) != binding.name:
            return _Evidence()  # `a, b = ...`, augmented assignments: nothing evident
        if assigned.group(2):
            return _Evidence(cls=_annotated_class(assigned.group(2).strip("'\" "), assigned.group(2)))
        value = assigned.group(3).strip()
        if _MODULE_ATTRIBUTE.match(value) and depth > 0:
            return self._module_attribute(path, value, 0)  # one hop: `root = logging.root`
        return self._value(path, value, depth)

    def _value(self, path: str, value: str, depth: int, line: int | None = None) -> _Evidence:
        """What an assigned value of `path` says (_value_evidence), and for a call of a function of the repository
        what that function returns: its return annotation (`-> ProgressBar`), else what its `return` statements
        give (a constructor call, another such call, a local holding one), `depth` calls deep. With `line` (0: the
        module's top level), a plain name is what its bindings there say (a parameter's default, an import)."""
        evidence = _value_evidence(value)
        if evidence != _Evidence() or depth <= 0:
            return evidence
        if line is not None and _NAME.fullmatch(value.strip()):
            return self._name_value(path, line, value.strip(), depth - 1)
        call = _CALL.match(value.strip())
        if call is None or not _call_is_whole(value.strip(), call.end() - 1):
            return evidence
        return self._returned(path, call.group(1).split(".")[-1], depth - 1)

    def _name_value(self, path: str, line: int, name: str, depth: int) -> _Evidence:
        """What `name` holds on `line` of `path`: its bindings in the innermost scope binding it, else what the
        module it is imported from (`from pkg.mod import name`) binds it to at its top level."""
        bindings = self._local_bindings(path, line, name, depth)
        if bindings is None:
            for imp in self.index.imports_of(path):
                if imp.alias != name or imp.name in ("", "*"):
                    continue
                for where in module_files(self.index, path, "python", imp.module):
                    found = [
                        s
                        for s in self._file_symbols(where)
                        if s.name == imp.name and s.kind in ("variable", "constant") and not s.container
                    ]
                    if len(found) == 1:
                        return self._binding_evidence(where, found[0], depth)
            return _Evidence()
        said = {e for e in bindings if not e.neutral}
        if any(e.untyped for e in said):
            return _Evidence()  # `self.x = x` of a parameter without a type: unknown, not evidently another class
        return said.pop() if len(said) == 1 else _Evidence()

    def _returned(self, path: str, function: str, depth: int) -> _Evidence:
        """The class of what the module-level function `function` (of `path`, else the repository's only one of
        that name) returns, when its annotation or its return statements say so."""
        rows = [
            (r.path, r.symbol)
            for r in self.index.symbols_named(function)
            if r.symbol.kind == "function" and not r.symbol.container and r.language == self.language
        ]
        here = [row for row in rows if row[0] == path]
        rows = here or rows
        if not rows or len(rows) > _MAX_RETURNERS:
            return _Evidence()
        found = {self._function_returns(where, symbol, depth) for where, symbol in rows}
        return found.pop() if len(found) == 1 else _Evidence()

    def _function_returns(self, path: str, function: Symbol, depth: int) -> _Evidence:
        lines = self._file_lines(path)
        header: list[str] = []
        body_start = function.def_end_line
        for number in range(function.def_line, min(function.def_end_line, len(lines)) + 1):
            header.append(lines[number - 1].split("#", 1)[0])
            if header[-1].rstrip().endswith(":"):
                body_start = number + 1
                break
        annotated = _RETURNS.search(" ".join(header))
        if annotated:
            named = re.match(r"['\"]?([A-Za-z_][\w.]*)", annotated.group(1).strip())
            cls = _annotated_class(named.group(1), annotated.group(1)) if named else ""
            return _Evidence(cls=cls)
        if depth <= 0:
            return _Evidence()
        qualified = f"{function.container}.{function.name}" if function.container else function.name
        found: set[_Evidence] = set()
        for number in range(body_start, min(function.def_end_line, len(lines)) + 1):
            returned = _RETURN.match(lines[number - 1])
            if returned is None:
                continue
            value = returned.group(1).strip()
            if _NAME.fullmatch(value):
                bindings = [
                    s
                    for s in self._file_symbols(path)
                    if s.name == value and s.kind == "variable" and s.container == qualified
                ]
                found.update(self._binding_evidence(path, b, depth - 1) for b in bindings[:_MAX_RETURNERS])
                if not bindings:
                    return _Evidence()
            else:
                found.add(self._value(path, value, depth - 1))
        found.discard(_Evidence(neutral=True))
        return found.pop() if len(found) == 1 else _Evidence()

    def _module_attribute(self, path: str, value: str, depth: int) -> _Evidence:
        """`mod.attr` with `mod` an import of a module of the repository: what that module assigns to `attr`."""
        alias, attribute = value.rsplit(".", 1)
        for imp in self.index.imports_of(path):
            if imp.name != "" or alias not in (imp.alias, imp.module):
                continue
            # `import a.b` binds `a` (the package, unless `a.b.attr` is written out); `import a.b as m` binds a.b.
            aliased = imp.alias != imp.module.split(".")[0]
            module = imp.module if alias == imp.module or aliased else alias
            for where in module_files(self.index, path, "python", module):
                bindings = [
                    s
                    for s in self._file_symbols(where)
                    if s.name == attribute and s.kind in ("variable", "constant") and not s.container
                ]
                if len(bindings) == 1:
                    return self._binding_evidence(where, bindings[0], depth)
        return _Evidence()

    def _attribute_bindings(self, path: str, line: int, attribute: str) -> list[_Evidence] | None:
        """What `self.attribute = value` lines of the enclosing class say, or else of its nearest base that has some."""
        cls = self._enclosing_class(path, line)
        if cls is None:
            return None
        pattern = re.compile(_SELF_ASSIGNED.format(attr=re.escape(attribute)))
        todo, seen = [(path, cls)], {cls.name}
        while todo and len(seen) < _MAX_ANCESTORS:
            where, current = todo.pop(0)
            lines = self._file_lines(where)
            found = []
            for number in range(current.def_line, min(current.def_end_line, len(lines)) + 1):
                assigned = pattern.match(lines[number - 1])
                if assigned:
                    found.append(self._value(where, assigned.group(1), _DEPTH, line=number))
            if found:
                return found
            for base in self._bases(where, current):
                if base not in seen:
                    seen.add(base)
                    todo.extend(self._class_rows(base)[:1])
        return None

    def _attribute_anywhere(self, attribute: str) -> list[_Evidence] | None:
        """What every `self.attribute = value` of the repository says (the attribute's type by its name)."""
        if attribute in self._anywhere:
            return self._anywhere[attribute]
        pattern = re.compile(_SELF_ASSIGNED.format(attr=re.escape(attribute)))
        found: list[_Evidence] = []
        looked = 0
        for where, spots in self.index.occurrences(attribute).items():
            if looked > _MAX_ASSIGNMENTS:
                found = []  # too common a name to tell
                break
            lines = self._file_lines(where)
            for number in {line for line, _, role in spots if role in ("m", "d")}:
                looked += 1
                assigned = pattern.match(lines[number - 1]) if number <= len(lines) else None
                if assigned:
                    found.append(_value_evidence(assigned.group(1)))
        self._anywhere[attribute] = found or None
        return self._anywhere[attribute]

    def _self_verdict(self, path: str, line: int) -> bool | None:
        """`self.name` in a subclass that overrides the member (itself or a class between): that override, not ours;
        in a class that neither defines, inherits nor passes down a member of that name: another object's attribute.
        """
        cls = self._enclosing_class(path, line)
        if cls is None or cls.name == self.owner_class:
            return None
        used = self._inherited_from(cls.name, skip_self=False)
        if used is None:
            return False if cls.name not in self._ancestors(self.owner_class) else None
        if used == self.owner_class:
            return None
        return False if self.owner_class in self._ancestors(cls.name) else None

    def _class_access(self, cls: str) -> bool | None:
        """`Class.name` with a class of the repository: ours when Class is the definition's class or inherits the
        member from it, not when Class is unrelated to it (neither a base nor a subclass)."""
        if cls == self.owner_class:
            return True
        if self.owner_class in self._ancestors(cls):
            # A subclass's own override (or a class's between) is left to the override hierarchy rules.
            return True if self._inherited_from(cls, skip_self=False) == self.owner_class else None
        if cls in self._ancestors(self.owner_class):
            return None  # a base's own member, or the declaration that the override hierarchy rules link
        return False

    def _stored(self, path: str, line: int, before: str) -> bool:
        """Whether the member access ending `before` on `line` is assigned to (`obj.name = value`)."""
        lines = self._file_lines(path)
        if line > len(lines):
            return False
        text = lines[line - 1]
        rest = text[len(before) :] if text.startswith(before) else ""
        return re.match(rf"{re.escape(self.name)}\s*=(?!=)", rest) is not None

    def _imports_module_or_foreign_class(self, path: str, bound: str) -> bool:
        """Whether `bound` is a file's import of a module of the repository, or of a class the repository lacks."""
        for imp in self.index.imports_of(path):
            if imp.alias != bound or imp.name in ("", "*"):
                continue  # `import a.b` binds a module too, but the caller already sets those apart
            module = imp.module + imp.name if imp.module.endswith(".") else f"{imp.module}.{imp.name}"
            if module_files(self.index, path, "python", module):
                return True
            bare = imp.name.lstrip("_")
            if bare[:1].isupper() and not bare.isupper() and not self._class_rows(imp.name):
                return True
        return False

    # --- judgement -----------------------------------------------------------------------------------------

    def _judge(self, evidence: list[_Evidence] | None) -> bool | None:
        if not evidence:
            return None
        verdicts: set[bool] = set()
        for e in evidence:
            if e.neutral:
                continue
            if e.other or e.untyped:
                verdicts.add(False)
            elif e.cls:
                judged = self._class_verdict(e.cls)
                if judged is None:
                    return None
                verdicts.add(judged)
            else:
                return None  # one binding of unknown value: the receiver may be anything
        return verdicts.pop() if len(verdicts) == 1 else None

    def _class_verdict(self, cls: str) -> bool | None:
        if cls == self.owner_class:
            return True
        if self._class_rows(cls):
            # A subclass that inherits the member; a base's instance runs the base's own (unlike `Base.name(self)`).
            return self._inherited_from(cls, skip_self=False) == self.owner_class
        if self.index.symbols_named(cls):
            return None  # a function or a variable of that name: its call returns who knows what
        # A class the repository does not define (a library's, a built-in's): its members are not this one.
        return False

    def _class_rows(self, name: str) -> list[tuple[str, Symbol]]:
        if name not in self._classes:
            self._classes[name] = [
                (r.path, r.symbol)
                for r in self.index.symbols_named(name)
                if r.symbol.kind == "class" and r.language == self.language
            ]
        return self._classes[name]

    def _bases(self, path: str, cls: Symbol) -> list[str]:
        lines = self._file_lines(path)
        header = lines[cls.def_line - 1] if cls.def_line <= len(lines) else ""
        found = _CLASS_BASES.search(header)
        if not found:
            return []
        return [b.strip().split(".")[-1] for b in found.group(1).split(",") if b.strip() and "=" not in b]

    def _member_definers(self) -> set[str]:
        if self._definers is None:
            self._definers = {
                r.symbol.container.split(".")[-1]
                for r in self.index.symbols_named(self.name)
                if r.symbol.kind in ("method", "field", "variable")
                and r.symbol.container
                and r.language == self.language
                and "." not in r.symbol.container
            }
        return self._definers

    def _ancestors(self, cls: str) -> set[str]:
        found: set[str] = set()
        todo = [cls]
        while todo and len(found) < _MAX_ANCESTORS:
            for path, symbol in self._class_rows(todo.pop())[:1]:
                for base in self._bases(path, symbol):
                    if base not in found:
                        found.add(base)
                        todo.append(base)
        return found

    def _inherited_from(self, cls: str, *, skip_self: bool) -> str | None:
        """The class whose member `name` an instance of `cls` uses (depth-first over bases, like a simple MRO)."""
        definers = self._member_definers()
        seen: set[str] = set()

        def walk(current: str, include: bool) -> str | None:
            if current in seen or len(seen) >= _MAX_ANCESTORS:
                return None
            seen.add(current)
            if include and current in definers:
                return current
            for path, symbol in self._class_rows(current)[:1]:
                for base in self._bases(path, symbol):
                    found = walk(base, True)
                    if found:
                        return found
            return None

        return walk(cls, not skip_self)


def _annotated_class(annotation: str, text: str) -> str:
    """The class an annotation names (`Parser`, `mod.Parser`, `Optional[Parser]`), "" when it names none."""
    if annotation in _WRAPPERS:
        inner = re.search(r"\[\s*['\"]?([A-Za-z_][\w.]*)", text)
        annotation = inner.group(1) if inner else ""
    last = annotation.split(".")[-1]
    return last if last[:1].isupper() else ""


def _callee_before(before: str) -> str:
    """The function called right before a member access: `Parser(a, b)` in `return Parser(a, b).`."""
    text = before.rstrip()
    if not text.endswith("."):
        return ""
    text = text[:-1].rstrip()
    if not text.endswith(")"):
        return ""
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        if text[i] == ")":
            depth += 1
        elif text[i] == "(":
            depth -= 1
            if depth == 0:
                callee = re.search(r"([A-Za-z_][\w.]*)\s*$", text[:i])
                return callee.group(1) if callee else ""
    return ""


def _with_target(line: str, name: str) -> str | None:
    """The context expression `with <expression> as name` binds `name` to, from the statement's line."""
    found = re.match(rf"^\s*(?:async\s+)?with\s+(.*?)\s+as\s+{re.escape(name)}\b", line)
    if found is None:
        return None
    expression = found.group(1)
    depth = 0
    start = 0
    for i, c in enumerate(expression):  # `with a() as x, b() as y`: the item right before `as name`
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and expression.startswith(" as ", i):
            start = i
        elif c == "," and depth == 0:
            start = i + 1
    rest = expression[start:]
    if rest.startswith(" as "):
        rest = rest.split(",", 1)[1] if "," in rest else ""
    return rest.strip() or None


def _value_evidence(value: str) -> _Evidence:
    """What an assigned value says: `Parser(...)` a class, a literal something else, `None` nothing."""
    parts = [p.strip() for p in re.split(r"\s+or\s+", value.strip().rstrip("\\").strip())]
    evidence = [_one_value(p) for p in parts if p and p != "None"]
    if not evidence:
        return _Evidence(neutral=True)
    if len(evidence) == 1 or len(set(evidence)) == 1:
        return evidence[0]
    return _Evidence()


def _one_value(value: str) -> _Evidence:
    if value.startswith(_LITERAL_STARTS) or value[:1].isdigit():
        return _Evidence(other=True)
    call = _CALL.match(value)
    if call and _call_is_whole(value, call.end() - 1):
        callee = call.group(1).split(".")[-1]
        bare = callee.lstrip("_")
        # A call of a CapWords name constructs that class (PEP 8 names classes so; functions are lower case).
        if bare[:1].isupper() and not bare.isupper():
            return _Evidence(cls=callee)
    return _Evidence()


def _call_is_whole(value: str, opening: int) -> bool:
    """Whether the parenthesis at `opening` closes at the end of `value` (or the line ends inside it).

    `Parser(a)` is an instance of Parser; `Parser(a).build()` or `Parser(a) + 1` is whatever follows made of it.
    """
    depth = 0
    quote = ""
    for i in range(opening, len(value)):
        c = value[i]
        if quote:
            if c == quote and value[i - 1] != "\\":
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                rest = value[i + 1 :].strip()
                return not rest or rest.startswith("#")
    return True  # the arguments go on over the next lines
