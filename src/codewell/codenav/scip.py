"""Reading SCIP indexes: the subset of the SCIP protobuf schema codenav uses, declared here in Python.

SCIP (the code intelligence format of Sourcegraph's precise indexers: scip-python, scip-typescript, scip-java,
...) is a protobuf message `Index`. We declare only the messages and fields codenav reads, with their field
numbers, as a `FileDescriptorProto` built in code: no `.proto` file, no generated module, and no `protoc` at
build time. Fields we do not declare are skipped by the parser as unknown fields, which is what protobuf does
for any newer writer, so indexes from any SCIP version parse.

Enums (`SymbolRole`, `PositionEncoding`, `SymbolInformation.Kind`, ...) are declared as plain `int32`: an
enum is a varint on the wire either way, and an int keeps values newer than this file (a new `Kind`) instead
of failing or dropping them.

The symbol grammar (`scheme manager package version descriptors`, or `local N`) is parsed by `parse_symbol`
only as far as codenav needs: the descriptors' names and suffixes, to tell a symbol's name, kind and container.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from codewell.core.errors import InvalidInput

if TYPE_CHECKING:
    from google.protobuf import descriptor_pb2

__all__ = [
    "DEFINITION",
    "MAX_INDEX_BYTES",
    "Descriptor",
    "ParsedSymbol",
    "byte_column",
    "index_class",
    "parse_index",
    "parse_symbol",
]

# SymbolRole bit flags of Occurrence.symbol_roles.
DEFINITION, IMPORT, WRITE_ACCESS, READ_ACCESS, GENERATED, TEST, FORWARD_DEFINITION = 1, 2, 4, 8, 16, 32, 64
# Document.position_encoding: how Occurrence ranges count characters within a line.
UNSPECIFIED_ENCODING, UTF8_OFFSETS, UTF16_OFFSETS, UTF32_OFFSETS = 0, 1, 2, 3

# An uploaded index is parsed whole in memory (protobuf has no streaming reader for one message), and the
# parsed objects take several times the bytes: refuse larger uploads with a clear error instead of swapping.
MAX_INDEX_BYTES = 512 << 20

_PACKAGE = "codewell.scip"
# FieldDescriptorProto's Label and Type numbers (fixed by descriptor.proto; a test checks them against protobuf's):
# spelled out so that protobuf is imported with the first SCIP upload, not by every process that imports codenav.
_OPTIONAL, _REPEATED = 1, 3
_STRING, _INT32, _BOOL, _MESSAGE = 9, 5, 8, 11

# (message, [(field, number, label, type, message type of a message field)]): field numbers as the SCIP
# schema assigns them; names are ours (only the numbers and wire types matter on the wire).
_MESSAGES: list[tuple[str, list[tuple[str, int, int, int, str]]]] = [
    (
        "Index",
        [
            ("metadata", 1, _OPTIONAL, _MESSAGE, "Metadata"),
            ("documents", 2, _REPEATED, _MESSAGE, "Document"),
            ("external_symbols", 3, _REPEATED, _MESSAGE, "SymbolInformation"),
        ],
    ),
    (
        "Metadata",
        [
            ("version", 1, _OPTIONAL, _INT32, ""),  # enum ProtocolVersion
            ("tool_info", 2, _OPTIONAL, _MESSAGE, "ToolInfo"),
            ("project_root", 3, _OPTIONAL, _STRING, ""),
            ("text_document_encoding", 4, _OPTIONAL, _INT32, ""),  # enum TextEncoding
        ],
    ),
    (
        "ToolInfo",
        [
            ("name", 1, _OPTIONAL, _STRING, ""),
            ("version", 2, _OPTIONAL, _STRING, ""),
            ("arguments", 3, _REPEATED, _STRING, ""),
        ],
    ),
    (
        "Document",
        [
            ("relative_path", 1, _OPTIONAL, _STRING, ""),
            ("occurrences", 2, _REPEATED, _MESSAGE, "Occurrence"),
            ("symbols", 3, _REPEATED, _MESSAGE, "SymbolInformation"),
            ("language", 4, _OPTIONAL, _STRING, ""),
            ("text", 5, _OPTIONAL, _STRING, ""),
            ("position_encoding", 6, _OPTIONAL, _INT32, ""),  # enum PositionEncoding
        ],
    ),
    (
        "Occurrence",
        [
            ("range", 1, _REPEATED, _INT32, ""),  # packed: [line, start, end] or [line, start, end line, end]
            ("symbol", 2, _OPTIONAL, _STRING, ""),
            ("symbol_roles", 3, _OPTIONAL, _INT32, ""),  # SymbolRole bits
            ("enclosing_range", 7, _REPEATED, _INT32, ""),  # the whole definition (body included), same layout
        ],
    ),
    (
        "SymbolInformation",
        [
            ("symbol", 1, _OPTIONAL, _STRING, ""),
            ("documentation", 3, _REPEATED, _STRING, ""),
            ("relationships", 4, _REPEATED, _MESSAGE, "Relationship"),
            ("kind", 5, _OPTIONAL, _INT32, ""),  # enum SymbolInformation.Kind
            ("display_name", 6, _OPTIONAL, _STRING, ""),
            ("enclosing_symbol", 8, _OPTIONAL, _STRING, ""),
        ],
    ),
    (
        "Relationship",
        [
            ("symbol", 1, _OPTIONAL, _STRING, ""),
            ("is_reference", 2, _OPTIONAL, _BOOL, ""),
            ("is_implementation", 3, _OPTIONAL, _BOOL, ""),
            ("is_type_definition", 4, _OPTIONAL, _BOOL, ""),
            ("is_definition", 5, _OPTIONAL, _BOOL, ""),
        ],
    ),
]

# SymbolInformation.Kind values codenav names (the others fall back to the descriptor's suffix).
KINDS = {
    7: "class",
    8: "constant",
    9: "method",  # constructor
    11: "enum",
    12: "constant",  # enum member
    15: "field",
    17: "function",
    21: "interface",
    25: "macro",
    26: "method",
    29: "module",
    30: "module",  # namespace
    35: "module",  # package
    41: "field",  # property
    49: "struct",
    55: "type alias",
    61: "variable",
    66: "method",  # abstract method
    80: "method",  # static method
    82: "variable",  # static variable
}


def _file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    from google.protobuf import descriptor_pb2  # noqa: PLC0415 - with the first upload (see _OPTIONAL)

    # proto3: scalar fields have no presence and repeated scalars are packed, as SCIP writers encode them.
    # The parser accepts packed and unpacked repeated scalars alike.
    file = descriptor_pb2.FileDescriptorProto(name="codewell_scip_subset.proto", package=_PACKAGE, syntax="proto3")
    for message_name, fields in _MESSAGES:
        message = file.message_type.add(name=message_name)
        for name, number, label, kind, type_name in fields:
            field = message.field.add(name=name, number=number, label=label, type=kind)
            if type_name:
                field.type_name = f".{_PACKAGE}.{type_name}"
    return file


@functools.cache
def _classes() -> dict[str, type[Any]]:
    from google.protobuf import descriptor_pool, message_factory  # noqa: PLC0415 - with the first upload

    # A pool of our own: the default pool is process-wide and another library could declare `scip.*` there.
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file_descriptor())
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}")) for name, _ in _MESSAGES
    }


def index_class() -> type[Any]:
    """The protobuf message class of `Index` (tests build indexes with it: a real protobuf round trip)."""
    return _classes()["Index"]


def message_class(name: str) -> type[Any]:
    return _classes()[name]


def parse_index(data: bytes, max_bytes: int = MAX_INDEX_BYTES) -> Any:
    """The `Index` message in `data`; InvalidInput when it is too big, not protobuf, or holds no document."""
    if len(data) > max_bytes:
        raise InvalidInput(
            f"the SCIP index is {len(data) >> 20} MB, over the {max_bytes >> 20} MB limit",
            hint="index a smaller part of the repository (e.g. one package per upload is not supported: split "
            "the project or raise the limit)",
        )
    from google.protobuf.message import DecodeError  # noqa: PLC0415 - with the first upload

    index = index_class()()
    try:
        index.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise InvalidInput(
            f"the upload is not a SCIP index (protobuf decoding failed: {str(exc)[:200]})",
            hint="send the index.scip file a SCIP indexer wrote (e.g. scip-python index), as the raw request body",
        ) from None
    if not index.documents:
        raise InvalidInput(
            "the SCIP index holds no documents",
            hint="send the index.scip file a SCIP indexer wrote (e.g. scip-python index), as the raw request body",
        )
    return index


@dataclass(frozen=True, slots=True)
class Descriptor:
    name: str
    # "/" namespace, "#" type, "." term, "()." method (disambiguator dropped), "[]" type parameter,
    # "()" parameter, ":" meta, "!" macro.
    suffix: str


@dataclass(frozen=True, slots=True)
class ParsedSymbol:
    local: bool
    package: str  # "manager name version" of a global symbol; "" for locals
    descriptors: tuple[Descriptor, ...]

    @property
    def name(self) -> str:
        return self.descriptors[-1].name if self.descriptors else ""

    @property
    def container(self) -> str:
        """The enclosing types and terms, dotted (`Outer.Inner` of a method); namespaces (modules) left out."""
        return ".".join(d.name for d in self.descriptors[:-1] if d.suffix != "/")

    @property
    def path(self) -> list[str]:
        """Every enclosing name, namespaces split at `.` and `/` (to match a qualifier such as `util.helper`)."""
        parts: list[str] = []
        for d in self.descriptors[:-1]:
            parts += [p for p in d.name.replace("/", ".").split(".") if p]
        return parts

    def kind(self, owner_is_type: bool | None = None) -> str:
        """A codenav kind from the last descriptor's suffix (when the index gives no SymbolInformation.kind)."""
        if self.local or not self.descriptors:
            return "variable"
        last = self.descriptors[-1].suffix
        inside_type = any(d.suffix == "#" for d in self.descriptors[:-1]) if owner_is_type is None else owner_is_type
        if last == "#":
            return "class"
        if last == "().":
            return "method" if inside_type else "function"
        if last == ".":
            return "field" if inside_type else "variable"
        if last == "/":
            return "module"
        if last == "!":
            return "macro"
        return "variable"


def _name(text: str, i: int) -> tuple[str, int]:
    """A descriptor name at text[i]: a simple identifier, or a backtick-quoted one (`` `` `` escapes a backtick)."""
    if i < len(text) and text[i] == "`":
        out: list[str] = []
        i += 1
        while i < len(text):
            if text[i] == "`":
                if i + 1 < len(text) and text[i + 1] == "`":
                    out.append("`")
                    i += 2
                    continue
                return "".join(out), i + 1
            out.append(text[i])
            i += 1
        raise ValueError("unterminated backtick name")
    start = i
    while i < len(text) and (text[i].isalnum() or text[i] in "_+-$"):
        i += 1
    return text[start:i], i


def _descriptors(text: str) -> tuple[Descriptor, ...]:
    out: list[Descriptor] = []
    i = 0
    while i < len(text):
        if text[i] in "[(":
            close = "]" if text[i] == "[" else ")"
            name, i = _name(text, i + 1)
            if i >= len(text) or text[i] != close:
                raise ValueError("unterminated parameter descriptor")
            out.append(Descriptor(name, "[]" if close == "]" else "()"))
            i += 1
            continue
        name, i = _name(text, i)
        if i >= len(text):
            raise ValueError("descriptor without a suffix")
        mark = text[i]
        if mark == "(":
            # A method: name(disambiguator).
            end = text.find(").", i)
            if end < 0:
                raise ValueError("unterminated method descriptor")
            out.append(Descriptor(name, "()."))
            i = end + 2
        elif mark in "/#.:!":
            out.append(Descriptor(name, mark))
            i += 1
        else:
            raise ValueError(f"unexpected {mark!r} in descriptors")
    return tuple(out)


def _space_split(text: str, count: int) -> tuple[list[str], str]:
    """The first `count` space-separated fields (a doubled space is a literal space) and the rest."""
    if "  " not in text:
        parts = text.split(" ", count)
        if len(parts) <= count:
            raise ValueError("too few fields")
        return parts[:count], parts[count]
    fields: list[str] = []
    current: list[str] = []
    i = 0
    while len(fields) < count:
        if i >= len(text):
            raise ValueError("too few fields")
        if text[i] == " ":
            if i + 1 < len(text) and text[i + 1] == " ":
                current.append(" ")
                i += 2
                continue
            fields.append("".join(current))
            current = []
            i += 1
            continue
        current.append(text[i])
        i += 1
    return fields, text[i:]


@functools.lru_cache(maxsize=1 << 16)  # an index names each symbol many times
def parse_symbol(symbol: str) -> ParsedSymbol | None:
    """The parts of a SCIP symbol string codenav uses, or None when it does not follow the grammar."""
    if symbol.startswith("local "):
        return ParsedSymbol(True, "", ())
    try:
        fields, rest = _space_split(symbol, 4)
        return ParsedSymbol(False, " ".join(fields[1:]), _descriptors(rest))
    except ValueError:
        return None


def byte_column(line: str, offset: int, encoding: int) -> int:
    """The 0-based UTF-8 byte column of character `offset` of `line`, counted in the document's encoding.

    codenav stores byte columns (as tree-sitter gives them). An unspecified encoding is read as UTF-16 code
    units, the unit of LSP, which the indexers that leave it unset count in.
    """
    if encoding == UTF8_OFFSETS or line.isascii():
        return offset
    if encoding == UTF32_OFFSETS:
        return len(line[:offset].encode("utf-8"))
    units = 0
    for index, char in enumerate(line):
        if units >= offset:
            return len(line[:index].encode("utf-8"))
        units += 2 if ord(char) > 0xFFFF else 1
    return len(line.encode("utf-8")) + (offset - units)
