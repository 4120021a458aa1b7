"""File name → language, for `lang:` filters and result metadata (a small table, extension-based)."""

from __future__ import annotations

__all__ = ["LANGUAGES", "language_of", "normalize_language"]

_EXTENSIONS: dict[str, str] = {
    ".c": "C",
    ".h": "C",
    ".cc": "C++",
    ".cpp": "C++",
    ".cxx": "C++",
    ".hpp": "C++",
    ".hh": "C++",
    ".py": "Python",
    ".pyi": "Python",
    ".go": "Go",
    ".rs": "Rust",
    ".java": "Java",
    ".kt": "Kotlin",
    ".js": "JavaScript",
    ".mjs": "JavaScript",
    ".cjs": "JavaScript",
    ".jsx": "JavaScript",
    ".ts": "TypeScript",
    ".tsx": "TypeScript",
    ".rb": "Ruby",
    ".php": "PHP",
    ".cs": "C#",
    ".swift": "Swift",
    ".scala": "Scala",
    ".sh": "Shell",
    ".bash": "Shell",
    ".pl": "Perl",
    ".pm": "Perl",
    ".lua": "Lua",
    ".md": "Markdown",
    ".rst": "reStructuredText",
    ".txt": "Text",
    ".json": "JSON",
    ".yaml": "YAML",
    ".yml": "YAML",
    ".toml": "TOML",
    ".xml": "XML",
    ".html": "HTML",
    ".css": "CSS",
    ".sql": "SQL",
    ".s": "Assembly",
    ".S": "Assembly",
    ".asm": "Assembly",
    ".dts": "Device Tree",
    ".dtsi": "Device Tree",
    ".awk": "Awk",
    ".m4": "M4",
    ".tex": "TeX",
    ".proto": "Protocol Buffers",
}
_NAMES: dict[str, str] = {
    "Makefile": "Makefile",
    "Kbuild": "Makefile",
    "Dockerfile": "Dockerfile",
    "Kconfig": "Kconfig",
    "CMakeLists.txt": "CMake",
}
LANGUAGES: tuple[str, ...] = tuple(sorted({*_EXTENSIONS.values(), *_NAMES.values()}))
_BY_LOWER = {name.lower(): name for name in LANGUAGES} | {
    "c++": "C++",
    "cpp": "C++",
    "py": "Python",
    "golang": "Go",
    "js": "JavaScript",
    "ts": "TypeScript",
    "csharp": "C#",
    "sh": "Shell",
    "bash": "Shell",
    "md": "Markdown",
    "yml": "YAML",
    "make": "Makefile",
    "asm": "Assembly",
    "rb": "Ruby",
    "rs": "Rust",
}


def language_of(path: str) -> str:
    """The language name for `path`, or "" when unknown."""
    # String operations, not PurePosixPath: it runs once per indexed file (10x faster: 0.3 s of the Linux build).
    name = path.rpartition("/")[2]
    if name in _NAMES:
        return _NAMES[name]
    if name.startswith("Kconfig"):
        return "Kconfig"
    dot = name.rfind(".")
    suffix = name[dot:] if 0 < dot < len(name) - 1 else ""  # PurePosixPath.suffix: no suffix for ".bashrc" or "a."
    return _EXTENSIONS.get(suffix) or _EXTENSIONS.get(suffix.lower(), "")


def normalize_language(value: str) -> str | None:
    """The canonical language name for a `lang:` value (any case, common aliases), or None if unknown."""
    return _BY_LOWER.get(value.lower())
