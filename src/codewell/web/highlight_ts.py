"""Syntax highlighting from a tree-sitter parse: the file view's fast path (docs/web.md, Performance).

Pygments lexes a 5,000-line C file in 200-500 ms of CPU (seconds of wall time on a busy machine); this highlighter
takes ~45 ms, half of it tree-sitter's parse. The parse only supplies what needs context: comments, strings and
characters, preprocessor directives, function (and class) names at their definitions. A small query per language
captures those, named after the Pygments class they get. The text between captures is escaped once, then one
regular expression marks words (keywords from a per-language table, everything else a name), numbers and member
access (`.`, `->`, `::`).

The output uses Pygments' short classes (`k`, `kt`, `n`, `nf`, `c`, `s`, ...), so the stylesheet, dark mode and
the file view's identifier links (navigation.py reads `<span class="n...">name</span>` and the `.`/`->` before
it) work unchanged. Every piece of text is escaped; a token that spans lines is closed at each newline and opened
again after it, so each line's fragment is balanced HTML. Languages without an entry here use Pygments.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from markupsafe import escape
from tree_sitter import Language, Parser, Query, QueryCursor
from tree_sitter_language_pack import get_language

__all__ = ["VERSION", "grammar_for", "highlight_html"]

# Part of the highlight cache's key: bump when the output for the same input changes.
VERSION = "ts1"

_C_KEYWORDS = (
    "auto break case const continue default do else enum extern for goto if inline register restrict return "
    "sizeof static struct switch typedef union volatile while asm typeof __attribute__ __asm__ __inline__ "
    "__volatile__ __extension__ __restrict__ _Alignas _Alignof _Atomic _Generic _Noreturn _Static_assert "
    "_Thread_local alignas alignof static_assert thread_local constexpr"
)
_C_TYPES = (
    "char double float int long short signed unsigned void bool _Bool _Complex size_t ssize_t ptrdiff_t "
    "int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t intptr_t uintptr_t wchar_t FILE "
    "u8 u16 u32 u64 s8 s16 s32 s64 __u8 __u16 __u32 __u64 __s8 __s16 __s32 __s64 __le16 __le32 __le64 "
    "__be16 __be32 __be64 loff_t off_t dma_addr_t phys_addr_t gfp_t"
)
_C_CONSTANTS = "NULL true false nullptr"
_CPP_KEYWORDS = (
    f"{_C_KEYWORDS} catch class co_await co_return co_yield concept consteval constinit decltype delete "
    "explicit export final friend mutable namespace new noexcept operator override private protected public "
    "requires template this throw try typename using virtual and or not xor and_eq or_eq not_eq bitand bitor "
    "compl xor_eq static_cast dynamic_cast reinterpret_cast const_cast"
)
_PY_KEYWORDS = (
    "assert async await break class continue def del elif else except finally for from global if import "
    "lambda nonlocal pass raise return try while with yield as"
)
_PY_WORDS = "and in is not or"
_PY_CONSTANTS = "True False None"
_PY_BUILTINS = (
    "abs all any bin bool bytearray bytes callable chr classmethod dict dir divmod enumerate filter float "
    "format frozenset getattr hasattr hash hex id input int isinstance issubclass iter len list map max min "
    "next object open ord pow print property range repr reversed round set setattr slice sorted staticmethod "
    "str sum super tuple type vars zip"
)
_GO_KEYWORDS = (
    "break case chan const continue default defer else fallthrough for func go goto if import interface map "
    "package range return select struct switch type var"
)
_GO_TYPES = (
    "bool byte complex64 complex128 error float32 float64 int int8 int16 int32 int64 rune string uint uint8 "
    "uint16 uint32 uint64 uintptr any"
)
_RUST_KEYWORDS = (
    "as async await break const continue crate dyn else enum extern fn for if impl in let loop match mod move "
    "mut pub ref return static struct super trait type union unsafe use where while yield"
)
_RUST_TYPES = "bool char f32 f64 i8 i16 i32 i64 i128 isize str u8 u16 u32 u64 u128 usize Self"
_JS_KEYWORDS = (
    "async await break case catch class const continue debugger default delete do else export extends "
    "finally for function if import in instanceof let new return static super switch throw try typeof var "
    "void while with yield of"
)
_JS_CONSTANTS = "true false null undefined this NaN Infinity"
_TS_KEYWORDS = (
    f"{_JS_KEYWORDS} abstract as declare enum implements interface keyof namespace private protected public "
    "readonly satisfies type"
)
_TS_TYPES = "any boolean never number object string symbol unknown bigint"
_JAVA_KEYWORDS = (
    "abstract assert break case catch class continue default do else enum extends final finally for if "
    "implements import instanceof interface native new package private protected public return static "
    "strictfp super switch synchronized this throw throws transient try volatile while var record yield"
)
_JAVA_TYPES = "boolean byte char double float int long short void"
_JAVA_CONSTANTS = "true false null"

_C_QUERY = """
(comment) @c
(string_literal) @s
(concatenated_string (string_literal) @s)
(char_literal) @sc
(system_lib_string) @cpf
(preproc_include path: (string_literal) @cpf)
(preproc_directive) @cp
["#include" "#define" "#if" "#ifdef" "#ifndef" "#else" "#elif" "#endif"] @cp
(function_declarator declarator: (identifier) @nf)
"""
_CPP_QUERY = f"""{_C_QUERY}
(raw_string_literal) @s
(function_declarator declarator: (field_identifier) @nf)
(class_specifier name: (type_identifier) @nc)
"""
_PY_QUERY = """
(comment) @c
(string) @s
(function_definition name: (identifier) @nf)
(class_definition name: (identifier) @nc)
"""
_GO_QUERY = """
(comment) @c
(interpreted_string_literal) @s
(raw_string_literal) @s
(rune_literal) @sc
(function_declaration name: (identifier) @nf)
(method_declaration name: (field_identifier) @nf)
"""
_RUST_QUERY = """
(line_comment) @c
(block_comment) @c
(string_literal) @s
(raw_string_literal) @s
(char_literal) @sc
(function_item name: (identifier) @nf)
"""
_JS_COMMON_QUERY = """
(comment) @c
(string) @s
(template_string) @s
(regex) @sr
(function_declaration name: (identifier) @nf)
(method_definition name: (property_identifier) @nf)
"""
# TypeScript's grammar names a class with a type_identifier, JavaScript's with an identifier.
_JS_QUERY = _JS_COMMON_QUERY + "(class_declaration name: (identifier) @nc)\n"
_TS_QUERY = _JS_COMMON_QUERY + "(class_declaration name: (type_identifier) @nc)\n"
_JAVA_QUERY = """
(line_comment) @c
(block_comment) @c
(string_literal) @s
(character_literal) @sc
(method_declaration name: (identifier) @nf)
(class_declaration name: (identifier) @nc)
"""


@dataclass(frozen=True)
class _Spec:
    grammar: str  # tree-sitter-language-pack's name
    query: str
    words: tuple[tuple[str, str], ...]  # (Pygments class, space-separated words)


_SPECS = {
    "c": _Spec("c", _C_QUERY, (("k", _C_KEYWORDS), ("kt", _C_TYPES), ("kc", _C_CONSTANTS))),
    "cpp": _Spec("cpp", _CPP_QUERY, (("k", _CPP_KEYWORDS), ("kt", _C_TYPES), ("kc", _C_CONSTANTS))),
    "python": _Spec(
        "python",
        _PY_QUERY,
        (("k", _PY_KEYWORDS), ("ow", _PY_WORDS), ("kc", _PY_CONSTANTS), ("nb", _PY_BUILTINS), ("bp", "self cls")),
    ),
    "go": _Spec("go", _GO_QUERY, (("k", _GO_KEYWORDS), ("kt", _GO_TYPES), ("kc", "true false nil iota"))),
    "rust": _Spec("rust", _RUST_QUERY, (("k", _RUST_KEYWORDS), ("kt", _RUST_TYPES), ("kc", "true false self"))),
    "javascript": _Spec("javascript", _JS_QUERY, (("k", _JS_KEYWORDS), ("kc", _JS_CONSTANTS))),
    "typescript": _Spec("typescript", _TS_QUERY, (("k", _TS_KEYWORDS), ("kt", _TS_TYPES), ("kc", _JS_CONSTANTS))),
    "tsx": _Spec("tsx", _TS_QUERY, (("k", _TS_KEYWORDS), ("kt", _TS_TYPES), ("kc", _JS_CONSTANTS))),
    "java": _Spec("java", _JAVA_QUERY, (("k", _JAVA_KEYWORDS), ("kt", _JAVA_TYPES), ("kc", _JAVA_CONSTANTS))),
}
_EXTENSIONS = {
    "c": "c",
    "h": "c",
    "cc": "cpp",
    "cpp": "cpp",
    "cxx": "cpp",
    "hh": "cpp",
    "hpp": "cpp",
    "hxx": "cpp",
    "py": "python",
    "pyi": "python",
    "go": "go",
    "rs": "rust",
    "js": "javascript",
    "mjs": "javascript",
    "cjs": "javascript",
    "jsx": "javascript",
    "ts": "typescript",
    "mts": "typescript",
    "cts": "typescript",
    "tsx": "tsx",
    "java": "java",
}

# On the escaped text between captures: a word (not the name of an entity such as `&lt;`), a number (not the
# digits of `&#34;`), or member access (`->` is escaped). The lookbehind keeps a word's tail from matching alone.
_TOKENS = re.compile(r"(?<![\w&#$])(?:([A-Za-z_$][\w$]*)|(\d[\w.]*|\.\d\w*))|(\.|::|-&gt;)")


def grammar_for(path: str) -> str | None:
    """The tree-sitter highlighter's language of `path` (by its extension), None when Pygments handles it."""
    name = path.rsplit("/", 1)[-1]
    if "." not in name:
        return None
    return _EXTENSIONS.get(name.rsplit(".", 1)[-1].lower())


class _Highlighter:
    """One language's parser, query and word classes (built once; a Parser is not thread-safe, so each call
    gets its own)."""

    def __init__(self, spec: _Spec) -> None:
        self.language: Language = get_language(spec.grammar)  # type: ignore[arg-type]
        self.query = Query(self.language, spec.query)
        self.classes = {word: css for css, words in spec.words for word in words.split()}

    def ranges(self, data: bytes) -> list[tuple[int, int, str]]:
        """(start byte, end byte, class) of the captures, sorted, without overlaps (the outer one wins)."""
        tree = Parser(self.language).parse(data)
        found: list[tuple[int, int, str]] = []
        for css, nodes in QueryCursor(self.query).captures(tree.root_node).items():
            found.extend((node.start_byte, node.end_byte, css) for node in nodes)
        found.sort(key=lambda r: (r[0], -r[1]))
        kept: list[tuple[int, int, str]] = []
        end = 0
        for start, stop, css in found:
            if start >= end and stop > start:
                kept.append((start, stop, css))
                end = stop
        return kept


@functools.cache
def _highlighter(language: str) -> _Highlighter:
    return _Highlighter(_SPECS[language])


def _span(css: str, text: str) -> str:
    escaped = str(escape(text))
    if "\n" in escaped:  # close at each newline and open again: every line's fragment stays balanced
        escaped = escaped.replace("\n", f'</span>\n<span class="{css}">')
    return f'<span class="{css}">{escaped}</span>'


def highlight_html(language: str, text: str) -> str | None:
    """`text` as escaped, highlighted HTML whose newlines are exactly the text's (split it at "\\n" for one
    fragment per line); None when the text cannot be parsed as bytes (lone surrogates): Pygments then."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        return None
    highlighter = _highlighter(language)
    classes = highlighter.classes

    def token(match: re.Match[str]) -> str:
        word, number, member = match.groups()
        if word is not None:
            return f'<span class="{classes.get(word, "n")}">{word}</span>'
        if number is not None:
            return f'<span class="m">{number}</span>'
        return f'<span class="{"p" if member == "." else "o"}">{member}</span>'

    out: list[str] = []
    at = 0
    sub = _TOKENS.sub
    try:
        for start, end, css in highlighter.ranges(data):
            if start > at:
                out.append(sub(token, str(escape(data[at:start].decode("utf-8")))))
            out.append(_span(css, data[start:end].decode("utf-8")))
            at = end
        out.append(sub(token, str(escape(data[at:].decode("utf-8")))))
    except UnicodeDecodeError:  # a capture cut inside a character (never seen; a grammar bug): Pygments then
        return None
    return "".join(out)
