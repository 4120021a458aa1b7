"""Symbols in search: the hook through which a symbol index (codenav) serves `type:symbol`/`sym:` and ranking.

Search does not parse code and must not import the capabilities built on it. It defines `SymbolSource`, the
small interface it needs, and a capability that keeps per-revision symbol tables registers its implementation
with `SearchService.set_symbol_source` in its setup. Without a source, or for a revision the source has no
table for, search falls back to text: `type:symbol` shows text matches only, and ranking uses the regex
heuristic of `ranking.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from codewell.repos.service import Repo
from codewell.search.query.parser import And, Node, Not, Pattern, Query
from codewell.search.query.regex import compile_regex

__all__ = [
    "DefinitionSpans",
    "SymbolMatch",
    "SymbolSource",
    "name_matcher",
    "symbol_order",
]

# Path → the byte ranges (line, start, end: 1-based line, 0-based byte offsets in the line) of the names
# defined in that file. Files the source did not parse are absent (their lines fall back to the heuristic).
DefinitionSpans = dict[str, list[tuple[int, int, int]]]

_KIND_ORDER = {
    "class": 0,
    "struct": 0,
    "interface": 0,
    "enum": 0,
    "type alias": 0,
    "function": 1,
    "method": 1,
    "macro": 1,
    "module": 2,
    "constant": 2,
    "field": 3,
    "variable": 3,
}


@dataclass(frozen=True, slots=True)
class SymbolMatch:
    """One definition whose name matched: where its name is (1-based line, 0-based byte columns) and its line."""

    path: str
    name: str
    kind: str
    container: str
    line: int
    start: int
    end: int
    text: str

    @property
    def label(self) -> str:
        """`method Config.load`: the kind and the qualified name, as the result block shows it."""
        qualified = f"{self.container}.{self.name}" if self.container else self.name
        return f"{self.kind} {qualified}"


class SymbolSource(Protocol):
    """Per-revision symbol tables, read-only (a source never builds a table on a search's behalf)."""

    def symbols(
        self, repo: Repo, commit: str, match: Callable[[str], bool], include: Callable[[str], bool], limit: int
    ) -> list[SymbolMatch] | None:
        """Definitions in `commit` whose name satisfies `match` and path `include`, at most `limit`.

        None when the revision has no symbol table (not extracted yet).
        """
        ...

    def definitions(self, repo: Repo, commit: str, paths: Sequence[str]) -> DefinitionSpans | None:
        """The defined names' spans in each of `paths` that was parsed; None when the revision has no table."""
        ...


def name_matcher(q: Query) -> Callable[[str], bool]:
    """A predicate on symbol names: the query's pattern tree, each pattern searched in the name."""
    expr = q.expr
    if expr is None:
        return lambda _name: True
    case = q.case_sensitive

    def test(node: Node, name: bytes) -> bool:
        if isinstance(node, Pattern):
            return compile_regex(node.value, case_sensitive=case).search(name) is not None
        if isinstance(node, Not):
            return not test(node.child, name)
        if isinstance(node, And):
            return all(test(c, name) for c in node.children)
        return any(test(c, name) for c in node.children)

    return lambda name: test(expr, name.encode("utf-8"))


def symbol_order(terms: Sequence[str], *, case_sensitive: bool) -> Callable[[SymbolMatch], tuple[int, int, int, str]]:
    """Sort key of symbol matches: the name equal to a term, then starting with one, then containing it;
    types before functions before variables; shorter paths first."""
    wanted = [t if case_sensitive else t.lower() for t in terms]

    def key(s: SymbolMatch) -> tuple[int, int, int, str]:
        name = s.name if case_sensitive else s.name.lower()
        closeness = 0 if name in wanted else 1 if any(name.startswith(t) for t in wanted) else 2
        return closeness, _KIND_ORDER.get(s.kind, 4), len(s.path), s.path

    return key
