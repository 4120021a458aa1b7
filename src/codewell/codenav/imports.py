"""What an import statement binds, from its source text (at index time, once per import statement).

Each `Import` says: the local name `alias` refers to `name` from `module` (name "" = the module itself,
"*" = everything it exports). Module spellings stay the language's own (`.pkg.mod`, `./util`, `fmt`,
`java.util`, `stdio.h`); resolving them to files is `resolve.py`'s job.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Import", "parse_imports"]


@dataclass(frozen=True, slots=True)
class Import:
    module: str
    name: str  # "" = the module itself, "*" = all its names
    alias: str  # the local name bound ("" when nothing is bound, e.g. a C #include)
    line: int


_JS_IMPORT_CHARS = 65536
_STRING = re.compile(r"""["'`]([^"'`]+)["'`]""")
_WORD = re.compile(r"[A-Za-z_$][\w$]*")


def _clean(text: str) -> str:
    """One line: comments, line continuations and parentheses removed."""
    text = re.sub(r"#[^\n]*|//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)
    return " ".join(text.replace("\\\n", " ").replace("(", " ").replace(")", " ").split())


def _python(text: str, line: int) -> list[Import]:
    text = _clean(text)
    out: list[Import] = []
    if text.startswith("from "):
        match = re.match(r"from\s+(\S+)\s+import\s+(.*)", text)
        if not match:
            return out
        module, names = match.group(1), match.group(2)
        for part in names.split(","):
            words = part.split()
            if not words:
                continue
            alias = words[2] if len(words) == 3 and words[1] == "as" else words[0]
            out.append(Import(module, words[0], "" if words[0] == "*" else alias, line))
        return out
    for part in text.removeprefix("import").split(","):
        words = part.split()
        if not words:
            continue
        # `import a.b` binds `a`; `import a.b as c` binds `c` to a.b.
        alias = words[2] if len(words) == 3 and words[1] == "as" else words[0].split(".")[0]
        out.append(Import(words[0], "", alias, line))
    return out


def _javascript(text: str, line: int) -> list[Import]:  # noqa: PLR0912 - one branch per import form
    strings = _STRING.findall(text)
    if not strings:
        return []
    module = strings[-1]
    text = _clean(text)
    out: list[Import] = []
    require = re.match(r"(?:const|let|var)\s+(.*?)\s*=\s*require", text)
    if require:
        target = require.group(1)
        if target.startswith("{"):
            for part in target.strip("{} ").split(","):
                pieces = [p.strip() for p in part.split(":")]
                if pieces[0]:
                    out.append(Import(module, pieces[0], pieces[-1] or pieces[0], line))
        elif target:
            # `var f = require('./m').f` binds m's member f; `var m = require('./m')` the module's value.
            member = re.search(r"require\s*[\"'`][^\"'`]+[\"'`]\s*\.\s*([A-Za-z_$][\w$]*)", text)
            out.append(Import(module, member.group(1) if member else "", target, line))
        return out
    head = re.sub(r"^(import|export)\s+(type\s+)?", "", text)
    head = head.split(" from ")[0] if " from " in head else ""
    braces = re.search(r"\{(.*?)\}", head)
    if braces:
        for part in braces.group(1).split(","):
            words = part.split()
            if len(words) in (2, 4) and words[0] == "type":  # `{ type A }`, `{ type A as B }`; `{ type as t }` stays
                words = words[1:]
            if words:
                alias = words[2] if len(words) == 3 and words[1] == "as" else words[0]
                out.append(Import(module, words[0], alias, line))
        head = head[: braces.start()] + head[braces.end() :]
    namespace = re.search(r"\*\s+as\s+([\w$]+)", head)
    if namespace:
        out.append(Import(module, "", namespace.group(1), line))
        head = head[: namespace.start()] + head[namespace.end() :]
    elif "*" in head:
        out.append(Import(module, "*", "", line))
    default = _WORD.match(head.strip(" ,"))
    if default and text.startswith("import"):
        out.append(Import(module, "default", default.group(0), line))
    if not out:
        out.append(Import(module, "", "", line))
    return out


def _go(text: str, line: int) -> list[Import]:
    out = []
    for match in re.finditer(r'(?:([\w.]+)\s+)?"([^"]+)"', text):
        path = match.group(2)
        # Without an alias the package name is, by convention, the last path element (minus a /vN suffix).
        parts = [p for p in path.split("/") if not re.fullmatch(r"v\d+", p)]
        alias = match.group(1) or (parts[-1] if parts else path)
        out.append(Import(path, "", alias, line))
    return out


def _dotted(text: str, line: int, *, keyword: str, separator: str = ".") -> list[Import]:
    """Java, Kotlin, C#, PHP and Rust: `keyword a.b.C [as D]`, `keyword a.b.*`, braces for groups."""
    text = _clean(text).rstrip(";").strip()
    text = re.sub(rf"^(?:{keyword})\s+(?:static\s+|function\s+|const\s+)?", "", text)
    alias_eq = re.match(r"([\w]+)\s*=\s*(.*)", text)  # C#: using X = A.B.C;
    if alias_eq:
        full = alias_eq.group(2).strip()
        module, _, name = full.rpartition(separator)
        return [Import(module, name, alias_eq.group(1), line)]
    group = re.match(rf"(.*?){re.escape(separator)}\{{(.*)\}}", text)
    if group:
        out = []
        for part in group.group(2).split(","):
            words = part.split()
            if words:
                alias = words[-1] if len(words) == 3 and words[1] == "as" else words[0]
                out.append(Import(group.group(1), words[0], alias, line))
        return out
    words = text.split()
    if not words:
        return []
    full = words[0]
    module, _, name = full.rpartition(separator)
    alias = words[2] if len(words) == 3 and words[1] == "as" else name
    if keyword.endswith("using"):  # C# `using A.B;` opens a namespace
        return [Import(full, "*", "", line)]
    return [Import(module, name, "" if name == "*" else alias, line)]


def _include(text: str, line: int) -> list[Import]:
    match = re.search(r'#\s*include\s*(["<])([^">]+)[">]', text)
    if not match:
        return []
    module = match.group(2) if match.group(1) == '"' else f"<{match.group(2)}>"
    return [Import(module, "", "", line)]


def _ruby(text: str, line: int) -> list[Import]:
    strings = _STRING.findall(text)
    if not strings:
        return []
    module = strings[0]
    if text.lstrip().startswith("require_relative") and not module.startswith("."):
        module = "./" + module
    return [Import(module, "", "", line)]


def _php(text: str, line: int) -> list[Import]:
    if text.lstrip().startswith("use"):
        return _dotted(text, line, keyword="use", separator="\\")
    strings = _STRING.findall(text)
    return [Import(strings[0], "", "", line)] if strings else []


_PARSERS: dict[str, Callable[[str, int], list[Import]]] = {
    "python": _python,
    "javascript": _javascript,
    "typescript": _javascript,
    "go": _go,
    "java": lambda text, line: _dotted(text, line, keyword="import"),
    "kotlin": lambda text, line: _dotted(text, line, keyword="import"),
    "csharp": lambda text, line: _dotted(text, line, keyword="global using|using"),
    "rust": lambda text, line: _dotted(
        re.sub(r"^\s*(pub(\([^)]*\))?\s+)?(use|extern crate)", "use", text), line, keyword="use", separator="::"
    ),
    "c": _include,
    "cpp": lambda text, line: _include(text, line) if "#" in text else _dotted(text, line, keyword="using"),
    "ruby": _ruby,
    "php": _php,
}


def parse_imports(queries: str, text: str, line: int) -> list[Import]:
    """The bindings of one import statement of a file parsed with `queries` (a codenav/queries name)."""
    parser = _PARSERS.get(queries)
    if parser is None:
        return []
    # A JavaScript/TypeScript module string comes last, after a name list that barrels make long (`export {` a
    # hundred names `} from "./internal"`); other languages name the module first.
    limit = _JS_IMPORT_CHARS if queries in ("javascript", "typescript") else 4000
    try:
        return parser(text[:limit], line)
    except (IndexError, ValueError):
        # A malformed (half-typed) import binds nothing; the rest of the file still counts.
        return []
