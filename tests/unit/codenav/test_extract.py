"""Symbol extraction per language: each language's queries on a real-looking file (tests/unit/codenav/fixtures.py)."""

from __future__ import annotations

import pytest

from codewell.codenav import extract as extract_module
from codewell.codenav import native
from codewell.codenav.extract import MAX_LINE_CHARS, extract
from codewell.codenav.imports import Import
from tests.unit.codenav.fixtures import SOURCES

# (kind, container, name) that each fixture must yield, and the package it declares.
EXPECTED: dict[str, set[tuple[str, str, str]]] = {
    "python": {
        ("constant", "", "MAX_SIDES"),
        ("class", "", "Shape"),
        ("field", "Shape", "sides"),
        ("method", "Shape", "__init__"),
        ("field", "Shape", "radius"),
        ("method", "Shape", "area"),
        ("function", "", "describe"),
    },
    "go": {
        ("constant", "geometry", "MaxSides"),
        ("variable", "geometry", "registry"),
        ("interface", "geometry", "Shape"),
        ("method", "Shape", "Area"),
        ("struct", "geometry", "Circle"),
        ("field", "Circle", "Radius"),
        ("type alias", "geometry", "Meters"),
        ("method", "Circle", "Area"),
        ("function", "geometry", "Describe"),
    },
    "javascript": {
        ("constant", "", "MAX_SIDES"),
        ("class", "", "Circle"),
        ("field", "Circle", "radius"),
        ("method", "Circle", "area"),
        ("function", "", "describe"),
        ("function", "", "square"),
        ("function", "", "cube"),
    },
    "typescript": {
        ("interface", "", "Shape"),
        ("method", "Shape", "area"),
        ("field", "Shape", "name"),
        ("type alias", "", "Meters"),
        ("enum", "", "Color"),
        ("constant", "Color", "Green"),
        ("class", "", "Base"),
        ("method", "Base", "area"),
        ("class", "", "Circle"),
        ("field", "Circle", "radius"),
        ("method", "Circle", "area"),
        ("function", "", "describe"),
        ("function", "", "square"),
        ("module", "", "Geometry"),
    },
    "tsx": {("interface", "", "Props"), ("field", "Props", "radius"), ("function", "", "CircleView")},
    "java": {
        ("class", "com.acme.geometry", "Circle"),
        ("field", "Circle", "MAX_SIDES"),
        ("field", "Circle", "radius"),
        ("method", "Circle", "Circle"),
        ("method", "Circle", "area"),
        ("enum", "Circle", "Color"),
        ("constant", "Circle.Color", "RED"),
        ("interface", "Circle", "Visitor"),
        ("method", "Circle.Visitor", "visit"),
        ("class", "Circle", "Point"),
    },
    "c": {
        ("macro", "", "MAX_SIDES"),
        ("macro", "", "SQUARE"),
        ("type alias", "", "size_type"),
        ("struct", "", "circle"),
        ("field", "circle", "radius"),
        ("field", "circle", "next"),
        ("field", "circle", "compare"),
        ("enum", "", "color"),
        ("constant", "color", "RED"),
        ("variable", "", "counter"),
        ("function", "", "area"),
        ("function", "", "describe"),
    },
    "cpp": {
        ("module", "", "geometry"),
        ("class", "geometry", "Circle"),
        ("method", "geometry.Circle", "Circle"),
        ("method", "geometry.Circle", "area"),
        ("method", "geometry.Circle", "sides"),
        ("field", "geometry.Circle", "radius_"),
        ("method", "Circle", "area"),
        ("struct", "geometry", "Point"),
        ("type alias", "geometry", "Meters"),
        ("function", "", "main"),
    },
    "rust": {
        ("constant", "", "MAX_SIDES"),
        ("struct", "", "Circle"),
        ("field", "Circle", "radius"),
        ("enum", "", "Color"),
        ("constant", "Color", "Red"),
        ("interface", "", "Shape"),
        ("method", "Shape", "area"),
        ("method", "Circle", "area"),
        ("method", "Circle", "new"),
        ("type alias", "", "Meters"),
        ("macro", "", "square"),
        ("module", "", "tests"),
        ("function", "", "describe"),
    },
    "ruby": {
        ("module", "", "Geometry"),
        ("constant", "Geometry", "MAX_SIDES"),
        ("class", "Geometry", "Circle"),
        ("field", "Geometry.Circle", "radius"),
        ("method", "Geometry.Circle", "initialize"),
        ("method", "Geometry.Circle", "area"),
        ("method", "Geometry.Circle", "unit"),
        ("function", "", "describe"),
    },
    "csharp": {
        ("module", "", "Acme.Geometry"),
        ("interface", "Acme.Geometry", "IShape"),
        ("method", "Acme.Geometry.IShape", "Area"),
        ("enum", "Acme.Geometry", "Color"),
        ("struct", "Acme.Geometry", "Point"),
        ("field", "Acme.Geometry.Point", "X"),
        ("class", "Acme.Geometry", "Circle"),
        ("field", "Acme.Geometry.Circle", "MaxSides"),
        ("field", "Acme.Geometry.Circle", "Name"),
        ("method", "Acme.Geometry.Circle", "Circle"),
        ("method", "Acme.Geometry.Circle", "Area"),
    },
    "php": {
        ("module", "", "Acme\\Geometry"),
        ("constant", "", "MAX_SIDES"),
        ("interface", "", "Shape"),
        ("method", "Shape", "area"),
        ("class", "", "Named"),
        ("class", "", "Circle"),
        ("field", "Circle", "radius"),
        ("method", "Circle", "__construct"),
        ("method", "Circle", "area"),
        ("function", "", "describe"),
    },
    "kotlin": {
        ("interface", "com.acme.geometry", "Shape"),
        ("method", "Shape", "area"),
        ("class", "com.acme.geometry", "Circle"),
        ("field", "Circle", "radius"),
        ("method", "Circle", "area"),
        ("class", "com.acme.geometry", "Registry"),
        ("enum", "com.acme.geometry", "Color"),
        ("constant", "Color", "RED"),
        ("type alias", "com.acme.geometry", "Meters"),
        ("function", "com.acme.geometry", "describe"),
    },
}

IMPORTS: dict[str, list[tuple[str, str, str]]] = {
    "python": [("math", "", "math"), (".util", "helper", "h")],
    "go": [("fmt", "", "f"), ("example.com/acme/util", "", "util")],
    "javascript": [
        ("./util", "helper", "h"),
        ("./util", "other", "other"),
        ("../lib/index.js", "default", "Default"),
        ("path", "", "path"),
    ],
    "typescript": [("./util", "helper", "helper"), ("@/config", "Options", "Options")],
    "tsx": [("react", "default", "React"), ("./shapes", "Circle", "Circle")],
    "java": [("java.util", "List", "List"), ("com.acme.util", "Helper", "Helper")],
    "c": [("<stdio.h>", "", ""), ("shape.h", "", "")],
    "cpp": [("<vector>", "", ""), ("shape.hpp", "", "")],
    "rust": [
        ("std::collections", "HashMap", "HashMap"),
        ("crate::util", "helper", "helper"),
        ("crate::util", "other", "o"),
    ],
    "ruby": [("json", "", ""), ("./util", "", "")],
    "csharp": [("System", "*", ""), ("Acme.Util", "*", "")],
    "php": [("Acme\\Util", "Helper", "Helper"), ("util.php", "", "")],
    "kotlin": [("com.acme.util", "Helper", "Helper"), ("kotlin.math", "PI", "Pi")],
}


@pytest.mark.parametrize("language", sorted(SOURCES))
def test_definitions_per_language(language: str) -> None:
    path, source = SOURCES[language]
    result = extract(path, source.encode())
    assert not result.skipped
    found = {(s.kind, s.container, s.name) for s in result.symbols}
    assert EXPECTED[language] <= found, EXPECTED[language] - found


@pytest.mark.parametrize("language", sorted(SOURCES))
def test_imports_per_language(language: str) -> None:
    path, source = SOURCES[language]
    result = extract(path, source.encode())
    assert [(i.module, i.name, i.alias) for i in result.imports] == IMPORTS[language]


@pytest.mark.parametrize("language", sorted(SOURCES))
def test_occurrences_skip_comments_and_strings(language: str) -> None:
    path, source = SOURCES[language]
    result = extract(path, source.encode())
    lines = source.splitlines()
    assert result.occurrences
    for o in result.occurrences:
        # Every occurrence is the identifier itself at its position (1-based line and byte column).
        assert lines[o.line - 1].encode()[o.column - 1 : o.column - 1 + len(o.name.encode())] == o.name.encode()
        text = lines[o.line - 1]
        assert not text.lstrip().startswith(("//", "/*", "# ")), f"occurrence in a comment: {text!r}"


def test_ranges_and_roles_in_python() -> None:
    path, source = SOURCES["python"]
    result = extract(path, source.encode())
    area = next(s for s in result.symbols if s.name == "area")
    assert (area.line, area.column, area.end_line, area.end_column) == (14, 9, 14, 13)
    assert (area.def_line, area.def_end_line) == (14, 16)
    roles = {(o.name, o.line): o.role for o in result.occurrences}
    assert roles[("area", 14)] == "d"
    assert roles[("helper", 3)] == "i"
    assert roles[("area", 20)] == "m"  # shape.area(): a member access
    assert roles[("describe", 19)] == "d"
    assert roles[("Base", 8)] == "r"
    # "helper" in the comment and the string on line 15 are not identifiers.
    assert not [o for o in result.occurrences if o.line == 15]


def test_go_package_and_method_receiver() -> None:
    path, source = SOURCES["go"]
    result = extract(path, source.encode())
    assert result.package == "geometry"
    assert Import("example.com/acme/util", "", "util", 3) in result.imports


def test_unsupported_minified_and_broken_files() -> None:
    assert extract("README.md", b"# hello\n").language == ""
    minified = extract("dist/app.js", b"var a=1;" * (MAX_LINE_CHARS // 4))
    assert minified.skipped.startswith("minified")
    assert not minified.symbols
    # tree-sitter recovers from syntax errors: the definitions before and after the damage are still found.
    broken = extract("x.py", b"def good():\n    pass\n\ndef broken(:\n    return (\n\nclass After:\n    pass\n")
    assert {"good", "After"} <= {s.name for s in broken.symbols}


def test_names_in_c_macro_bodies_are_references() -> None:
    source = (
        b"#define hvalue(o) check_exp(ttistable(o), gco2t(val_(o).gc)) /* not_this */\n"
        b'#define MSG(x) log_it("not_that", \\\n    x->len)\n'
        b"int f(void) { return hvalue(0); }\n"
    )
    found = {(o.name, o.line, o.column, o.role) for o in extract("lobject.h", source).occurrences}
    assert {("check_exp", 1, 19, "r"), ("ttistable", 1, 29, "r"), ("gc", 1, 57, "m")} <= found
    assert {("log_it", 2, 16, "r"), ("len", 3, 8, "m"), ("hvalue", 1, 9, "d"), ("hvalue", 4, 22, "r")} <= found
    assert not {name for name, *_ in found} & {"not_this", "not_that"}


def test_parse_cut_off_at_the_deadline_is_skipped_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    # A big file (parsed through the callback) whose parse outlives the deadline: tree-sitter cancels it, and the
    # file is reported as skipped instead of failing the whole revision's extraction.
    source = "".join(f"int f{i}(int x) {{ return x + {i}; }}\n" for i in range(20000)).encode()
    assert len(source) > 256 * 1024
    # C goes through the native scanner (linear, no deadline) when it is built: this is the tree-sitter path.
    monkeypatch.setattr(native, "ENABLED", False)
    monkeypatch.setattr(extract_module, "PARSE_SECONDS", -1.0)
    found = extract("big.c", source)
    assert found.skipped == "parsing took over -1 s"
    assert not found.symbols
    monkeypatch.setattr(extract_module, "PARSE_SECONDS", 60.0)
    assert len(extract("big.c", source).symbols) == 20000
