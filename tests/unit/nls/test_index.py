"""Tokens and chunk boundaries of the nls index."""

from __future__ import annotations

import json
import re
from pathlib import Path

from codewell.nls.index import (
    BYTE_END,
    BYTE_START,
    WINDOW,
    SourceFile,
    build,
    chunk_file,
    exists,
    load,
    split_identifier,
    terms,
)


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


def test_chunks_read_back_by_byte_range(tmp_path: Path) -> None:
    # A chunk's text is read from its blob by byte range: CRLF lines, multi-byte characters before the chunk
    # and a last line without a newline must give back exactly the chunk's lines.
    lines = [f"line {i} é\r" if i % 2 else f"ligne {i} ü" for i in range(1, 200)]
    data = "\n".join(lines).encode()
    decoded = [line.removesuffix("\r") for line in data.decode().split("\n")]
    build(tmp_path / "ix", [SourceFile("a/b.c", "f" * 40, data, [(101, 130, "fn")])])
    index = load(tmp_path / "ix")
    assert index is not None
    assert index.paths == ["a/b.c"]
    assert index.blobs == ["f" * 40]
    assert len(index) == len(index.table) > 2
    for i in range(len(index)):
        row, chunk = index.table[i], index.chunk(i)
        raw = data[int(row[BYTE_START]) : int(row[BYTE_END])].decode()
        got = [line.removesuffix("\r") for line in raw.split("\n")][: chunk.end - chunk.start + 1]
        assert got == decoded[chunk.start - 1 : chunk.end], (chunk.start, chunk.end)
    assert index.chunk(next(i for i in range(len(index)) if index.chunk(i).start == 101)).symbols == ("fn",)
    assert index.scores(["lign"]).max() > 0
    assert bool(index.path_mask(re.compile(r"\.c$")).all())
    assert not bool(index.path_mask(re.compile(r"\.py$")).any())


def test_index_of_another_format_is_not_loaded(tmp_path: Path) -> None:
    folder = tmp_path / "ix"
    build(folder, [SourceFile("a.py", "0" * 40, b"x = 1\n", [])])
    assert exists(folder)
    assert load(folder) is not None
    raw = json.loads((folder / "files.json").read_text())
    (folder / "files.json").write_text(json.dumps({**raw, "format": 1}))
    assert load(folder) is None
