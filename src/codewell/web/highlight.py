"""Syntax highlighting with Pygments, one HTML fragment per source line.

Pygments' own HTML formatter wraps tokens that span lines (docstrings, block comments) in one `<span>`, so its
output cannot be cut into lines for anchors and line highlighting. Here each token is split at newlines and every
piece gets its own `<span>`: every line's fragment is balanced HTML, and every piece of text is escaped.
"""

from __future__ import annotations

import functools

from markupsafe import Markup, escape
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_for_filename
from pygments.lexers.special import TextLexer
from pygments.token import STANDARD_TYPES, _TokenType
from pygments.util import ClassNotFound

# Pygments class names are scoped under this class so that they cannot clash with the page's own classes.
SCOPE = "hl"
# Highlighting is for reading; past this size a file is shown as plain escaped text (lexing is the slow part).
MAX_HIGHLIGHT_CHARS = 512 * 1024


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


def highlight_lines(path: str, lines: list[str]) -> list[Markup]:
    """One escaped, highlighted HTML fragment per line of `lines` (the file's text split at newlines)."""
    return list(_highlighted(path, "\n".join(lines), len(lines)))


# Lexing costs ~0.2-0.5 ms per line on a busy machine (seconds for a 5,000-line file); the same file is often
# opened again (each search result, each line link). Keyed by content, so a hit never crosses permissions: the
# caller has read the file already. Files are at most ~128 KB of text (read_file's cut), so 32 entries stay small.
@functools.lru_cache(maxsize=32)
def _highlighted(path: str, text: str, count: int) -> tuple[Markup, ...]:
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
    # The lexer may add or drop a trailing newline: one fragment per input line, whatever it did.
    out = out[:count]
    out.extend(Markup("") for _ in range(count - len(out)))
    return tuple(out)


@functools.cache
def stylesheet() -> str:
    """The CSS of the token classes, light and dark (the page follows the system's colour scheme)."""
    # types-Pygments leaves get_style_defs unannotated; it returns the CSS text.
    light = HtmlFormatter(style="default").get_style_defs(f".{SCOPE}")  # type: ignore[no-untyped-call]
    dark = HtmlFormatter(style="monokai").get_style_defs(f".{SCOPE}")  # type: ignore[no-untyped-call]
    return f"{light}\n@media (prefers-color-scheme: dark) {{\n{dark}\n}}"
