"""Which files codenav parses: file name → (tree-sitter grammar, language label, query file)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

__all__ = ["LANGUAGES", "Grammar", "grammar_of"]


@dataclass(frozen=True, slots=True)
class Grammar:
    ts_name: str  # the grammar's name in tree-sitter-language-pack
    label: str  # the language name shown to users (the same names search's `lang:` uses)
    queries: str  # the file under codenav/queries/ without `.scm`


_PY = Grammar("python", "Python", "python")
_GO = Grammar("go", "Go", "go")
_JS = Grammar("javascript", "JavaScript", "javascript")
_TS = Grammar("typescript", "TypeScript", "typescript")
# TSX is TypeScript plus JSX: the same node types, so the same queries.
_TSX = Grammar("tsx", "TypeScript", "typescript")
_JAVA = Grammar("java", "Java", "java")
_C = Grammar("c", "C", "c")
_CPP = Grammar("cpp", "C++", "cpp")
_RUST = Grammar("rust", "Rust", "rust")
_RUBY = Grammar("ruby", "Ruby", "ruby")
_CS = Grammar("csharp", "C#", "csharp")
_PHP = Grammar("php", "PHP", "php")
_KOTLIN = Grammar("kotlin", "Kotlin", "kotlin")

_EXTENSIONS: dict[str, Grammar] = {
    ".py": _PY,
    ".pyi": _PY,
    ".go": _GO,
    ".js": _JS,
    ".mjs": _JS,
    ".cjs": _JS,
    ".jsx": _JS,
    ".ts": _TS,
    ".mts": _TS,
    ".cts": _TS,
    ".tsx": _TSX,
    ".java": _JAVA,
    # A `.h` file may be C or C++; the C grammar parses the common subset, and C headers are the majority.
    ".c": _C,
    ".h": _C,
    ".cc": _CPP,
    ".cpp": _CPP,
    ".cxx": _CPP,
    ".hpp": _CPP,
    ".hh": _CPP,
    ".hxx": _CPP,
    ".rs": _RUST,
    ".rb": _RUBY,
    ".cs": _CS,
    ".php": _PHP,
    ".kt": _KOTLIN,
    ".kts": _KOTLIN,
}

LANGUAGES: tuple[str, ...] = tuple(sorted({g.label for g in _EXTENSIONS.values()}))


def grammar_of(path: str) -> Grammar | None:
    """The grammar that parses `path`, or None when codenav does not support its language."""
    return _EXTENSIONS.get(PurePosixPath(path).suffix.lower())
