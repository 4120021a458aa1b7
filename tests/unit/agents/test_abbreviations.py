"""Abbreviations in identifiers and file names match the words a question spells out (#31): the table of
common programming abbreviations, truncations of long words, two truncated words run together, and a verb
run together with its particle; files named that way rank by their name, and tests by the code they test."""

from __future__ import annotations

from codewell.agents.abbreviations import ABBREVIATIONS, expansions, matcher
from codewell.agents.retrieval import code_under_test, extract_terms, matched_words, name_match, split_identifier


def test_the_table_maps_abbreviations_to_the_stems_of_their_words_both_ways() -> None:
    assert "window" in expansions("win")
    assert {"regular", "express"} <= expansions("regex")
    assert "argument" in expansions("args")  # the plural through its stem
    assert "cfg" not in ABBREVIATIONS
    assert "config" in expansions("configuration")
    assert expansions("table") == frozenset()


def test_truncations_and_contractions_of_the_question_words() -> None:
    match = matcher(["compile", "regular", "expression", "options", "positional"])
    assert match("regexp") == {"regular", "express"}  # reg + exp, two adjacent words
    assert match("expr") == {"express"}  # a truncation of a long word
    assert match("opts") == {"option"}  # the table, through the stem
    assert match("ops") == frozenset()  # `op` is an operation, and no prefix of a question word
    assert match("opt") == {"option"}
    assert match("pos") == {"posit"}
    # Too short to be a truncation, or the word itself inflected (stemming's business, not this one's).
    assert match("re") == frozenset()
    assert matcher(["router"])("route") == frozenset()
    # Words that are not adjacent in the question are not contracted into one name.
    assert matcher(["regular", "files", "expression"])("regexp") == frozenset()


def test_a_verb_and_its_particle_are_one_name() -> None:
    terms = extract_terms("where is the plugin looked up when the server starts")
    assert "lookup" in terms.compounds
    assert matched_words(["lookup"], terms).stems == {"look"}
    assert matcher(["call", "back"])("callback") == {"call", "back"}


def test_names_made_of_abbreviations_match_the_question() -> None:
    terms = extract_terms("how are positional arguments checked against the regular expression")
    found = matched_words(split_identifier("validateArgsRegexp"), terms)
    assert found.total == 3
    assert found.parts == 2
    assert found.stems == {"argument", "regular", "express"}
    assert found.abbreviated == found.stems
    # Matched only through abbreviations, each stem weighs less than a word as written.
    assert found.weight == 1.5
    written = matched_words(split_identifier("check_arguments"), terms)
    assert written.weight == 2.0
    assert written.abbreviated == frozenset()


def test_a_file_named_with_an_abbreviation_ranks_by_its_name() -> None:
    terms = extract_terms("what does the tool do differently on Windows when it starts")
    assert name_match("internal/proc_win.go", terms) > 0
    assert name_match("internal/proc_windows.go", terms) == 0  # words as written: nls weighs paths already
    assert name_match("internal/proc.go", terms) == 0
    # Half of the name's words at least: one abbreviation among many unrelated words is no name match.
    assert name_match("internal/proc_fork_exec_win.go", terms) == 0


def test_words_with_underscores_are_also_searched_by_their_parts() -> None:
    terms = extract_terms("where is __repr__ generated")
    assert "__repr__" in terms.keywords
    assert {"__repr__", "repr", "generat"} <= terms.stems


def test_a_test_file_is_paired_with_the_code_file_it_tests() -> None:
    assert code_under_test("pkg/args_test.go") == "pkg/args.go"
    assert code_under_test("src/test_parser.py") == "src/parser.py"
    assert code_under_test("lib/router.spec.ts") == "lib/router.ts"
    assert code_under_test("lib/router.test.js") == "lib/router.js"
    assert code_under_test("lib/router.js") is None
    assert code_under_test("tests/conftest.py") is None
