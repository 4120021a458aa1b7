"""Result ordering: file-name matches, then files that define what was searched for, then a Zoekt-like score.

Files are ordered by three tiers, each one strictly above the next, and a score within a tier:

1. the file's path matches a pattern (`FileMatch.path_match`);
2. one of its matching lines is a *definition*: a match overlaps the name that the line defines, judged by the
   small per-language table `DEFINITIONS` below (`def foo(`, `static int foo(`, `func (r T) Foo(`, ...);
3. then `10·ln(1 + matching lines) − 0.01·len(path)`: more matching lines first, shorter paths first.

The sort is stable, so ties keep the order the searcher produced (repository name, then path).
`FileMatch.score` is set to `1000·name + 500·definition + 10·ln(1 + lines) − 0.01·len(path)` for
information; the tiers, not the sum, decide the order. Lines inside a file keep their line order.

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
from collections.abc import Sequence

from codewell.search.results import FileMatch, LineMatch

__all__ = ["DEFINITIONS", "definition_lines", "definition_spans", "has_definition", "is_definition", "rank"]

NAME_BONUS = 1000.0
DEFINITION_BONUS = 500.0
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


def has_definition(file: FileMatch) -> bool:
    """True when one of `file`'s line matches is a definition of what was searched for."""
    return any(is_definition(file.language, m.line, m.ranges) for m in file.line_matches)


# Ranking ---------------------------------------------------------------------------------------------------


def rank(files: list[FileMatch]) -> None:
    """Sort `files` in place: name matches, then definitions, then more matching lines and shorter paths.

    Uses the match ranges already on each line (computed from the query's patterns), so it needs nothing else.
    Sets `score` on every file; the sort is stable.
    """
    keys: dict[int, tuple[bool, bool, float]] = {}
    for f in files:
        defines = has_definition(f)
        base = 10 * math.log1p(len(f.line_matches)) - 0.01 * len(f.path)
        f.score = (NAME_BONUS if f.path_match else 0.0) + (DEFINITION_BONUS if defines else 0.0) + base
        keys[id(f)] = (f.path_match, defines, base)
    files.sort(key=lambda f: keys[id(f)], reverse=True)
