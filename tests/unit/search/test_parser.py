"""Table-driven tests of the query parser: trees, filters, and errors that point at the fix."""

from __future__ import annotations

import re
import time

import pytest

from codewell.core.errors import InvalidInput
from codewell.search.query.parser import (
    MAX_NESTING,
    MAX_QUERY_LENGTH,
    MAX_TERMS,
    And,
    Not,
    Or,
    Pattern,
    RepoFilter,
    parse_query,
)


def lit(text: str) -> Pattern:
    return Pattern(re.escape(text), text, False, 0)


def shape(node: object) -> object:
    """The tree without positions, for compact expectations."""
    if isinstance(node, Pattern):
        return ("re" if node.regex else "lit", node.text)
    if isinstance(node, Not):
        return ("not", shape(node.child))
    if isinstance(node, And):
        return ("and", *[shape(c) for c in node.children])
    if isinstance(node, Or):
        return ("or", *[shape(c) for c in node.children])
    return node


TREES = [
    ("foo", ("lit", "foo")),
    ("foo bar", ("and", ("lit", "foo"), ("lit", "bar"))),
    ('"foo bar"', ("lit", "foo bar")),
    ('"say \\"hi\\""', ("lit", 'say "hi"')),
    ("/fo+/", ("re", "fo+")),
    ("/a\\/b/", ("re", "a/b")),
    ("a OR b", ("or", ("lit", "a"), ("lit", "b"))),
    ("a or b and c", ("or", ("lit", "a"), ("and", ("lit", "b"), ("lit", "c")))),
    ("a AND b OR c", ("or", ("and", ("lit", "a"), ("lit", "b")), ("lit", "c"))),
    ("(a OR b) c", ("and", ("or", ("lit", "a"), ("lit", "b")), ("lit", "c"))),
    ("a NOT b", ("and", ("lit", "a"), ("not", ("lit", "b")))),
    ("not a b", ("and", ("not", ("lit", "a")), ("lit", "b"))),
    ("foo() bar", ("and", ("lit", "foo()"), ("lit", "bar"))),
    ("(mutex_lock(x))", ("lit", "mutex_lock(x)")),
    ("http://x.org", ("lit", "http://x.org")),
    ("a.b*c", ("lit", "a.b*c")),
]


@pytest.mark.parametrize(("query", "expected"), TREES)
def test_pattern_trees(query: str, expected: object) -> None:
    assert shape(parse_query(query).expr) == expected


def test_literals_are_escaped_for_re2() -> None:
    assert parse_query("a.b*c").expr == Pattern(re.escape("a.b*c"), "a.b*c", False, 0)


FILTERS = [
    ("foo repo:abc", {"repos": (RepoFilter("abc"),)}),
    ("foo r:abc@dev", {"repos": (RepoFilter("abc", ("dev",)),)}),
    ("foo repo:abc rev:v1:v2", {"repos": (RepoFilter("abc", ("v1", "v2")),), "revisions": ("v1", "v2")}),
    ("foo -repo:old", {"exclude_repos": ("old",)}),
    ("foo file:\\.py$ -f:test", {"files": ("\\.py$",), "exclude_files": ("test",)}),
    ("foo lang:Go -lang:c", {"languages": ("go",), "exclude_languages": ("c",)}),
    ("foo count:20", {"count": 20}),
    ("foo count:all", {"count_all": True}),
    ("foo case:yes", {"case_sensitive": True}),
    ("foo type:path", {"type": "path"}),
    ("foo timeout:500ms", {"timeout": 0.5}),
    ("foo timeout:2m", {"timeout": 60.0}),
    ("file:\\.go$", {"files": ("\\.go$",), "expr": None}),
    ('foo file:"a b"', {"files": ("a b",)}),
]


@pytest.mark.parametrize(("query", "expected"), FILTERS)
def test_filters(query: str, expected: dict[str, object]) -> None:
    parsed = parse_query(query)
    for name, value in expected.items():
        assert getattr(parsed, name) == value, name


ERRORS = [
    ("", "empty query", "search term"),
    ("   ", "empty query", "search term"),
    ('"foo', "unbalanced quote at column 1", "close the"),
    ("foo rev:v1", "rev: needs repo: at column 5", "add repo:"),
    ("(foo", "unbalanced parenthesis at column 1", "add the missing )"),
    ("(foo) )", "unbalanced parenthesis", "remove the )"),
    ("/foo(/", "invalid regex", "RE2"),
    ("/(?=x)/", "invalid regex", "lookaround"),
    ("/abc", "unterminated regex at column 1", "closing /"),
    ("foo file:*.py", "looks like a glob", "file:\\.py$"),
    ("foo file:**/*.go", "looks like a glob", "file:"),
    ("repo:foo", "only filters", "add a search term"),
    ("foo count:0", "count:0 is not valid", "count:all"),
    ("foo case:maybe", "case:maybe is not valid", "case:yes"),
    ("foo type:commit", "type:commit is not supported", "type:path"),
    ("foo timeout:soon", "not a duration", "timeout:5s"),
    ("foo OR", "OR needs a term", "remove"),
    ("AND foo", "AND needs a term", "remove"),
    ("foo NOT", "NOT needs a term", "NOT <term>"),
    ("()", "empty parentheses", "put a term"),
    ("foo repo:abc rev:a rev:b", "rev: given twice", "rev:a:b"),
    ("foo repo:x@a rev:b", "rev: given twice", "either"),
    ("foo -count:3", "cannot be negated", "remove the -"),
]


@pytest.mark.parametrize(("query", "message", "hint"), ERRORS)
def test_errors_point_at_position_and_fix(query: str, message: str, hint: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_query(query)
    assert message in info.value.message
    assert hint in (info.value.hint or "")


def test_hostile_regexes_fail_fast() -> None:
    with pytest.raises(InvalidInput, match=r"too long|too large|invalid"):
        parse_query("/" + "|".join(f"w{i}x" for i in range(10_000)) + "/")
    with pytest.raises(InvalidInput, match="too long"):
        parse_query("/" + "(" * 5000 + "a" + ")" * 5000 + "/")
    # Catastrophic for backtracking engines, linear for RE2: accepted.
    assert parse_query("/(a+)+$/").expr is not None


def test_positive_patterns_skip_negations() -> None:
    q = parse_query("a NOT b (c OR NOT d)")
    assert [p.text for p in q.patterns()] == ["a", "c"]


def test_deep_nesting_is_refused_with_a_specific_error() -> None:
    """#22: ~1,000 parentheses or 1,200 NOTs were a RecursionError; now a clear InvalidInput, quickly."""
    started = time.monotonic()
    for query in ["(" * 1000 + "a" + ")" * 1000, "NOT " * 1200 + "a", "x " + "(a OR " * 40 + "b" + ")" * 40]:
        with pytest.raises(InvalidInput) as info:
            parse_query(query)
        assert f"more than {MAX_NESTING} levels deep" in info.value.message
        assert "parentheses" in (info.value.hint or "")
    assert time.monotonic() - started < 1
    # Up to the limit is fine.
    assert shape(parse_query("(" * MAX_NESTING + "a" + ")" * MAX_NESTING).expr) == ("lit", "a")
    assert parse_query("x " + "NOT " * (MAX_NESTING - 1) + "a").expr is not None


def test_overlong_query_is_refused_with_the_limit() -> None:
    with pytest.raises(InvalidInput) as info:
        parse_query("a" * (MAX_QUERY_LENGTH + 1))
    assert f"at most {MAX_QUERY_LENGTH}" in info.value.message
    assert "shorten" in (info.value.hint or "")


def test_identical_terms_are_merged_and_distinct_ones_bounded() -> None:
    """#22: `a a a ...` is one term; more than MAX_TERMS different terms are refused naming the limit."""
    assert parse_query("a " * 3000).expr == lit("a")
    assert shape(parse_query("a b a (b OR b) a").expr) == ("and", ("lit", "a"), ("lit", "b"))
    assert shape(parse_query("a OR a OR b").expr) == ("or", ("lit", "a"), ("lit", "b"))
    parse_query(" ".join(f"t{i}" for i in range(MAX_TERMS)))
    with pytest.raises(InvalidInput) as info:
        parse_query(" OR ".join(f"t{i}" for i in range(MAX_TERMS + 1)))
    assert f"({MAX_TERMS + 1} different ones, at most {MAX_TERMS})" in info.value.message
    assert "fewer terms" in (info.value.hint or "")


@pytest.mark.parametrize(
    ("query", "value", "regex"),
    [
        ("type:symbol parse", "parse", False),
        ("sym:parse", "parse", False),
        ("symbol:parse lang:python", "parse", False),
        ("sym:/^Parse.*er$/", "^Parse.*er$", True),
    ],
)
def test_symbol_queries(query: str, value: str, regex: bool) -> None:
    q = parse_query(query)
    assert q.type == "symbol"
    assert [(p.text, p.regex) for p in q.patterns()] == [(value, regex)]


def test_sym_is_refused_negated_and_with_another_type() -> None:
    with pytest.raises(InvalidInput, match="cannot be negated"):
        parse_query("-sym:foo")
    with pytest.raises(InvalidInput, match="cannot be combined"):
        parse_query("sym:foo type:path")
