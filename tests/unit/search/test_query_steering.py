"""The search page's steering mapped onto the query language: `patterntype:regexp` keeps words next to each other
as one regex, RE2's errors read as text, and the page's toggles (regex, case, whole word) become query fields."""

from __future__ import annotations

import pytest

from codewell.core.errors import InvalidInput
from codewell.search.query.parser import And, Not, Or, Pattern, parse_query
from codewell.search.query.regex import compile_regex
from codewell.web.pages import Steering, _char_ranges, _mark_html, effective_query, steering, whole_words


def _regex(node: object) -> str:
    assert isinstance(node, Pattern)
    assert node.regex
    return node.value


def test_regexp_mode_keeps_words_next_to_each_other_as_one_regex_with_their_spaces() -> None:
    parsed = parse_query(r"patterntype:regexp func (c \*Command) Execute")
    assert _regex(parsed.expr) == r"func (c \*Command) Execute"
    escaped = parse_query(r"patterntype:regexp func \(c \*Command\) Execute")
    assert compile_regex(_regex(escaped.expr), case_sensitive=True).search(b"func (c *Command) Execute() error")
    assert _regex(parse_query("foo  bar patterntype:regexp").expr) == "foo  bar"  # whitespace as typed


def test_regexp_mode_still_splits_at_filters_operators_quotes_and_boolean_groups() -> None:
    split = parse_query("patterntype:regexp foo bar file:x baz").expr
    assert isinstance(split, And)
    assert [_regex(c) for c in split.children] == ["foo bar", "baz"]
    grouped = parse_query("patterntype:regexp (foo or bar) baz qux").expr
    assert isinstance(grouped, And)
    assert isinstance(grouped.children[0], Or)
    assert _regex(grouped.children[1]) == "baz qux"
    quoted = parse_query('patterntype:regexp a b "x y" c').expr
    assert isinstance(quoted, And)
    assert [c.value for c in quoted.children if isinstance(c, Pattern)] == [
        "a b",
        r"x\ y",
        "c",
    ]
    negated = parse_query("patterntype:regexp not foo bar").expr
    assert isinstance(negated, Not)
    assert _regex(negated.child) == "foo bar"


def test_regexp_mode_reads_parentheses_that_are_only_valid_as_regex() -> None:
    assert _regex(parse_query("patterntype:regexp foo( )").expr) == "foo( )"
    assert _regex(parse_query("foo(a|b) patterntype:regexp").expr) == "foo(a|b)"
    with pytest.raises(InvalidInput, match="unbalanced parenthesis"):
        parse_query("foo( )")  # keyword mode: still the parser's error


def test_keyword_mode_is_unchanged() -> None:
    expr = parse_query("foo bar").expr
    assert isinstance(expr, And)
    assert [c.text for c in expr.children if isinstance(c, Pattern)] == ["foo", "bar"]


def test_an_invalid_regex_error_shows_the_pattern_as_text_not_a_bytes_literal() -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_query("patterntype:regexp a(")
    assert "b'" not in caught.value.message
    assert "(?m)" not in caught.value.message
    assert "invalid regex /a(/: missing ): a(" in caught.value.message
    with pytest.raises(InvalidInput) as slashed:
        parse_query("/é(/")
    assert "missing ): é(" in slashed.value.message


def test_toggles_come_from_the_address_unless_the_query_sets_them() -> None:
    steer = steering({"patternType": "regexp", "case": "yes", "word": "yes", "context": "3"}, "foo")
    assert (steer.regexp, steer.case, steer.word, steer.context) == (True, True, True, 3)
    assert steer.params() == {"patternType": "regexp", "case": "yes", "word": "yes", "context": "3"}
    fixed = steering({"case": "yes"}, "foo case:no")
    assert fixed.case is False
    assert fixed.case_in_query
    assert "case" not in fixed.params()
    assert steering({"context": "99"}, "x").context == 10
    assert steering({"context": "-1"}, "x").context == 1  # not a number: the default


def test_effective_query_writes_the_toggles_as_fields() -> None:
    assert effective_query("foo bar", Steering()) == "foo bar"
    regexp = effective_query("fo+ bar", Steering(regexp=True, case=True))
    assert regexp == "fo+ bar patterntype:regexp case:yes"
    parsed = parse_query(regexp)
    assert parsed.case_sensitive
    assert _regex(parsed.expr) == "fo+ bar"
    # A field in the query wins: the toggle adds nothing.
    assert effective_query("foo case:no", steering({"case": "yes"}, "foo case:no")) == "foo case:no"


def test_whole_word_bounds_each_term_and_keeps_the_filters() -> None:
    text = whole_words('get "a b" or foo( -file:_test repo:^acme/x$@v1 lang:python count:5 case:yes')
    parsed = parse_query(text)
    assert isinstance(parsed.expr, Or)
    first, second = parsed.expr.children
    assert isinstance(first, And)
    assert [_regex(c) for c in first.children] == [r"\bget\b", r"\ba\ b\b"]
    assert _regex(second) == r"\bfoo\("  # no \b after a non-word character: `foo(x)` still matches
    assert parsed.exclude_files == ("_test",)
    assert parsed.languages == ("python",)
    assert parsed.repos[0].pattern == "^acme/x$"
    assert parsed.repos[0].revisions == ("v1",)
    assert parsed.count == 5
    assert parsed.case_sensitive
    regex = compile_regex(_regex(first.children[0]), case_sensitive=False)
    assert regex.search(b"x = get(1)")
    assert not regex.search(b"x = getter(1)")
    assert _regex(parse_query(whole_words("/a|b/ path/to")).expr.children[1]) == r"\bpath/to\b"  # type: ignore[union-attr]
    assert whole_words("file:x") == "file:x"  # no term: nothing to bound


def test_marks_go_inside_highlighted_tokens_and_never_straddle_a_tag() -> None:
    fragment = '<span class="k">def</span> <span class="nf">foo_bar</span>(x &amp; y)'
    assert _mark_html(fragment, [(4, 11)], 18) == (
        '<span class="k">def</span> <span class="nf"><mark>foo_bar</mark></span>(x &amp; y)'
    )
    assert _mark_html(fragment, [(2, 5)], 18) == (
        '<span class="k">de<mark>f</mark></span><mark> </mark><span class="nf"><mark>f</mark>oo_bar</span>(x &amp; y)'
    )
    assert _mark_html(fragment, [(14, 15)], 18) == (
        '<span class="k">def</span> <span class="nf">foo_bar</span>(x <mark>&amp;</mark> y)'
    )
    assert _mark_html(fragment, [(0, 1)], 17) is None  # the text is not the line's: the caller marks the plain line


def test_byte_ranges_become_character_ranges() -> None:
    assert _char_ranges("héllo wörld", [(7, 13)]) == [(6, 11)]
    assert _char_ranges("abc", [(2, 3), (0, 2), (1, 1)]) == [(0, 3)]
