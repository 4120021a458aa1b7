"""The native term counter (nls/_tokenize.c) against the Python tokenizer it replaces in the index build.

Both must give the same terms with the same counts for any text, and `build` must write the same bm25s model
(every score bit for bit) whichever path runs; the Python path is what runs when the extension is not built.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import bm25s
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codewell.nls import _tokenize, native
from codewell.nls.index import (
    COMMENT_BOOST,
    PATH_BOOST,
    SYMBOL_BOOST,
    Chunk,
    SourceFile,
    _chunk_bytes,
    _word_token,
    build,
    chunk_tokens,
    load,
)

WEIGHTS = (COMMENT_BOOST, PATH_BOOST, SYMBOL_BOOST)


def _lines(data: bytes) -> list[str]:
    # As nls/service.py decodes a blob for the index.
    lines = data.decode("utf-8", "replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def python_counts(data: bytes, path: str, symbols: tuple[str, ...]) -> Counter[str]:
    lines = _lines(data)
    tokens = chunk_tokens(Chunk(path, 1, len(lines), symbols), lines)
    return Counter() if tokens == ["\x00empty"] else Counter(tokens)


def native_counts(docs: list[tuple[bytes, str, tuple[str, ...]]]) -> list[Counter[str]]:
    counter = _tokenize.TermCounter(_word_token)
    for data, path, symbols in docs:
        counter.add_file(data, [(0, len(data))], path.encode(), [" ".join(symbols).encode()], *WEIGHTS)
    n_docs, n_pairs, _ = counter.sizes()
    doc_len, doc_pairs = np.empty(n_docs, np.int64), np.empty(n_docs, np.int64)
    terms, counts = np.empty(n_pairs, np.int32), np.empty(n_pairs, np.int32)
    counter.export(doc_len, doc_pairs, terms, counts)
    vocab = counter.tokens()
    out: list[Counter[str]] = []
    at = 0
    for length, pairs in zip(doc_len.tolist(), doc_pairs.tolist(), strict=True):
        found = Counter(
            {
                vocab[t]: c
                for t, c in zip(terms[at : at + pairs].tolist(), counts[at : at + pairs].tolist(), strict=True)
            }
        )
        assert sum(found.values()) == length  # a document's length counts its terms with repetitions
        out.append(found)
        at += pairs
    return out


CASES = [
    "parseHTTPRequest(snake_case, HTTPServer, getURLs2json, ABCdef, aB, X509_NAME, __init__, _x, a1b2)",
    "def run(self):\n    return None  # retries the request\n",
    "int x = 1; /* Frees the SLAB object */ y *= 2; // comment: doThings\n*continued_comment line\n",
    '"""Docstring words here"""\nx = """other"""  \'\'\'quoted_words\'\'\'\n',
    "café naïve_word mañana über_Cool 日本語 ident_ü\r\nnext_line\r\n",
    "the and of to is\n",  # stop words only: an empty document
    "",
    "#\n//\n/*\n'''\n\"\"\"\n* *\n",
    "0x1F 123abc 9lives v4l2_ioctl __ 0",
]


@pytest.mark.parametrize("text", CASES)
def test_terms_and_counts_match_python(text: str) -> None:
    data = text.encode()
    assert native_counts([(data, "drivers/net/wifi_Core.c", ("StationInfo.associate",))]) == [
        python_counts(data, "drivers/net/wifi_Core.c", ("StationInfo.associate",))
    ]


def test_invalid_utf8_and_non_ascii_paths_match_python() -> None:
    data = b"good_name \xff\xfe bad\xc3(x) mid\xe2\x82word tail\xe2"
    path, symbols = "src/\udcff/ünïcode_Path.py", ("Ωmega.run", "plainName")
    counter = _tokenize.TermCounter(_word_token)
    names = [" ".join(symbols).encode("utf-8", "surrogatepass")]
    counter.add_file(data, [(0, len(data))], path.encode("utf-8", "surrogatepass"), names, *WEIGHTS)
    assert counter.sizes()[0] == 1
    assert native_counts([(data, "p", ())]) == [python_counts(data, "p", ())]


# Characters that matter to splitting and comment marks, and whole words (stop words, an acronym) among them.
code_text = st.lists(
    st.sampled_from([*"aAbBzZhHtTpP_019 \n\r\t#/*'\".,(){};:=-é", "the", "self", "HTTP", "get", "Url", '"""']),
    max_size=120,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(code_text, min_size=1, max_size=4), symbol=st.text(alphabet="aBc_.D1 ", max_size=20))
def test_any_text_counts_like_python(texts: list[str], symbol: str) -> None:
    docs = [(t.encode(), "a/b_c/HttpThing.py", (symbol,) if symbol else ()) for t in texts]
    assert native_counts(docs) == [python_counts(*doc) for doc in docs]


@settings(max_examples=200, deadline=None)
@given(
    data=st.lists(st.sampled_from([b"a", b"\n", b"\r", b"\xc3\xa9", b"xy"]), max_size=30).map(b"".join),
    seed=st.randoms(),
)
def test_chunk_byte_ranges_match_python(data: bytes, seed: random.Random) -> None:
    count = len(_lines(data)) or 1
    spans = [(first, seed.randint(first - 1, count + 1)) for first in sorted(seed.randint(1, count) for _ in range(5))]
    assert native.chunk_bytes(data, spans) == _chunk_bytes(data, spans)
    with pytest.raises(ValueError, match="not a range"):
        native.chunk_bytes(data, [(0, 1)])
    with pytest.raises(TypeError, match="tuples"):
        native.chunk_bytes(data, [[1, 1]])  # type: ignore[list-item]


def _files() -> Iterator[SourceFile]:
    big = "\n".join(
        f"def handler_{i}(request):  # Parses the HTTPRequest {i}\n    return parseHeader(request, retries={i})"
        for i in range(60)
    )
    texts = {
        "pkg/http_client.py": big + "\n",
        "pkg/empty_words.txt": "the of and\n",
        "README.md": "# Retries\nRetrying requests with backoff.\n",
        "src/ünï.c": "static int fooBar(void) { /* frees the slab */ return 0; }\r\n",
    }
    for path, text in texts.items():
        data = text.encode()
        lines = _lines(data)
        spans = [(1, 2, "handler_0"), (3, 4, "Client.handler_1")] if path.endswith(".py") else []
        yield SourceFile(path, "a" * 40, data, lines, spans)


def _model_triples(folder: Path) -> dict[tuple[str, int], float]:
    model = bm25s.BM25.load(str(folder / "bm25"))
    names = {i: t for t, i in model.vocab_dict.items()}
    indptr, indices, data = (np.asarray(model.scores[k]) for k in ("indptr", "indices", "data"))
    out: dict[tuple[str, int], float] = {}
    for col in range(len(indptr) - 1):
        for k in range(indptr[col], indptr[col + 1]):
            out[names[col], int(indices[k])] = float(data[k])
    assert list(indptr) == sorted(indptr)
    return out


@pytest.mark.parametrize("files", [_files, lambda: iter(())], ids=["files", "nothing"])
def test_build_writes_the_same_model_with_and_without_native(tmp_path: Path, files: object) -> None:
    assert callable(files)
    try:
        native.ENABLED = False
        build(tmp_path / "python", files())
    finally:
        native.ENABLED = True
    build(tmp_path / "native", files())
    python, fast = load(tmp_path / "python"), load(tmp_path / "native")
    assert python is not None
    assert fast is not None
    assert python.model.vocab_dict.keys() == fast.model.vocab_dict.keys()
    assert python.model.scores["num_docs"] == fast.model.scores["num_docs"]
    assert _model_triples(tmp_path / "python") == _model_triples(tmp_path / "native")  # exact floats
    assert np.array_equal(python.table, fast.table)
    for question in (["retri"], ["http", "request"], ["slab", "foobar"], ["\x00empty"]):
        assert np.array_equal(python.scores(question), fast.scores(question))


def test_bad_input_is_refused_with_a_specific_error() -> None:
    counter = _tokenize.TermCounter(_word_token)
    with pytest.raises(ValueError, match="outside the data"):
        counter.add_file(b"abc", [(0, 4)], b"p", [b""], 1, 2, 3)
    with pytest.raises(ValueError, match="one symbols entry per range"):
        counter.add_file(b"abc", [(0, 3)], b"p", [], 1, 2, 3)
    with pytest.raises(ValueError, match="weights"):
        counter.add_file(b"abc", [(0, 3)], b"p", [b""], -1, 2, 3)
    with pytest.raises(TypeError, match="word_token must return str or None"):
        _tokenize.TermCounter(lambda word: 1).add_file(b"some words", [(0, 10)], b"", [b""], 1, 2, 3)
    with pytest.raises(ZeroDivisionError):  # the callable's own error comes through
        _tokenize.TermCounter(lambda word: 1 / 0).add_file(b"some words", [(0, 10)], b"", [b""], 1, 2, 3)
    with pytest.raises(ValueError, match="doc_len: expected 0 bytes"):  # failed calls added no document
        counter.export(np.empty(2, np.int64), np.empty(1, np.int64), np.empty(0, np.int32), np.empty(0, np.int32))
    calls: list[str] = []

    def fails_once(word: str) -> str | None:
        calls.append(word)
        if len(calls) == 2:
            raise RuntimeError("stemmer down")
        return _word_token(word)

    flaky = _tokenize.TermCounter(fails_once)
    with pytest.raises(RuntimeError, match="stemmer down"):
        flaky.add_file(b"alpha beta gamma", [(0, 16)], b"", [b""], 1, 2, 3)
    flaky.add_file(b"alpha beta beta", [(0, 15)], b"", [b""], 1, 2, 3)  # the half-counted document is forgotten
    assert flaky.sizes()[:2] == (1, 2)
    with pytest.raises(TypeError, match="tuples"):
        counter.add_file(b"abc", [[0, 3]], b"p", [b""], 1, 2, 3)
    reentrant = _tokenize.TermCounter(lambda word: reentrant.add_file(b"x", [(0, 1)], b"", [b""], 1, 2, 3))
    with pytest.raises(RuntimeError, match="busy"):
        reentrant.add_file(b"some words", [(0, 10)], b"", [b""], 1, 2, 3)
    rows = cols = np.zeros(1, np.int32)
    out = (np.empty(2, np.int64), np.empty(1, np.int32), np.empty(1, np.float32))
    with pytest.raises(ValueError, match="cols"):
        _tokenize.csc(rows, cols + 5, np.zeros(1, np.float32), 1, *out)
