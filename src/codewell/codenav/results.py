"""What go_to_definition and find_references answer (plain data; rendered by codenav/render.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Definition", "Definitions", "ReferenceFile", "References"]

# How an answer was found, as Sourcegraph labels it: `precise` (a compiler-grade index such as SCIP),
# `syntactic` (this file's syntax tree, its imports and the language's lookup rules), `search-based`
# (a definition that merely has the right name).
PRECISE, SYNTACTIC, SEARCH_BASED = "precise", "syntactic", "search-based"


@dataclass(frozen=True, slots=True)
class Definition:
    repo: str
    path: str
    commit: str
    language: str
    name: str
    kind: str
    container: str
    line: int
    column: int
    end_line: int
    end_column: int
    def_line: int
    def_end_line: int
    how: str
    reason: str  # e.g. "same file", "imported from .util", "same repository, matched by name"
    snippet: list[tuple[int, str]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Definitions:
    repo: str
    path: str
    symbol: str
    commit: str
    candidates: list[Definition]
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ReferenceFile:
    repo: str
    path: str
    commit: str
    scope: str  # "same file" | "same package" | "same repository" | "other repository"
    # (line, column, line text) of each reference shown.
    lines: list[tuple[int, int, str]]
    total: int  # references in this file (some may not be shown)


@dataclass(frozen=True, slots=True)
class References:
    repo: str
    path: str
    symbol: str
    commit: str
    definition: Definition
    files: list[ReferenceFile]
    total: int  # references found (in files the caller may read)
    shown: int
    how: str
    text_matches: bool = False  # True when only comments/strings mention the name
    notes: list[str] = field(default_factory=list)
