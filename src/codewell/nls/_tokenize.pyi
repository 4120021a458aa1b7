"""Types of the native term counter in _tokenize.c (see that file for what it does and why)."""

from collections.abc import Callable, Sequence

from typing_extensions import Buffer

class TermCounter:
    def __init__(self, word_token: Callable[[str], str | None]) -> None: ...
    def add_file(
        self,
        data: Buffer,
        bounds: Sequence[tuple[int, int]],
        path: bytes,
        symbols: Sequence[bytes],
        comment_weight: int,
        path_weight: int,
        symbol_weight: int,
        /,
    ) -> None: ...
    def add_source(
        self,
        data: Buffer,
        spans: Sequence[tuple[int, int, str]],
        path: bytes,
        file_id: int,
        first_row: int,
        comment_weight: int,
        path_weight: int,
        symbol_weight: int,
        /,
    ) -> tuple[bytes, list[tuple[int, tuple[str, ...]]]]: ...
    def sizes(self) -> tuple[int, int, int, int]: ...
    def vocab_json(self, extra: Sequence[str], /) -> tuple[bytes, list[int]]: ...
    def tokens(self) -> list[str]: ...
    def export(self, doc_len: Buffer, doc_pairs: Buffer, terms: Buffer, counts: Buffer, /) -> None: ...
    def lengths(self, doc_len: Buffer, /) -> None: ...
    def frequencies(self, df: Buffer, empty_term: int, /) -> None: ...
    def bm25(
        self, empty_term: int, norm: Buffer, idf: Buffer, indptr: Buffer, indices: Buffer, data: Buffer, /
    ) -> None: ...
    def finish_counting(self) -> None: ...
    def seal(self) -> None: ...

def chunk_file(data: Buffer, spans: Sequence[tuple[int, int, str]], /) -> list[tuple[int, int, int, int, int]]: ...

WINDOW: int
SMALL_FILE_LINES: int
