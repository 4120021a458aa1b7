"""The SCIP schema subset (codenav/scip.py): protobuf round trips, bad bytes, symbols and column encodings."""

from __future__ import annotations

import pytest

from codewell.codenav import scip
from codewell.codenav.scip import Descriptor, byte_column, index_class, message_class, parse_index, parse_symbol
from codewell.core.errors import InvalidInput


def _index_bytes() -> bytes:
    index = index_class()()
    index.metadata.tool_info.name = "scip-test"
    index.metadata.tool_info.version = "1.2"
    document = index.documents.add(relative_path="src/a.py", language="python")
    document.occurrences.add(range=[0, 4, 10], symbol="scip-python python p 1 a/f().", symbol_roles=scip.DEFINITION)
    document.occurrences.add(range=[3, 0, 5, 1], symbol="local 0", symbol_roles=0, enclosing_range=[3, 0, 6, 0])
    document.symbols.add(symbol="scip-python python p 1 a/f().", kind=17, display_name="f")
    return bytes(index.SerializeToString())


def test_an_index_round_trips_through_the_declared_schema() -> None:
    parsed = parse_index(_index_bytes())
    assert parsed.metadata.tool_info.name == "scip-test"
    (document,) = parsed.documents
    assert document.relative_path == "src/a.py"
    assert [list(o.range) for o in document.occurrences] == [[0, 4, 10], [3, 0, 5, 1]]
    assert [o.symbol_roles for o in document.occurrences] == [1, 0]
    assert list(document.occurrences[1].enclosing_range) == [3, 0, 6, 0]
    assert document.symbols[0].kind == 17


def test_the_field_numbers_are_scips_on_the_wire() -> None:
    # Hand-encoded protobuf (tag = number << 3 | wire type) with SCIP's numbers: Index.documents = 2,
    # Document.relative_path = 1, Document.occurrences = 2, Occurrence.range = 1 (packed), symbol = 2, roles = 3.
    occurrence = b"\x0a\x03\x01\x02\x03" + b"\x12\x07local 7" + b"\x18\x01"
    document = b"\x0a\x04x.py" + b"\x12" + bytes([len(occurrence)]) + occurrence
    data = b"\x12" + bytes([len(document)]) + document
    parsed = parse_index(data)
    occ = parsed.documents[0].occurrences[0]
    assert (parsed.documents[0].relative_path, list(occ.range), occ.symbol, occ.symbol_roles) == (
        "x.py",
        [1, 2, 3],
        "local 7",
        1,
    )


def test_unknown_fields_of_newer_writers_are_skipped() -> None:
    # Occurrence.syntax_kind (5) and a field number no version uses (99) are not declared here.
    occurrence = b"\x0a\x03\x00\x00\x01" + b"\x12\x07local 1" + b"\x28\x06" + b"\x98\x06\x01"
    document = b"\x0a\x04x.py" + b"\x12" + bytes([len(occurrence)]) + occurrence
    parsed = parse_index(b"\x12" + bytes([len(document)]) + document)
    assert parsed.documents[0].occurrences[0].symbol == "local 1"


@pytest.mark.parametrize("data", [b"{}", b"\xff\xff\xff\xff", b"not a scip index at all", b"\x12\x10short"])
def test_bytes_that_are_not_protobuf_are_a_clear_error(data: bytes) -> None:
    with pytest.raises(InvalidInput, match="not a SCIP index"):
        parse_index(data)


def test_an_index_without_documents_is_refused() -> None:
    empty = index_class()()
    empty.metadata.tool_info.name = "scip-test"
    for data in (b"", bytes(empty.SerializeToString())):
        with pytest.raises(InvalidInput, match="no documents"):
            parse_index(data)


def test_an_index_over_the_size_limit_is_refused_before_parsing() -> None:
    with pytest.raises(InvalidInput, match="over the 0 MB limit"):
        parse_index(_index_bytes(), max_bytes=10)


def test_message_classes_are_our_own_pool() -> None:
    assert message_class("Occurrence").DESCRIPTOR.full_name == "codewell.scip.Occurrence"


def test_global_symbols_parse_into_descriptors() -> None:
    parsed = parse_symbol("scip-python python app 0.1 `app.util`/Config#load().")
    assert parsed is not None
    assert parsed.package == "python app 0.1"
    assert parsed.descriptors == (Descriptor("app.util", "/"), Descriptor("Config", "#"), Descriptor("load", "()."))
    assert (parsed.name, parsed.container, parsed.path, parsed.kind()) == (
        "load",
        "Config",
        ["app", "util", "Config"],
        "method",
    )


def test_symbol_grammar_details() -> None:
    # Doubled spaces in the package fields, backtick escapes, disambiguators, parameters, terms.
    spaced = parse_symbol("scip-java maven com.acme  lib 1.0 com/acme/Lib#run(+1).(arg)")
    assert spaced is not None
    assert spaced.package == "maven com.acme lib 1.0"
    assert [d.suffix for d in spaced.descriptors] == ["/", "/", "#", "().", "()"]
    quoted = parse_symbol("s m p v `we``ird`.")
    assert quoted is not None
    assert quoted.name == "we`ird"
    assert quoted.kind() == "variable"
    field = parse_symbol("s m p v T#x.")
    assert field is not None
    assert field.kind() == "field"
    assert parse_symbol("s m p v f().").kind() == "function"  # type: ignore[union-attr]
    assert parse_symbol("s m p v T#").kind() == "class"  # type: ignore[union-attr]
    local = parse_symbol("local 12")
    assert local is not None
    assert local.local
    assert local.kind() == "variable"
    for broken in ("scheme only", "s m p v `open", "s m p v name", "s m p v f(x"):
        assert parse_symbol(broken) is None, broken


def test_columns_convert_to_utf8_bytes_by_the_documents_encoding() -> None:
    line = 'x = "é😀"; helper()'
    at = line.index("helper")
    expected = len(line[:at].encode("utf-8"))
    utf16 = len(line[:at].encode("utf-16-le")) // 2
    assert byte_column(line, utf16, scip.UTF16_OFFSETS) == expected
    assert byte_column(line, utf16, scip.UNSPECIFIED_ENCODING) == expected
    assert byte_column(line, at, scip.UTF32_OFFSETS) == expected
    assert byte_column(line, expected, scip.UTF8_OFFSETS) == expected
    # Past the end of the line (an index of another version of the file): counted on, never an error.
    assert byte_column("ab", 5, scip.UTF16_OFFSETS) == 5


def test_the_spelled_out_field_numbers_are_protobufs() -> None:
    """scip.py spells FieldDescriptorProto's numbers out (protobuf loads with the first upload): they must agree."""
    from google.protobuf import descriptor_pb2  # noqa: PLC0415 - the check is against the real library

    from codewell.codenav import scip  # noqa: PLC0415

    field = descriptor_pb2.FieldDescriptorProto
    assert (scip._OPTIONAL, scip._REPEATED) == (field.LABEL_OPTIONAL, field.LABEL_REPEATED)
    assert (scip._STRING, scip._INT32, scip._BOOL, scip._MESSAGE) == (
        field.TYPE_STRING,
        field.TYPE_INT32,
        field.TYPE_BOOL,
        field.TYPE_MESSAGE,
    )
