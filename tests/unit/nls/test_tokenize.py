"""The native chunker and term counter (nls/_tokenize.c) against the Python code they replace in the build.

Both must give the same chunks (lines, byte ranges, symbol names) and the same terms with the same counts for
any text, and `build` must write the same index (every score bit for bit) whichever path runs; the Python path
is what runs when the extension is not built.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codewell.nls import _tokenize, native
from codewell.nls.index import (
    COMMENT_BOOST,
    PATH_BOOST,
    SMALL_FILE_LINES,
    SYMBOL_BOOST,
    WINDOW,
    Chunk,
    SourceFile,
    _chunk_bytes,
    _word_token,
    build,
    chunk_file,
    chunk_tokens,
    load,
    source_lines,
)

WEIGHTS = (COMMENT_BOOST, PATH_BOOST, SYMBOL_BOOST)
Span = tuple[int, int, str]
ChunkOut = tuple[int, int, int, int, tuple[str, ...]]


def python_counts(data: bytes, path: str, symbols: tuple[str, ...]) -> Counter[str]:
    lines = source_lines(data)
    tokens = chunk_tokens(Chunk(path, 1, len(lines), symbols), lines)
    return Counter() if tokens == ["\x00empty"] else Counter(tokens)


def native_counts(docs: list[tuple[bytes, str, tuple[str, ...]]]) -> list[Counter[str]]:
    counter = _tokenize.TermCounter(_word_token)
    for data, path, symbols in docs:
        counter.add_file(data, [(0, len(data))], path.encode(), [" ".join(symbols).encode()], *WEIGHTS)
    n_docs, n_pairs, *_ = counter.sizes()
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


def test_counts_past_8_bits_match_python() -> None:
    # The counter keeps a pair's count in 8 bits and a bigger one aside (build memory): counts at and around the
    # limit (255), a document with several wide ones between narrow ones, and counts past 16 bits, in several
    # documents, read back exactly, by export() and in the BM25 scores.
    docs = [
        (b"slab " * 254 + b"page " * 3, "a.c", ()),
        (b"slab " * 255 + b"zone", "b.c", ()),
        (b"page " * 256 + b"zone " * 2 + b"slab " * 300 + b"list " * 255, "c.c", ("zone",)),
        (b"slab zone", "d.c", ()),
        (b"page " * 70000 + b"slab " * 131072, "e.c", ("zone",)),
        (b"slab " * 65535 + b"zone", "f.c", ()),
    ]
    assert native_counts(docs) == [python_counts(*doc) for doc in docs]


def test_wide_counts_give_the_python_scores(tmp_path: Path) -> None:
    # Counts below, at and past the 8-bit limit (255) and the old 16-bit one.
    counts = (3, 254, 255, 256, 65535, 90000)
    files = [SourceFile(f"f{i}.c", "a" * 40, b"slab " * n + b"zone\n", []) for i, n in enumerate(counts)]
    try:
        native.ENABLED = False
        build(tmp_path / "python", iter(files))
    finally:
        native.ENABLED = True
    build(tmp_path / "native", iter(files))
    assert _model_triples(tmp_path / "python") == _model_triples(tmp_path / "native")


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


def python_chunks(data: bytes, spans: list[Span]) -> list[ChunkOut]:
    """index.py's chunking of a file: chunk_file over its decoded lines, then each chunk's byte range."""
    chunks = chunk_file("p", source_lines(data), spans)
    ranges = _chunk_bytes(data, [(c.start, c.end) for c in chunks]) if chunks else []
    return [(c.start, c.end, a, b, c.symbols) for c, (a, b) in zip(chunks, ranges, strict=True)]


def native_chunks(data: bytes | memoryview, spans: list[Span]) -> list[ChunkOut]:
    out: list[ChunkOut] = []
    for first, last, start, end, span in native.chunk_file(data, spans):
        names = () if span == -1 else (spans[span][2],) if span >= 0 else tuple(name for *_, name in spans)
        out.append((first, last, start, end, names))
    return out


def test_the_c_chunker_uses_index_py_constants() -> None:
    assert (_tokenize.WINDOW, _tokenize.SMALL_FILE_LINES) == (WINDOW, SMALL_FILE_LINES)


# Lines that matter to chunking: blank by str.strip() (Unicode spaces, a lone CR, a control separator), blank
# but for an invalid or a non-space multi-byte character, and text.
LINE_KINDS = [
    b"",
    b"  ",
    b"\t\r",
    b"\r",
    b"\xc2\xa0",
    b"\xe3\x80\x80 ",
    b"\x1c",
    b"\x0b\x0c",
    b"x = 1",
    b"\xff",
    b" \xe2\x80",
]
LINE_KINDS += [b"\xc3\xa9", b"\xe2\x80\x8b", b"\xef\xbb\xbf", b"  }\r"]  # é, zero-width space, BOM: not blank
NAMES = ["f", "g", "A.f", "\u03a9mega.run", "f"]


def _random_file(rng: random.Random) -> tuple[bytes, list[Span]]:
    lines = rng.choice([3, 40, 79, 80, 81, 130, 260, 400])
    # Runs of one kind of line, so that whole windows are blank sometimes.
    parts: list[bytes] = []
    while len(parts) < lines:
        kind = rng.choice(LINE_KINDS) if rng.random() < 0.5 else rng.choice(LINE_KINDS[:8])  # blank ones
        parts.extend([kind] * rng.randint(1, 60))
    data = b"\n".join(parts[:lines]) + rng.choice([b"", b"\n", b"\r\n"])
    spans: list[Span] = []
    for _ in range(rng.randint(0, 12)):
        start = rng.randint(0, lines + 3)
        end = start + rng.choice([-1, 0, 1, 5, 30, 119, 120, 121, 200, rng.randint(0, lines)])
        spans.append((start, end, rng.choice(NAMES)))
    if spans and rng.random() < 0.3:  # the same lines twice: Python orders the two by name
        start, end, _ = rng.choice(spans)
        spans.append((start, end, rng.choice(NAMES)))
    return data, spans


CHUNK_CASES: list[tuple[bytes, list[Span]]] = [
    (b"", []),
    (b"\n", [(1, 1, "f")]),
    (b"one line, no newline", []),
    (b"x\n" * 80, [(2, 5, "small"), (1, 80, "Whole")]),
    (b"x\r\n" * 81, [(2, 5, "f")]),
    # A 150-line class with members is split into them; one without members stays whole.
    (b"x\n" * 300, [(10, 160, "C"), (12, 20, "C.a"), (30, 60, "C.b"), (170, 290, "D")]),
    (b"x\n" * 300, [(10, 160, "C"), (170, 290, "D")]),
    # Blank windows (Unicode spaces) are skipped, a tail under WINDOW // 4 lines joins the window before it.
    (b"\xc2\xa0\n" * 100 + b"text\n" * 49, []),
    (b"\n".join([b"x"] * 91), [(50, 50, "b"), (50, 50, "a"), (50, 50, "a")]),
    (b"x\n" * 100 + b"\xff\xfe", [(95, 101, "past the end"), (3, 2, "empty")]),
]


@pytest.mark.parametrize(("data", "spans"), CHUNK_CASES)
def test_c_chunks_are_index_py_chunks(data: bytes, spans: list[Span]) -> None:
    assert native_chunks(data, spans) == python_chunks(data, spans)
    assert native_chunks(memoryview(data), spans) == python_chunks(data, spans)


def test_c_chunks_of_random_files_are_index_py_chunks() -> None:
    rng = random.Random(17)
    for _ in range(1500):
        data, spans = _random_file(rng)
        assert native_chunks(data, spans) == python_chunks(data, spans), (data[:200], spans)


def test_c_chunker_refuses_bad_spans() -> None:
    data = b"x\n" * 100
    with pytest.raises(TypeError, match="tuples"):
        native.chunk_file(data, [(1, 2)])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="tuples"):
        native.chunk_file(data, [[1, 2, "f"]])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="not a range"):  # Python would make a chunk of bytes from nowhere
        native.chunk_file(data, [(10, 5, "f")])
    assert native.chunk_file(b"x\n" * 10, [(10, 5, "f")]) == [(1, 10, 0, 20, -2)]  # small file: spans unused


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
        spans = [(3, 4, "Client.handler_1"), (1, 2, "handler_0")] if path.endswith(".py") else []
        # Bytes as read from git, or a view of search's shard.
        yield SourceFile(path, "a" * 40, memoryview(data) if "ü" in path else data, spans)
    yield SourceFile("tiny.py", "b" * 40, b"def only():  # one\n    pass\n", [(1, 2, "only"), (1, 1, "Only.x")])
    yield SourceFile("skipped/empty.c", "c" * 40, b"", [])
    yield SourceFile("skipped/binary.bin", "d" * 40, b"text\x00more", [])
    yield SourceFile("skipped/large.txt", "e" * 40, b"word " * (1 << 18) + b"!", [])


def _model_triples(folder: Path) -> dict[tuple[str, int], float]:
    index = load(folder)
    assert index is not None
    model = index.model
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
    assert (python.paths, python.blobs, python.symbols) == (fast.paths, fast.blobs, fast.symbols)
    assert "skipped/binary.bin" not in fast.paths
    assert "skipped/large.txt" not in fast.paths
    assert "skipped/empty.c" not in fast.paths
    assert fast.table.dtype == np.int32
    assert fast.model.scores["indptr"].dtype == np.int32  # bm25s writes int64: nls narrows it (format 5)
    assert python.model.scores["indptr"].dtype == np.int32
    for model in (tmp_path / "python" / "bm25", tmp_path / "native" / "bm25"):  # the vocabulary deflated
        assert not (model / "vocab.index.json").exists()
        assert (model / "vocab.index.json.z").exists()
    for name in ("chunks.npy", "files.json"):
        assert (tmp_path / "python" / name).read_bytes() == (tmp_path / "native" / name).read_bytes()
    for question in (["retri"], ["http", "request"], ["slab", "foobar"], ["\x00empty"]):
        assert np.array_equal(python.scores(question), fast.scores(question))


def test_add_source_rows_and_names() -> None:
    counter = _tokenize.TermCounter(_word_token)
    assert counter.add_source(b"", [(1, 1, "f")], b"path_words/here.c", 7, 0, *WEIGHTS) == (b"", [])
    assert counter.sizes() == (0, 0, 0, 0)  # a file without lines: not even its path is looked at
    data = b"int a;\n" * 50 + b"static void tidy_up(void)\n{\n}\n" + b"int b;\n" * 60
    spans = [(51, 53, "tidy_up"), (1, 1, "Outer.a")]
    raw, named = counter.add_source(memoryview(data), spans, b"mm/slab.c", 7, 100, *WEIGHTS)
    rows = np.frombuffer(raw, dtype=np.int64).reshape(-1, 5)
    expected = python_chunks(data, spans)
    assert rows.tolist() == [[7, first, last, start, end] for first, last, start, end, _ in expected]
    assert named == [(100 + k, names) for k, (*_, names) in enumerate(expected) if names]
    assert ("tidy_up",) in [names for _, names in named]
    assert counter.sizes()[0] == len(expected)


def test_vocab_json_is_every_term_by_id() -> None:
    # Terms as word_token returns them: any str (quotes, backslashes, control and non-ASCII characters).
    odd = {"quote": 'say "hi"', "slash": "back\\slash", "ctrl": "tab\there\x00nul", "accent": "caf\u00e9"}
    counter = _tokenize.TermCounter(lambda word: odd.get(word, word))
    counter.add_file(b"quote slash ctrl_accent plain", [(0, 29)], b"", [b""], 1, 2, 3)
    before = counter.tokens()
    raw, ids = counter.vocab_json(["\x00empty", "plain", ""])
    assert ids == [len(before), before.index("plain"), len(before) + 1]
    assert json.loads(raw) == {token: i for i, token in enumerate([*before, "\x00empty", ""])}
    assert counter.sizes()[3] == len(before) + 2
    assert _tokenize.TermCounter(_word_token).vocab_json([]) == (b"{}", [])


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
    calls.clear()
    big = b"first_chunk words\n" * 100 + b"gamma delta\n"  # the failing word is in the second window's chunk
    with pytest.raises(RuntimeError, match="stemmer down"):
        flaky.add_source(big, [], b"", 1, 1, 1, 2, 3)
    assert flaky.sizes()[:2] == (1, 2)  # no chunk of the failed file stays counted
    with pytest.raises(TypeError, match="tuples"):
        counter.add_file(b"abc", [[0, 3]], b"p", [b""], 1, 2, 3)
    reentrant = _tokenize.TermCounter(lambda word: reentrant.add_file(b"x", [(0, 1)], b"", [b""], 1, 2, 3))
    with pytest.raises(RuntimeError, match="busy"):
        reentrant.add_file(b"some words", [(0, 10)], b"", [b""], 1, 2, 3)
    with pytest.raises(RuntimeError, match="busy"):
        reentrant.add_source(b"some words", [], b"", 0, 0, 1, 2, 3)
    matrix = _tokenize.TermCounter(_word_token)
    matrix.add_file(b"alpha beta", [(0, 10), (0, 0)], b"", [b"", b""], 1, 2, 3)  # the second has no terms
    norm, idf = np.ones(2, np.float64), np.ones(2, np.float32)
    out = (np.empty(3, np.int64), np.empty(3, np.int32), np.empty(3, np.float32))
    with pytest.raises(ValueError, match="empty_term"):
        matrix.frequencies(np.empty(2, np.int64), -1)
    with pytest.raises(ValueError, match="empty_term"):
        matrix.bm25(-1, norm, idf, *out)
    with pytest.raises(ValueError, match="idf: shorter"):
        matrix.bm25(0, norm, idf[:1], np.empty(2, np.int64), *out[1:])
    with pytest.raises(ValueError, match="indices: expected 12 bytes"):
        matrix.bm25(0, norm, idf, out[0], np.empty(2, np.int32), out[2])
    matrix.bm25(1, norm, idf, *out)  # the failed calls changed nothing
    assert out[0].tolist() == [0, 1, 3]
    assert out[1].tolist() == [0, 0, 1]
    assert matrix.sizes()[:2] == (0, 0)  # moved out


def test_sealed_counter_keeps_its_documents_and_takes_no_more() -> None:
    # seal() frees the identifier, word and term tables before the score matrix is built; what bm25 needs stays.
    data = b"int tidy_up(struct slab *s)\n{\n\treturn slab_free(s);\n}\n"
    counter = _tokenize.TermCounter(_word_token)
    counter.add_source(data, [(1, 4, "tidy_up")], b"mm/slab.c", 0, 0, *WEIGHTS)
    docs, pairs, _, terms_before = counter.sizes()
    tokens = counter.tokens()
    # finish_counting() frees the identifier and word tables first: the terms stay for the vocabulary.
    counter.finish_counting()
    with pytest.raises(RuntimeError, match="after finish_counting"):
        counter.add_source(data, [], b"mm/other.c", 1, 1, *WEIGHTS)
    assert counter.tokens() == tokens
    vocab, _ = counter.vocab_json([""])
    counter.seal()
    assert counter.sizes()[:2] == (docs, pairs)
    assert counter.sizes()[3] == terms_before + 1  # the "" token vocab_json added
    assert "tidy_up" in json.loads(vocab)
    with pytest.raises(RuntimeError, match="or seal"):
        counter.add_source(data, [], b"mm/other.c", 1, 1, *WEIGHTS)
    with pytest.raises(RuntimeError, match="or seal"):
        counter.add_file(data, [(0, len(data))], b"mm/other.c", [b""], *WEIGHTS)
    with pytest.raises(RuntimeError, match="after seal"):
        counter.vocab_json([""])
    with pytest.raises(RuntimeError, match="after seal"):
        counter.tokens()
    df = np.empty(counter.sizes()[3], dtype=np.int64)
    counter.frequencies(df, -1)
    assert int(df.sum()) == pairs
