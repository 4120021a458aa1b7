"""Syntax highlighting, one HTML fragment per source line, cached in memory and on disk by content.

Two highlighters give the same classes (Pygments' short ones, scoped under `.hl`):
- tree-sitter (web/highlight_ts.py) for the languages it has a grammar and a query for (C, C++, Python, Go, Rust,
  JavaScript, TypeScript, Java): ~7x less CPU than Pygments on 5,000-line C and Python files;
- Pygments for every other file. Its own HTML formatter wraps tokens that span lines (docstrings, block comments)
  in one `<span>`, so its output cannot be cut into lines for anchors and line highlighting. Here each token is
  split at newlines and every piece gets its own `<span>`: every line's fragment is balanced HTML, and every
  piece of text is escaped.

Highlighted files are kept in a bounded in-memory LRU and in a bounded directory of the data dir
(`web/highlight/`), keyed by a hash of the highlighter version, the file's name (it picks the language) and its
text: the same key as a blob id, computed from the text the caller has already been allowed to read, so an entry
never crosses permissions, and it survives a restart and serves every user.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
import tempfile
import threading
import time
import zlib
from pathlib import Path

import pygments
from markupsafe import Markup, escape
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_for_filename
from pygments.lexers.special import TextLexer
from pygments.token import STANDARD_TYPES, _TokenType
from pygments.util import ClassNotFound

from codewell.runtime import Runtime
from codewell.web import highlight_ts

__all__ = ["MAX_HIGHLIGHT_CHARS", "SCOPE", "HighlightStore", "highlight_lines", "plain_lines", "stylesheet"]

# Pygments class names are scoped under this class so that they cannot clash with the page's own classes.
SCOPE = "hl"
# Highlighting is for reading; past this size a file is shown as plain escaped text (lexing is the slow part).
MAX_HIGHLIGHT_CHARS = 512 * 1024
# Part of every cache key: a new highlighter, Pygments or grammar release never serves an old entry.
VERSION = (
    f"1/{highlight_ts.VERSION}/pygments-{pygments.__version__}"
    f"/ts-pack-{importlib.metadata.version('tree-sitter-language-pack')}"
)
# The on-disk cache's bound: past it, the least recently used entries go (a 5,000-line file is ~60 KB stored).
MAX_STORE_BYTES = 256 * 1024 * 1024
# After an eviction the store is brought down to this share of its bound, so evictions stay rare.
_EVICT_TO = 0.75
_SUFFIX = ".hl"


def _lexer(path: str, text: str) -> Lexer:
    if len(text) > MAX_HIGHLIGHT_CHARS:
        return TextLexer()
    try:
        return get_lexer_for_filename(path, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return TextLexer(stripnl=False, ensurenl=False)


def _css_class(ttype: _TokenType) -> str:
    """The short Pygments class of a token type (its nearest standard parent's)."""
    current: _TokenType | None = ttype
    while current is not None and current not in STANDARD_TYPES:
        current = current.parent
    return STANDARD_TYPES.get(current, "") if current is not None else ""


class HighlightStore:
    """Highlighted files on disk, one compressed file per key, written atomically (a temporary file renamed into
    place), bounded by MAX_STORE_BYTES with least-recently-used eviction (a hit refreshes the entry's mtime).
    Several processes may share the directory: each write is atomic, and each process enforces the bound on the
    size it counted at its first write plus its own writes since (so the bound holds per process)."""

    def __init__(self, directory: Path, max_bytes: int = MAX_STORE_BYTES) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._bytes: int | None = None  # the directory's size, counted at the first write

    @classmethod
    def create(cls, runtime: Runtime) -> HighlightStore:
        return cls(runtime.settings.data_dir / "web" / "highlight")

    def _path(self, key: str) -> Path:
        return self.directory / f"{key}{_SUFFIX}"

    def get(self, key: str, count: int) -> tuple[Markup, ...] | None:
        """The fragments stored under `key`, or None (missing, unreadable, or not `count` lines)."""
        path = self._path(key)
        try:
            lines = zlib.decompress(path.read_bytes()).decode("utf-8").split("\n")
            _touch(path)  # recently used: evicted last
        except FileNotFoundError:
            return None
        except (OSError, zlib.error, UnicodeDecodeError):
            path.unlink(missing_ok=True)  # a damaged entry is highlighted again
            return None
        if len(lines) != count:
            return None
        return tuple(Markup(line) for line in lines)

    def put(self, key: str, fragments: tuple[Markup, ...]) -> None:
        # Fragments never hold a newline (highlighting splits at them), so one joined string keeps the lines.
        data = zlib.compress("\n".join(fragments).encode("utf-8"), 1)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")
        except OSError:
            return  # a cache that cannot write only costs the next view its highlighting
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.replace(temporary, self._path(key))
            _touch(self._path(key))
        except OSError:
            Path(temporary).unlink(missing_ok=True)
            return
        with self._lock:
            try:
                if self._bytes is None:
                    self._bytes = self._size()
                else:
                    self._bytes += len(data)
                if self._bytes > self.max_bytes:
                    self._bytes = self._evict()
            except OSError:
                self._bytes = None  # counted again at the next write

    def _entries(self) -> list[tuple[int, int, Path]]:
        found = []
        for entry in os.scandir(self.directory):
            if entry.name.endswith(_SUFFIX):
                try:
                    stat = entry.stat()
                except FileNotFoundError:
                    continue  # evicted by another process meanwhile
                found.append((stat.st_mtime_ns, stat.st_size, Path(entry.path)))
        return found

    def _size(self) -> int:
        return sum(size for _, size, _ in self._entries())

    def _evict(self) -> int:
        """Remove the least recently used entries down to _EVICT_TO of the bound; the size left."""
        entries = sorted(self._entries())
        total = sum(size for _, size, _ in entries)
        for _, size, path in entries:
            if total <= self.max_bytes * _EVICT_TO:
                break
            path.unlink(missing_ok=True)
            total -= size
        return total


def _touch(path: Path) -> None:
    # An explicit time: the file system's own stamps are coarse (a few ms), too coarse to order recent uses.
    now = time.time_ns()
    os.utime(path, ns=(now, now))


def _key(path: str, text: str) -> str:
    name = path.rsplit("/", 1)[-1]  # the language depends on the file's name only, not on its directory
    digest = hashlib.sha256(f"{VERSION}\0{name}\0".encode())
    digest.update(text.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def highlight_lines(path: str, lines: list[str], store: HighlightStore | None = None) -> list[Markup]:
    """One escaped, highlighted HTML fragment per line of `lines` (the file's text split at newlines), from the
    caches when this text was highlighted before (in this process, or in any with the same `store`)."""
    return list(_highlighted(store, path, "\n".join(lines), len(lines)))


def plain_lines(lines: list[str]) -> list[Markup]:
    """`lines` escaped, without highlighting or caching: for files over MAX_HIGHLIGHT_CHARS, whose view shows one
    page of lines at a time, so only that page is escaped."""
    return [escape(line) for line in lines]


# The first layer: the same file is often opened again (each search result, each line link). Keyed by content
# (and the store), so a hit never crosses permissions: the caller has read the file already. The file view calls
# it only for files up to MAX_HIGHLIGHT_CHARS (512 KB, ~2 MB of fragments): 32 entries stay under ~80 MB.
@functools.lru_cache(maxsize=32)
def _highlighted(store: HighlightStore | None, path: str, text: str, count: int) -> tuple[Markup, ...]:
    key = _key(path, text) if store is not None else ""
    if store is not None:
        stored = store.get(key, count)
        if stored is not None:
            return stored
    fragments = _render(path, text, count)
    if store is not None:
        store.put(key, fragments)
    return fragments


def _render(path: str, text: str, count: int) -> tuple[Markup, ...]:
    language = highlight_ts.grammar_for(path) if len(text) <= MAX_HIGHLIGHT_CHARS else None
    html = highlight_ts.highlight_html(language, text) if language is not None else None
    out = [Markup(line) for line in html.split("\n")] if html is not None else _pygments(path, text)
    # The lexer may add or drop a trailing newline: one fragment per input line, whatever it did.
    out = out[:count]
    out.extend(Markup("") for _ in range(count - len(out)))
    return tuple(out)


def _pygments(path: str, text: str) -> list[Markup]:
    out: list[Markup] = []
    current: list[str] = []
    for ttype, value in _lexer(path, text).get_tokens(text):
        css = _css_class(ttype)
        pieces = value.split("\n")
        for index, piece in enumerate(pieces):
            if index:
                out.append(Markup("".join(current)))
                current = []
            if piece:
                current.append(f'<span class="{css}">{escape(piece)}</span>' if css else str(escape(piece)))
    out.append(Markup("".join(current)))
    return out


@functools.cache
def stylesheet() -> str:
    """The CSS of the token classes, light and dark (the page follows the system's colour scheme)."""
    # types-Pygments leaves get_style_defs unannotated; it returns the CSS text.
    light = HtmlFormatter(style="default").get_style_defs(f".{SCOPE}")  # type: ignore[no-untyped-call]
    dark = HtmlFormatter(style="monokai").get_style_defs(f".{SCOPE}")  # type: ignore[no-untyped-call]
    return f"{light}\n@media (prefers-color-scheme: dark) {{\n{dark}\n}}"
