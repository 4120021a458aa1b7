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
    def sizes(self) -> tuple[int, int, int]: ...
    def tokens(self) -> list[str]: ...
    def export(self, doc_len: Buffer, doc_pairs: Buffer, terms: Buffer, counts: Buffer, /) -> None: ...

def csc(
    rows: Buffer, cols: Buffer, data: Buffer, n_cols: int, indptr: Buffer, indices: Buffer, out_data: Buffer, /
) -> None: ...
def chunk_bytes(data: Buffer, spans: Sequence[tuple[int, int]], /) -> list[tuple[int, int]]: ...
