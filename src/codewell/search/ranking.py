"""Result ordering, all its rules in this module: Zoekt-like tiers of file-level signals, then a score.

Files are ordered by these tiers, each one strictly above the next, and a score within the last:

1. the file's path matches a pattern (`FileMatch.path_match`);
2. one of its matching lines is a *definition*: a match overlaps the name that the line defines, judged by the
   revision's symbol table when a symbol source has one for the file (search/symbols.py: codenav's tree-sitter
   definitions), otherwise by the small per-language table `DEFINITIONS` below (`def foo(`, `static int foo(`,
   `func (r T) Foo(`, ...);
3. match quality (`match_quality`): 3 when a line holds the query's terms as an adjacent phrase (in query
   order, whole words, separated by at most three non-word characters: `def main`, `os.path`, `a::b`);
   2 when every term occurs as a whole word; 1 when some does; 0 when all matches are parts of longer
   words (`def` in `default`, `main` in `remaining`). A match is a whole word when no word character
   (ASCII letter, digit, `_`, or any non-ASCII byte) touches either end;
4. code before prose, when the query looks like code (`looks_like_code`: an identifier character such as
   `_ ( . :` or camelCase, or a keyword such as `def`, `func`, `class`): files whose language is not
   prose (`PROSE_LANGUAGES`: Markdown, reStructuredText, plain text, TeX, unknown) come first;
5. then `10·ln(1 + matching lines) − 0.01·len(path)`: more matching lines first, shorter paths first.

The sort is stable, so ties keep the order the searcher produced (repository name, then path).
`FileMatch.score` is set to `1000·name + 500·definition + 100·quality + 50·code + 10·ln(1 + lines) −
0.01·len(path)` for information; the tiers, not the sum, decide the order. Lines inside a file keep their
line order.

The searcher collects matching lines in index order (repository, path) and stops at `count:`; a common term
can fill that budget with prose before any code file is reached. So when a query of plain terms stops
early on the default page, the service also collects the files holding the terms as a phrase and as whole
words (`better_match_regexes`), and ranking puts them first.

Definition detection works on one line at a time with plain regexes (no parser): each form is anchored at the
start of the line (`re.match`) and has a named group `name` for the identifier being defined. A line counts as
a definition when one of its match ranges (byte offsets, as in `LineMatch.ranges`) overlaps that group, so
`frobnicate` matches `static int frobnicate(void)` but not `// calls frobnicate()` or
`return frobnicate(x);`. Comments and strings get no special handling: no form matches a line that starts with
`//`, `/*`, a `#` comment or a quote, but code inside a multi-line comment or string can still look like one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache

from codewell.search.results import FileMatch, LineMatch

__all__ = [
    "DEFINITIONS",
    "PROSE_LANGUAGES",
    "better_match_regexes",
    "definition_lines",
    "definition_spans",
    "has_definition",
    "is_definition",
    "is_whole_word",
    "looks_like_code",
    "match_quality",
    "phrase_regex",
    "rank",
    "score",
    "sort_by_rank",
    "whole_word_regex",
]

NAME_BONUS = 1000.0
DEFINITION_BONUS = 500.0
QUALITY_BONUS = 100.0
CODE_BONUS = 50.0
# Languages (index/languages.py names) of documentation and prose; "" is an unknown file type (CHANGES, README).
PROSE_LANGUAGES = frozenset({"Markdown", "reStructuredText", "Text", "TeX", ""})
# Words that make a query look like code even without punctuation (`def main`, `func New`).
_CODE_KEYWORDS = frozenset(
    {
        "def", "func", "fn", "class", "struct", "enum", "interface", "impl", "trait", "return", "import",
        "from", "const", "let", "var", "function", "static", "void", "int", "char", "public", "private",
        "package", "async", "await", "typedef", "#include", "#define", "self", "this", "nil", "null",
    }
)  # fmt: skip
_CODE_CHARS = re.compile(r"[_(){}\[\];=<>:.#*&]|[a-z][A-Z]")
# Phrase separators: at most this many non-word characters between adjacent terms.
_PHRASE_GAP = 3
# Definitions are short lines; longer ones (minified code, data tables) are not worth the regex time.
MAX_DEFINITION_LINE = 1024

# Building blocks -------------------------------------------------------------------------------------------

# Template/generic arguments, one level of nesting: `<K, V>`, `<String, List<Integer>>`. The character classes
# exclude the brackets so matching never has to guess where the arguments end.
_GENERIC = r"(?:<(?:[^<>();]|<[^<>();]*>)*>)"
# Statements that look like `word name(` but are not definitions.
_NOT_A_TYPE = r"(?!(?:return|if|else|while|for|do|switch|case|goto|sizeof|typedef|throw|delete|new|extern)\b)"
_ANNOTATION = r"@\w+(?:\([^)]*\))?\s+"

_C_TYPE_WORDS = rf"(?:[A-Za-z_][\w:]*{_GENERIC}?[\s*&]+)"
_C_FAMILY = (
    # Function definition at column 0, also the second line of `int\nfoo(...)`; prototypes and calls end in `;`.
    rf"^{_NOT_A_TYPE}{_C_TYPE_WORDS}*(?:[A-Za-z_]\w*::)*(?P<name>~?[A-Za-z_]\w*)\s*\((?!.*;\s*$)",
    # File-scope variable: `static const struct file_operations foo_fops = {`, `int foo[4];` (not `struct foo;`).
    rf"^{_NOT_A_TYPE}(?!(?:struct|union|enum|class)\s+\w+\s*;){_C_TYPE_WORDS}+(?P<name>[A-Za-z_]\w*)\s*"
    r"(?:\[[^\]]*\]\s*)*[=;]",
    r"^\s*(?:typedef\s+)?(?:template\s*<.*>\s*)?(?:struct|union|enum(?:\s+(?:class|struct))?|class|namespace)"
    r"\s+(?P<name>\w+)\s*(?:final\b\s*)?(?:[:{].*)?$",
    r"^\s*#\s*define\s+(?P<name>\w+)",
    r"^\s*typedef\b[^;(]*?\b(?P<name>\w+)\s*(?:\[[^\]]*\]\s*)*;",
    r"^\s*typedef\b.*?\(\s*\*\s*(?P<name>\w+)\s*\)\s*\(",
    # The end of `typedef struct { ... } foo_t;`.
    r"^\}\s*(?P<name>\w+)\s*(?:\[[^\]]*\]\s*)*;",
)

_PYTHON = (
    r"^\s*(?:async\s+)?def\s+(?P<name>\w+)",
    r"^\s*class\s+(?P<name>\w+)",
    r"^type\s+(?P<name>\w+)\s*(?:\[[^\]]*\])?\s*=",
    # Module-level assignment, optionally annotated: `NAME = 1`, `name: int = 1` (not `==`).
    r"^(?!(?:else|try|finally|lambda)\b)(?P<name>[A-Za-z_]\w*)\s*(?::[^=]+)?=(?!=)",
)

_GO = (
    r"^func\s*(?:\([^)]*\)\s*)?(?P<name>\w+)\s*[\[(]",
    r"^\s*type\s+(?P<name>\w+)",
    r"^(?:const|var)\s+(?P<name>\w+)",
)

_RUST_VIS = r"(?:pub(?:\s*\([^)]*\))?\s+)?"
_RUST = (
    rf'^\s*{_RUST_VIS}(?:(?:default|const|async|unsafe|extern(?:\s+"[^"]*")?)\s+)*fn\s+(?P<name>\w+)',
    rf"^\s*{_RUST_VIS}(?:(?:unsafe|auto)\s+)*(?:struct|enum|union|trait|type|mod)\s+(?P<name>\w+)",
    rf"^\s*{_RUST_VIS}(?:const|static(?:\s+mut)?)\s+(?P<name>\w+)\s*:",
    r"^\s*macro_rules!\s*(?P<name>\w+)",
)

_JAVA_MODS = (
    r"(?:(?:public|protected|private|static|final|abstract|sealed|non-sealed|strictfp|synchronized|native|default"
    rf"|transient|volatile)\s+|{_ANNOTATION})*"
)
_JAVA_TYPE = rf"[\w.$]+{_GENERIC}?(?:\[\])*"
_JAVA_NOT_A_TYPE = r"(?!(?:return|new|throw|else|case|yield|assert|await|package|import)\b)"
_JAVA = (
    rf"^\s*{_JAVA_MODS}(?:class|interface|enum|record|@interface)\s+(?P<name>\w+)",
    # Methods and constructors: `Type name(` never is a call.
    rf"^\s*{_JAVA_MODS}(?:{_GENERIC}\s+)?{_JAVA_NOT_A_TYPE}{_JAVA_TYPE}\s+(?P<name>\w+)\s*\(",
    # Fields need an access or static modifier, so local variables don't count.
    rf"^\s*{_JAVA_MODS}(?:public|protected|private|static)\s+{_JAVA_MODS}{_JAVA_TYPE}\s+(?P<name>\w+)\s*[=;]",
)

_CSHARP_MODS = (
    r"(?:(?:public|private|protected|internal|static|readonly|sealed|abstract|virtual|override|async|partial"
    r"|unsafe|extern|new|const|volatile)\s+|\[[^\]]*\]\s*)*"
)
_CSHARP_TYPE = rf"[\w.]+{_GENERIC}?(?:\[[,\s]*\])*\??"
_CSHARP_NOT_A_TYPE = r"(?!(?:return|new|throw|else|case|yield|await|using|namespace|var)\b)"
_CSHARP = (
    rf"^\s*{_CSHARP_MODS}(?:class|interface|struct|enum|record(?:\s+(?:class|struct))?|delegate\s+{_CSHARP_TYPE})"
    r"\s+(?P<name>\w+)",
    r"^\s*namespace\s+(?:[\w.]+\.)?(?P<name>\w+)",
    rf"^\s*{_CSHARP_MODS}{_CSHARP_NOT_A_TYPE}{_CSHARP_TYPE}\s+(?P<name>\w+)\s*{_GENERIC}?\s*\(",
    # Fields and properties need an access or static modifier, so local variables don't count.
    rf"^\s*{_CSHARP_MODS}(?:public|private|protected|internal|static|const)\s+{_CSHARP_MODS}{_CSHARP_TYPE}"
    r"\s+(?P<name>\w+)\s*(?:[={;]|=>)",
)

_KOTLIN_MODS = (
    r"(?:(?:public|private|protected|internal|open|override|abstract|final|sealed|data|enum|annotation|inner"
    rf"|companion|inline|suspend|tailrec|operator|infix|external|const|lateinit|value|expect|actual)\s+|{_ANNOTATION})*"
)
_KOTLIN = (
    rf"^\s*{_KOTLIN_MODS}fun\s+(?:{_GENERIC}\s*)?(?:[\w.?]+{_GENERIC}?\??\.)?(?P<name>\w+)\s*\(",
    rf"^\s*{_KOTLIN_MODS}(?:class|interface|object|typealias)\s+(?P<name>\w+)",
    rf"^\s*{_KOTLIN_MODS}(?:val|var)\s+(?:{_GENERIC}\s*)?(?:[\w.?]+\.)?(?P<name>\w+)",
)

_SCALA_MODS = (
    r"(?:(?:private|protected)(?:\[\w*\])?\s+|(?:override|final|sealed|abstract|implicit|lazy|case|inline|open"
    rf"|opaque|transparent|infix)\s+|{_ANNOTATION})*"
)
_SCALA = (rf"^\s*{_SCALA_MODS}(?:def|val|var|type|class|object|trait|enum)\s+(?P<name>\w+)",)

_SWIFT_MODS = (
    r"(?:(?:public|private|fileprivate|internal|open|static|class|final|override|mutating|nonmutating|convenience"
    rf"|required|dynamic|lazy|weak|unowned|indirect|nonisolated)(?:\([^)]*\))?\s+|{_ANNOTATION})*"
)
_SWIFT = (
    rf"^\s*{_SWIFT_MODS}(?:func|class|struct|enum|protocol|actor|typealias|associatedtype|let|var)\s+"
    r"(?P<name>\w+)",
)

_JS_EXPORT = r"(?:export\s+)?(?:declare\s+)?(?:default\s+)?"
_JS_MEMBER_MODS = r"(?:(?:static|async|get|set|public|private|protected|readonly|override|abstract)\s+)*"
_JAVASCRIPT = (
    rf"^\s*{_JS_EXPORT}(?:async\s+)?function\b\s*\*?\s*(?P<name>[\w$]+)",
    rf"^\s*{_JS_EXPORT}(?:abstract\s+)?class\s+(?P<name>[\w$]+)",
    rf"^\s*{_JS_EXPORT}(?:const|let|var)\s+(?P<name>[\w$]+)",
    # Class methods: an indented `name(...) {` (a call is never followed by a block; `f(function () {` is a call).
    rf"^\s+{_JS_MEMBER_MODS}\*?(?!(?:if|for|while|switch|catch|with|function|return)\b)(?P<name>#?[\w$]+)\s*"
    rf"{_GENERIC}?\([^()]*\)\s*(?::\s*[^={{]+)?\{{\s*$",
)
_TYPESCRIPT = (
    *_JAVASCRIPT,
    rf"^\s*{_JS_EXPORT}(?:interface|type|enum|const\s+enum|namespace|module)\s+(?P<name>[\w$]+)",
)

_RUBY = (
    r"^\s*def\s+(?:self\.|[\w:]+\.)?(?P<name>\w+[?!=]?)",
    r"^\s*(?:class|module)\s+(?:[\w:]+::)?(?P<name>\w+)",
    r"^\s*(?P<name>[A-Z]\w*)\s*=(?!=)",
)

_PHP = (
    r"^\s*(?:(?:public|private|protected|static|final|abstract|readonly)\s+)*function\s+&?\s*(?P<name>\w+)",
    r"^\s*(?:(?:final|abstract|readonly)\s+)*(?:class|interface|trait|enum)\s+(?P<name>\w+)",
    r"^\s*(?:(?:public|private|protected|final)\s+)*const\s+(?:\w+\s+)?(?P<name>\w+)\s*=",
    r"""^\s*define\(\s*['"](?P<name>\w+)['"]""",
)

_SHELL = (
    r"^\s*function\s+(?P<name>[\w.:-]+)",
    r"^\s*(?P<name>[\w.:-]+)\s*\(\s*\)",
)

_LUA = (
    r"^\s*(?:local\s+)?function\s+(?:[\w.]+[.:])?(?P<name>\w+)\s*\(",
    r"^\s*(?:local\s+)?(?:[\w.]+\.)?(?P<name>\w+)\s*=\s*function\b",
)

_PERL = (r"^\s*sub\s+(?:[\w:]+::)?(?P<name>\w+)",)

_KCONFIG = (r"^\s*(?:menu)?config\s+(?P<name>\w+)",)

# Language name (as in index/languages.py) → the forms of a definition line in that language.
DEFINITIONS: dict[str, tuple[re.Pattern[str], ...]] = {
    language: tuple(re.compile(form) for form in forms)
    for language, forms in {
        "C": _C_FAMILY,
        "C++": _C_FAMILY,  # `.h` files are "C" but often C++: one table serves both
        "Python": _PYTHON,
        "Go": _GO,
        "Rust": _RUST,
        "Java": _JAVA,
        "Kotlin": _KOTLIN,
        "C#": _CSHARP,
        "Scala": _SCALA,
        "Swift": _SWIFT,
        "JavaScript": _JAVASCRIPT,
        "TypeScript": _TYPESCRIPT,
        "Ruby": _RUBY,
        "PHP": _PHP,
        "Shell": _SHELL,
        "Lua": _LUA,
        "Perl": _PERL,
        "Kconfig": _KCONFIG,
    }.items()
}


# Definitions -----------------------------------------------------------------------------------------------


def definition_spans(language: str, line: str) -> list[tuple[int, int]]:
    """Byte ranges (in the UTF-8 line) of the names `line` defines in `language`; empty for other lines."""
    forms = DEFINITIONS.get(language)
    if not forms or len(line) > MAX_DEFINITION_LINE:
        return []
    spans: set[tuple[int, int]] = set()
    for form in forms:
        m = form.match(line)
        if m is not None:
            start, end = m.span("name")
            if line.isascii():
                spans.add((start, end))
            else:
                prefix = len(line[:start].encode("utf-8"))
                spans.add((prefix, prefix + len(line[start:end].encode("utf-8"))))
    return sorted(spans)


def is_definition(language: str, line: str, ranges: Sequence[tuple[int, int]]) -> bool:
    """True when one of the match `ranges` (byte offsets) overlaps a name that `line` defines."""
    if not ranges:
        return False
    return any(
        start < name_end and name_start < end
        for name_start, name_end in definition_spans(language, line)
        for start, end in ranges
    )


def definition_lines(file: FileMatch) -> list[LineMatch]:
    """The line matches of `file` that are definitions of what was searched for, in line order."""
    return [m for m in file.line_matches if is_definition(file.language, m.line, m.ranges)]


def has_definition(
    file: FileMatch,
    spans: Sequence[tuple[int, int, int]] | None = None,
    *,
    seen: dict[str, dict[str, bool]] | None = None,
) -> bool:
    """True when one of `file`'s line matches is a definition of what was searched for.

    `spans` are the file's defined names from a symbol table, `(line, start, end)` in byte offsets: a match
    counts when it overlaps one of them. Without a table for the file (None) the regex forms above decide.
    Match ranges are read only for lines that can be definitions: the line holds a defined name (table) or
    some form matches it at all (`_any_form`), so lines read lazily (`FileMatch.line_match`) mostly stay unread.
    `seen` (language → line text → whether some form matches) carries that test over the files of one
    ranking: the same line text (`mutex_lock(&dev->mutex);`) recurs across files and repositories.
    """
    if spans is None:
        any_form = _any_form(file.language)
        if any_form is None:
            return False
        match = any_form.match
        known = {} if seen is None else seen.setdefault(file.language, {})
        for i, text in enumerate(file.line_texts()):
            if len(text) > MAX_DEFINITION_LINE:
                continue
            candidate = known.get(text)
            if candidate is None:
                candidate = known[text] = match(text) is not None
            if candidate and is_definition(file.language, text, file.line_match(i).ranges):
                return True
        return False
    by_line: dict[int, list[tuple[int, int]]] = {}
    for line, start, end in spans:
        by_line.setdefault(line, []).append((start, end))
    for i in range(file.line_count):
        names = by_line.get(file.line_number(i))
        if names and any(
            start < name_end and name_start < end
            for name_start, name_end in names
            for start, end in file.line_match(i).ranges
        ):
            return True
    return False


@lru_cache(maxsize=64)
def _any_form(language: str) -> re.Pattern[str] | None:
    """One regex matching a line exactly when some definition form of `language` does (a fast negative test).

    The forms as alternatives, their `name` groups unnamed (a name may appear once per regex); a line no
    form matches (most matching lines: calls, uses) then costs one regex call instead of one per form.
    """
    forms = DEFINITIONS.get(language)
    if not forms:
        return None
    return re.compile("|".join(f"(?:{form.pattern.replace('(?P<name>', '(?:')})" for form in forms))


# Match quality ---------------------------------------------------------------------------------------------


def _is_word_byte(b: int) -> bool:
    return b >= 0x80 or b == 0x5F or 0x30 <= b <= 0x39 or 0x41 <= b <= 0x5A or 0x61 <= b <= 0x7A


def _boundary(raw: bytes, at: int) -> bool:
    """True when position `at` of `raw` is not inside a word (a non-word byte or an end on either side)."""
    return at <= 0 or at >= len(raw) or not (_is_word_byte(raw[at - 1]) and _is_word_byte(raw[at]))


def is_whole_word(raw: bytes, start: int, end: int) -> bool:
    """True when the match [start, end) of the line `raw` is not part of a longer word on either side."""
    return _boundary(raw, start) and _boundary(raw, end)


def looks_like_code(terms: Sequence[str]) -> bool:
    """True when the query's terms look like code: identifier punctuation, camelCase or a code keyword."""
    return any(_CODE_CHARS.search(t) or t.lower() in _CODE_KEYWORDS for t in terms)


def whole_word_regex(term: str) -> str:
    """An RE2 regex for `term` as a whole word (a `\\b` at each end that is a word character)."""
    raw = term.encode()
    lead = "\\b" if raw and _is_word_byte(raw[0]) else ""
    tail = "\\b" if raw and _is_word_byte(raw[-1]) else ""
    return lead + re.escape(term) + tail


def better_match_regexes(terms: Sequence[str]) -> list[list[str]]:
    """Narrower forms of a query of plain `terms`, best first: the phrase, then every term as a whole word.

    Each form is a list of regexes that must all match in a file (each form's files are a subset of the
    query's). The service collects these when the plain query's first page stopped early (see above).
    """
    forms: list[list[str]] = []
    phrase = phrase_regex(terms)
    if phrase is not None:
        forms.append([phrase])
    if terms and all(terms):
        forms.append([whole_word_regex(t) for t in terms])
    return forms


def phrase_regex(terms: Sequence[str]) -> str | None:
    """An RE2 (and Python `re.ASCII`) regex for the terms as an adjacent phrase; None for fewer than two.

    Terms appear in query order, separated by 1 to _PHRASE_GAP non-word characters, each a whole word (a
    `\\b` stands at every end that is a word character).
    """
    if len(terms) < 2 or any(not t for t in terms):
        return None
    first, last = terms[0], terms[-1]
    lead = "\\b" if _is_word_byte(first.encode()[0]) else ""
    tail = "\\b" if _is_word_byte(last.encode()[-1]) else ""
    return lead + f"\\W{{1,{_PHRASE_GAP}}}".join(re.escape(t) for t in terms) + tail


@lru_cache(maxsize=64)
def _phrase(terms: tuple[str, ...], case_sensitive: bool) -> re.Pattern[bytes] | None:
    pattern = phrase_regex(terms)
    if pattern is None:
        return None
    return re.compile(pattern.encode("utf-8"), re.ASCII | (0 if case_sensitive else re.IGNORECASE))


def match_quality(file: FileMatch, terms: Sequence[str] = (), *, case_sensitive: bool = False) -> int:
    """3 adjacent phrase, 2 every term a whole word, 1 some whole-word match, 0 only parts of words.

    `terms` are the query's plain (non-regex) positive terms in query order; without them (a regex query)
    a whole-word match anywhere counts 2.
    """
    wanted = {t if case_sensitive else t.lower() for t in terms}
    phrase = _phrase(tuple(terms), case_sensitive) if len(terms) >= 2 else None
    # The phrase needs only the lines' texts; the ranges below are read until the answer is settled.
    if phrase is not None and any(phrase.search(t.encode("utf-8", "surrogateescape")) for t in file.line_texts()):
        return 3
    whole: set[str] = set()
    any_whole = False
    for i in range(file.line_count):
        first = file.first_range(i)
        if first is not None:
            # The line's first match alone may settle it (most files: their first line); else all its ranges.
            raw, start, end = first
            if is_whole_word(raw, start, end):
                text = raw[start:end].decode("utf-8", "replace")
                if wanted <= whole | {text if case_sensitive else text.lower()}:
                    return 2
        m = file.line_match(i)
        raw = m.line.encode("utf-8", "surrogateescape")
        for start, end in m.ranges:
            if is_whole_word(raw, start, end):
                any_whole = True
                text = raw[start:end].decode("utf-8", "replace")
                whole.add(text if case_sensitive else text.lower())
        if any_whole and wanted <= whole:
            return 2  # every term seen as a whole word (or, without terms, some match): the rest is unread
    if not wanted:
        return 2 if any_whole else 0
    found = len(wanted & whole)
    if found == len(wanted):
        return 2
    return 1 if found or any_whole else 0


# Ranking ---------------------------------------------------------------------------------------------------


def score(
    files: list[FileMatch],
    terms: Sequence[str] = (),
    *,
    case_sensitive: bool = False,
    definitions: Mapping[tuple[str, str], Sequence[tuple[int, int, int]]] | None = None,
) -> None:
    """Set each file's ranking key (`order`: the tiers in the module docstring: name, definition, quality,
    code, score) and `score`, leaving `files` in their order. A key depends on its file alone, so files scored
    apart (on the searcher replicas that hold them, beside their symbol tables) sort as if scored together.

    Uses the match ranges already on each line and the query's plain `terms` (in query order). `definitions`
    maps (repository, path) to the defined names' spans from a symbol table (search/symbols.py): those files
    are judged by it, the others by the regex forms.
    """
    code_query = looks_like_code(terms)
    tables = definitions or {}
    seen: dict[str, dict[str, bool]] = {}
    for f in files:
        defines = has_definition(f, tables.get((f.repo, f.path)), seen=seen)
        quality = match_quality(f, terms, case_sensitive=case_sensitive)
        code = code_query and f.language not in PROSE_LANGUAGES
        base = 10 * math.log1p(f.line_count) - 0.01 * len(f.path)
        f.score = (
            (NAME_BONUS if f.path_match else 0.0)
            + (DEFINITION_BONUS if defines else 0.0)
            + QUALITY_BONUS * quality
            + (CODE_BONUS if code else 0.0)
            + base
        )
        f.order = (f.path_match, defines, quality, code, base)


def sort_by_rank(files: list[FileMatch]) -> None:
    """Sort files `score` keyed, best first; the sort is stable (ties keep their order)."""
    files.sort(key=lambda f: f.order, reverse=True)


def rank(
    files: list[FileMatch],
    terms: Sequence[str] = (),
    *,
    case_sensitive: bool = False,
    definitions: Mapping[tuple[str, str], Sequence[tuple[int, int, int]]] | None = None,
) -> None:
    """Sort `files` in place by the tiers in the module docstring (`score`, then `sort_by_rank`)."""
    score(files, terms, case_sensitive=case_sensitive, definitions=definitions)
    sort_by_rank(files)
