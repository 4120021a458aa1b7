"""Tokens and chunk boundaries of the nls index."""

from __future__ import annotations

from codewell.nls.index import WINDOW, chunk_file, split_identifier, terms


def test_identifiers_split_whole_and_stemmed() -> None:
    assert split_identifier("parseHTTPRequest") == ["parse", "http", "request"]
    assert split_identifier("snake_case") == ["snake", "case"]
    assert terms("parseHTTPRequest retries") == ["parsehttprequest", "pars", "http", "request", "retri"]
    assert terms("the self return") == []


def test_small_file_is_one_chunk_and_big_files_follow_definitions() -> None:
    small = ["x = 1"] * 50
    assert [(c.start, c.end) for c in chunk_file("a.py", small, [(3, 5, "f")])] == [(1, 50)]
    big = ["x = 1"] * 200
    chunks = chunk_file("b.py", big, [(101, 120, "g")])
    spans = [(c.start, c.end) for c in chunks]
    assert (101, 120) in spans
    assert all(c.end - c.start + 1 <= WINDOW + WINDOW // 4 for c in chunks)
    assert spans[0][0] == 1
    assert spans[-1][1] == 200
