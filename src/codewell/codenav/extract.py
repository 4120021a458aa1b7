"""Symbols, identifier occurrences and imports of one source file, with tree-sitter and codenav/queries/*.scm.

Pure functions of (path, bytes): they run in worker processes (parsing holds the GIL) and return plain
data. Each query file holds two kinds of patterns, split by line: lines ending in `@reference` form the
occurrence query (read with `captures`, the cheap path: one capture per identifier), everything else the
definition query (read with `matches`, which pairs a definition with its `@name`):

- `@definition.<kind>` on the whole definition and `@name` on its name (`type_alias` for the kind `type alias`);
- `@container` (optional) names the container when it is not the enclosing node (a Go method's receiver);
- `@scope` + `@name`: a container that is not a definition itself (a Rust `impl`);
- `@import` on import statements, `@package` on a package/namespace declaration's name.
"""

from __future__ import annotations

import bisect
import re
import time
from dataclasses import dataclass, field
from functools import cache, lru_cache
from importlib import resources
from typing import NamedTuple

from tree_sitter import Language, Node, Parser, Query, QueryCursor
from tree_sitter_language_pack import get_language

from codewell.codenav import native
from codewell.codenav.imports import Import, parse_imports
from codewell.codenav.languages import Grammar, grammar_of

__all__ = [
    "MAX_FILE_BYTES",
    "PARSE_SECONDS",
    "FileSymbols",
    "Occurrence",
    "Symbol",
    "extract",
    "grammar_by_suffix",
    "skip_reason",
]

# Beyond these a file is generated or minified more often than not, and parsing it costs more than it helps.
MAX_FILE_BYTES = 1 << 20
MAX_LINE_CHARS = 4000
# Each file's parse is cut off after this long (tree-sitter polls the callback while parsing).
PARSE_SECONDS = 2.0

DEFINITION, REFERENCE, IMPORT, MEMBER = "d", "r", "i", "m"
# The byte before a member name: `.` (most languages), `>` of `->` (C, C++, PHP), `:` of `::` (C++, Rust, Ruby, PHP).
_MEMBER_MARKS = frozenset(b".>:")
# Files up to this size are parsed straight from memory (fastest); bigger ones through a callback that can
# stop the parser at the deadline.
_DIRECT_PARSE_BYTES = 256 * 1024
# Kinds whose definitions contain others (their names form the `container` of what is inside).
_CONTAINERS = frozenset({"class", "struct", "interface", "enum", "module", "function", "method", "scope"})
# A function directly inside one of these is a method.
_TYPE_CONTAINERS = frozenset({"class", "struct", "interface", "enum", "scope"})
_CONSTANT_NAME = re.compile(r"[A-Z][A-Z0-9_]+")


@dataclass(frozen=True, slots=True)
class Symbol:
    """A definition. Lines are 1-based; columns are 1-based byte columns; ends are exclusive columns."""

    name: str
    kind: str
    container: str  # enclosing definitions, dotted ("Outer.Inner"), or the package; "" at top level
    line: int
    column: int
    end_line: int
    end_column: int
    def_line: int
    def_column: int
    def_end_line: int
    def_end_column: int


class Occurrence(NamedTuple):
    """An identifier in the file. A tuple: a file holds thousands and building them is the hot loop."""

    name: str
    line: int
    column: int
    # "d" definition, "i" in an import, "m" member access (after `.`, `->` or `::`: `obj.name`), "r" other uses.
    role: str


@dataclass(slots=True)
class FileSymbols:
    path: str
    language: str  # label, e.g. "Python"; "" when unsupported
    queries: str = ""  # the query file used, e.g. "typescript" (names the import and resolution rules)
    symbols: list[Symbol] = field(default_factory=list)
    occurrences: list[Occurrence] = field(default_factory=list)
    imports: list[Import] = field(default_factory=list)
    package: str = ""
    skipped: str = ""  # why the file was not parsed (too big, minified, timed out), else ""
    size: int = 0
    # The native C scanner's findings as rows of the index tables, when the index build asked for them
    # (extract(..., file_id=)): `symbols` and `occurrences` are then empty. Occurrences are grouped by name
    # (name, file id, "line:col:role;..."), in the order names first appear.
    symbol_rows: list[native.SymbolRow] | None = None
    occurrence_rows: list[native.OccurrenceRow] | None = None


@dataclass(frozen=True, slots=True)
class _Compiled:
    language: Language
    definitions: Query
    references: Query


@cache
def _compiled(grammar: Grammar) -> _Compiled:
    language = get_language(grammar.ts_name)  # type: ignore[arg-type]  # names are checked by the tests
    source = resources.files("codewell.codenav").joinpath("queries", f"{grammar.queries}.scm").read_text()
    lines = source.splitlines()
    refs = "\n".join(line for line in lines if line.rstrip().endswith("@reference"))
    defs = "\n".join(line for line in lines if not line.rstrip().endswith("@reference"))
    return _Compiled(language, Query(language, defs), Query(language, refs))


@cache
def _parser(grammar: Grammar) -> Parser:
    return Parser(_compiled(grammar).language)


def grammar_by_suffix(path: str) -> Grammar | None:
    """grammar_of(path) without building a PurePosixPath per call (a tenth of the native C extraction's cost):
    the grammar depends on the file name's suffix only, and a tree has few of them."""
    name = path.rpartition("/")[2]
    dot = name.rfind(".")
    return _suffix_grammar(name[dot:] if 0 < dot < len(name) - 1 else "")  # PurePosixPath.suffix


@lru_cache(maxsize=1024)  # bounded: a long-running server meets many odd suffixes
def _suffix_grammar(suffix: str) -> Grammar | None:
    return grammar_of(f"file{suffix}")


def skip_reason(data: bytes | memoryview) -> str:
    """Why a file is not parsed ("" when it is): too big, binary, or minified (a very long line)."""
    if len(data) > MAX_FILE_BYTES:
        return f"over {MAX_FILE_BYTES >> 20} MB"
    head = bytes(data[:8192])  # `in` on a memoryview compares single bytes as integers
    if b"\x00" in head:
        return "binary"
    longest = native.longest_line(data, 65536)
    if longest > MAX_LINE_CHARS:
        return f"minified (a line of over {MAX_LINE_CHARS} characters)"
    return ""


def _parse(grammar: Grammar, data: bytes) -> Node | None:
    """The syntax tree's root, or None when parsing took longer than PARSE_SECONDS."""
    parser = _parser(grammar)
    if len(data) <= _DIRECT_PARSE_BYTES:
        return parser.parse(data).root_node
    deadline = time.monotonic() + PARSE_SECONDS
    timed_out = False

    def read(offset: int, _point: object) -> bytes:
        return data[offset : offset + 65536]

    def progress(_offset: int, _has_error: bool) -> bool:
        nonlocal timed_out
        timed_out = time.monotonic() > deadline
        return timed_out  # True cancels the parse

    try:
        tree = parser.parse(read, progress_callback=progress)
    except ValueError:
        # tree-sitter 0.26 raises "Parsing failed" when the progress callback cancels the parse.
        if not timed_out:
            raise
    if timed_out:
        parser.reset()
        return None
    return tree.root_node


def _text(data: bytes, node: Node) -> str:
    return data[node.start_byte : node.end_byte].decode("utf-8", "replace")


def _name(data: bytes, node: Node) -> str:
    # Ruby's `attr_reader :radius` names the field with a symbol literal.
    return _text(data, node).lstrip(":")


def extract(
    path: str, data: bytes | memoryview, *, file_id: int | None = None, sink: native.RowWriter | None = None
) -> FileSymbols:
    """Everything codenav keeps about one file (language "" when it is not a supported language).

    `file_id`: the index build's id of the file. C may then come back as `symbol_rows` and `occurrence_rows`
    (what the index tables store) instead of `Symbol`s and `Occurrence`s: no Python object per identifier.
    With `sink` too, the native scanner inserts those rows and the #includes into the index itself (both lists
    and `imports` come back empty).
    `data` may be a view (of the search shard's mapping): the native scanner reads it in place, tree-sitter
    gets a copy.
    """
    grammar = grammar_by_suffix(path)
    if grammar is None:
        return FileSymbols(path, "", size=len(data))
    result = FileSymbols(path, grammar.label, grammar.queries, size=len(data))
    result.skipped = skip_reason(data)
    if result.skipped:
        return result
    if grammar.queries == "c" and native.available():
        return _from_native(result, data, file_id, sink)
    data = bytes(data)
    root = _parse(grammar, data)
    if root is not None and root.has_error and grammar.queries == "typescript":
        root = _typescript_call_signatures(grammar, data, root)
    if root is None:
        result.skipped = f"parsing took over {PARSE_SECONDS:g} s"
        return result
    compiled = _compiled(grammar)
    defs, scopes, import_ranges = _definitions(compiled, root, data, result)
    result.symbols = _with_containers(defs, scopes, result.package)
    def_starts = {d.name_node.start_byte for d in defs}
    import_starts = [start for start, _ in import_ranges]
    imports_end = max((end for _, end in import_ranges), default=-1)
    names = QueryCursor(compiled.references).captures(root).get("reference", [])
    occurrences: list[Occurrence] = []
    append = occurrences.append
    for node in names:
        if node.type == "preproc_arg":
            occurrences.extend(_macro_body_names(data, node))
            continue
        start = node.start_byte
        if start in def_starts:
            role = DEFINITION
        elif start < imports_end and _inside(import_ranges, import_starts, start):
            role = IMPORT
        elif start and data[start - 1] in _MEMBER_MARKS:
            role = MEMBER
        else:
            role = REFERENCE
        row, column = node.start_point
        append(Occurrence(data[start : node.end_byte].decode("utf-8", "replace"), row + 1, column + 1, role))
    result.occurrences = occurrences
    return result


def _from_native(
    result: FileSymbols, data: bytes | memoryview, file_id: int | None, sink: native.RowWriter | None
) -> FileSymbols:
    """A C file's FileSymbols from the native scanner (codenav/_lex.c): the fast path for C."""
    if file_id is not None and sink is not None:
        sink.scan(data, file_id)
        result.symbol_rows, result.occurrence_rows = [], []  # in the index already, and the #includes too
        return result
    if file_id is not None:
        table_rows = native.scan_c_rows(data, file_id)
        assert table_rows is not None  # available() was checked
        result.symbol_rows, result.occurrence_rows, table_includes = table_rows
        result.imports = [Import(module, "", "", line) for module, line in table_includes]
        return result
    scanned = native.scan_c(data)
    assert scanned is not None
    symbols, rows, includes = scanned
    result.symbols = [Symbol(*row) for row in symbols]
    result.occurrences = [
        Occurrence(name, int(line), int(column), role)
        for name, joined in rows
        for line, column, role in (spot.split(":") for spot in joined.split(";"))
    ]
    result.imports = [Import(module, "", "", line) for module, line in includes]
    return result


# A C/C++ macro body is one `preproc_arg` token for tree-sitter; its names are found lexically. Strings,
# character literals and comments are matched first so that the names inside them are skipped.
_MACRO_TOKEN = re.compile(rb'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|/\*.*?\*/|//[^\n]*|\b([A-Za-z_]\w*)', re.DOTALL)


def _macro_body_names(data: bytes, node: Node) -> list[Occurrence]:
    """The identifiers of a `#define` body (uses of other macros, functions, fields) as occurrences."""
    body = data[node.start_byte : node.end_byte]
    row, column = node.start_point
    line_start = node.start_byte - column  # byte offset of the body's first line in `data`
    out: list[Occurrence] = []
    for m in _MACRO_TOKEN.finditer(body):
        if m.group(1) is None:
            continue
        start = node.start_byte + m.start(1)
        newlines = body.count(b"\n", 0, m.start(1))
        if newlines:
            row_at = row + newlines
            col = start - (node.start_byte + body.rindex(b"\n", 0, m.start(1)) + 1)
        else:
            row_at, col = row, start - line_start
        role = MEMBER if start and data[start - 1] in _MEMBER_MARKS else REFERENCE
        out.append(Occurrence(m.group(1).decode("utf-8", "replace"), row_at + 1, col + 1, role))
    return out


# An interface's call signature on its own line (`<T>(fn: T): T`) after a member without `;`: tree-sitter's
# TypeScript grammar reads the `<` as a type argument list of the line before and the rest of the file becomes
# an error (TypeScript itself inserts the `;`). The retry puts a `;` in place of the indentation's last space,
# so that every byte offset and line stays the same.
_CALL_SIGNATURE_LINE = re.compile(rb"(?m)^([ \t]*)[ \t](?=<[A-Za-z_$])")


def _typescript_call_signatures(grammar: Grammar, data: bytes, root: Node) -> Node:
    """The tree of `data` with `;` before call-signature lines when that parses without errors, else `root`."""
    patched = _CALL_SIGNATURE_LINE.sub(rb"\1;", data)
    if patched == data or len(patched) != len(data):
        return root
    retry = _parse(grammar, patched)
    return retry if retry is not None and not retry.has_error else root


def _inside(ranges: list[tuple[int, int]], starts: list[int], offset: int) -> bool:
    at = bisect.bisect_right(starts, offset) - 1
    return at >= 0 and offset < ranges[at][1]


@dataclass(slots=True)
class _Def:
    name: str
    kind: str
    explicit_container: str
    name_node: Node
    node: Node
    pattern: int


def _definitions(
    compiled: _Compiled, root: Node, data: bytes, result: FileSymbols
) -> tuple[list[_Def], list[_Def], list[tuple[int, int]]]:
    by_name: dict[int, _Def] = {}
    scopes: list[_Def] = []
    import_ranges: list[tuple[int, int]] = []
    for pattern, captures in QueryCursor(compiled.definitions).matches(root):
        if "import" in captures:
            node = captures["import"][0]
            import_ranges.append((node.start_byte, node.end_byte))
            result.imports.extend(parse_imports(result.queries, _text(data, node), node.start_point[0] + 1))
            continue
        if "package" in captures:
            result.package = _text(data, captures["package"][0])
            continue
        names = captures.get("name")
        if not names:
            continue
        name_node = names[0]
        container = captures.get("container")
        explicit = _text(data, container[0]) if container else ""
        if "scope" in captures:
            scopes.append(_Def(_text(data, name_node), "scope", "", name_node, captures["scope"][0], pattern))
            continue
        kind_capture = next((key for key in captures if key.startswith("definition.")), None)
        if kind_capture is None:
            continue
        kind = kind_capture.removeprefix("definition.").replace("_", " ")
        previous = by_name.get(name_node.start_byte)
        # Several patterns may match one name (a Go struct is also a type_spec): the first pattern wins.
        if previous is None or pattern < previous.pattern:
            by_name[name_node.start_byte] = _Def(
                _name(data, name_node), kind, explicit, name_node, captures[kind_capture][0], pattern
            )
    import_ranges.sort()
    return list(by_name.values()), scopes, import_ranges


def _with_containers(defs: list[_Def], scopes: list[_Def], package: str) -> list[Symbol]:
    """Symbols with their containers (from nesting) and their final kinds (method vs function, constants)."""
    ordered = sorted([*defs, *scopes], key=lambda d: (d.node.start_byte, -d.node.end_byte, d.kind == "scope"))
    stack: list[_Def] = []
    out: list[Symbol] = []
    for d in ordered:
        while stack and stack[-1].node.end_byte <= d.node.start_byte:
            stack.pop()
        chain = [s for s in stack if s.node.end_byte >= d.node.end_byte]
        kind = d.kind
        parent = chain[-1].kind if chain else ""
        if kind == "function" and parent in _TYPE_CONTAINERS:
            kind = "method"
        elif kind == "method" and not d.explicit_container and not parent:
            kind = "function"  # a Ruby `def` at top level
        elif kind == "variable" and not chain and _CONSTANT_NAME.fullmatch(d.name):
            kind = "constant"
        elif kind == "variable" and parent in _TYPE_CONTAINERS:
            kind = "field"  # a Python class attribute
        if kind == "field":
            # `self.x = ...` in `__init__` belongs to the class, not to the method.
            while chain and chain[-1].kind in ("function", "method"):
                chain = chain[:-1]
        container = d.explicit_container or ".".join(s.name for s in chain)
        if not container and package and kind != "module":
            container = package
        if d.kind != "scope":
            name_start, name_end = d.name_node.start_point, d.name_node.end_point
            start, end = d.node.start_point, d.node.end_point
            out.append(
                Symbol(
                    d.name,
                    kind,
                    container,
                    name_start[0] + 1,
                    name_start[1] + 1,
                    name_end[0] + 1,
                    name_end[1] + 1,
                    start[0] + 1,
                    start[1] + 1,
                    end[0] + 1,
                    end[1] + 1,
                )
            )
        if d.kind in _CONTAINERS:
            stack.append(d)
    return out
