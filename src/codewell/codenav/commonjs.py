"""CommonJS modules as JavaScript writes them: what `module.exports` and `exports.name` bind, from a file's text.

Node's module system is plain assignments, so the syntax says what a module exports:

- `module.exports = Name` (also `exports = module.exports = Name`, `module.exports = function Name(...)`,
  `var proto = module.exports = function (...)`) makes Name the module's value: what `require('./m')` returns;
- `module.exports = require('./other')` hands out another module's value;
- `exports.name = value` and `module.exports.name = value` add a member; `module.exports = { name: value, other }`
  names them all at once;

where `value` is a local name (`exports.request = req`), a function (a definition the index has already), or
`require('./m')` / `require('./m').member`. These helpers only read the lines; following a name to its
definition is the JavaScript resolver's job (codenav/resolvers.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Binding", "default_export", "member_export"]

_NAME = r"[A-Za-z_$][\w$]*"
_KEYWORDS = frozenset({"function", "class", "async", "new", "require", "await", "this", "null", "undefined"})
# `[var proto =] [exports =] module.exports = [exports =] <rest>`
_DEFAULT = re.compile(
    rf"^\s*(?:(?:var|let|const)\s+({_NAME})\s*=\s*)?(?:exports\s*=\s*)?module\.exports\s*=\s*(?:exports\s*=\s*)?(.*)$"
)
_NAMED_VALUE = re.compile(rf"^(?:(?:async\s+)?function\s*\*?\s*|class\s+)?({_NAME})\s*(.?)")
_REQUIRE = re.compile(rf"""^require\s*\(\s*["']([^"']+)["']\s*\)\s*(?:\.\s*({_NAME}))?\s*;?\s*(?://.*)?$""")
_PLAIN_NAME = re.compile(rf"^({_NAME})\s*;?\s*(?://.*)?$")
# `{ a, b: c }` entries of a one-line or multi-line object literal (values that are plain names only).
_ENTRY = re.compile(rf"^\s*({_NAME})\s*(?::\s*({_NAME}))?\s*,?\s*(?://.*)?$")
_MAX_OBJECT_LINES = 400


@dataclass(frozen=True, slots=True)
class Binding:
    """What a CommonJS export stands for: a name of the exporting file, or (part of) a required module."""

    name: str = ""  # a local name of the exporting file (`exports.request = req` → "req")
    module: str = ""  # `require('./x')` → "./x"
    member: str = ""  # `require('./x').y` → "y" (with `module`)
    # `var proto = module.exports = function (...)`: `name` is a variable the module's value is also assigned to
    # (the value itself has no name; TypeScript does not take the variable for it).
    variable: bool = False


def _value(text: str) -> Binding | None:
    text = text.strip()
    required = _REQUIRE.match(text)
    if required:
        return Binding(module=required.group(1), member=required.group(2) or "")
    plain = _PLAIN_NAME.match(text)
    if plain and plain.group(1) not in _KEYWORDS:
        return Binding(name=plain.group(1))
    return None


def default_export(lines: list[str]) -> Binding | None:
    """The module's value (`module.exports = ...`): the last such assignment at the top level that names one."""
    found: Binding | None = None
    for line in lines:
        if not line.startswith(("module", "exports", "var", "let", "const")):
            continue  # top-level statements only (an indented assignment is conditional or in a function)
        match = _DEFAULT.match(line)
        if match is None:
            continue
        variable, rest = match.group(1), match.group(2).strip()
        value = _value(rest)
        if value is not None:
            found = value
            continue
        named = _NAMED_VALUE.match(rest)
        if named and named.group(1) not in _KEYWORDS and rest.startswith(("function", "class", "async")):
            found = Binding(name=named.group(1))  # `module.exports = function Name(...)`
        elif variable:
            found = Binding(name=variable, variable=True)  # `var proto = module.exports = function (...)`
    return found


def member_export(lines: list[str], name: str) -> Binding | None:
    """What `exports.name` / `module.exports.name` / a `module.exports = { name }` entry stands for, when it is a
    local name or a `require`; None when it is anything else (a function defined in place is a definition the
    index already has) or when the module does not export `name` that way."""
    chained = rf"(?:(?:module\.)?exports\.{_NAME}\s*=\s*)?"  # `exports.a = exports.b = value`
    assigned = re.compile(rf"^\s*(?:module\.)?exports\.{re.escape(name)}\s*=\s*{chained}(.*)$")
    found: Binding | None = None
    inside = False
    start = 0
    for number, line in enumerate(lines):
        match = assigned.match(line)
        if match is not None:
            value = _value(match.group(1))
            found = value if value is not None else found
            continue
        opened = _DEFAULT.match(line) if line.startswith(("module", "exports")) else None
        if opened is not None and opened.group(2).strip().startswith("{"):
            body = opened.group(2).strip()[1:]
            if "}" in body:  # one line: `module.exports = { a, b: c };`
                for part in body.split("}", 1)[0].split(","):
                    entry = _ENTRY.match(part)
                    if entry and entry.group(1) == name:
                        found = Binding(name=entry.group(2) or name)
                continue
            inside = True
            start = number
            continue
        if inside:
            if line.lstrip().startswith("}") or number - start > _MAX_OBJECT_LINES:
                inside = False
                continue
            entry = _ENTRY.match(line)
            if entry and entry.group(1) == name:
                found = Binding(name=entry.group(2) or name)
    return found
