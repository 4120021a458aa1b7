"""Python navigation: the rules Python modules and receivers add to the shared ones (navigation.py).

- `from .impl import name` re-exported by a package's `__init__.py` (a few hops), for definitions and references;
- a local variable of some function is a weaker answer than the file's imports;
- find_references of a member: what the code says each receiver is (python_refs.py: constructors, annotations,
  return types of the functions called, `with ... as x`), and the scope rules (nested functions, shadowing).
"""

from __future__ import annotations

from codewell.codenav.extract import Symbol
from codewell.codenav.jsdoc import JsDocTypes
from codewell.codenav.navigation import Hit, Resolver, Target
from codewell.codenav.python_refs import ReceiverTypes, local_scope, shadowed
from codewell.codenav.resolve import module_files
from codewell.codenav.store import ImportRow

__all__ = ["PythonResolver"]


class PythonResolver(Resolver):
    """go_to_definition and find_references in Python files."""

    def _imports_first(self, hits: list[Hit]) -> bool:
        # A Python local variable of some function is a weaker answer than what the file imports.
        return all(h.row.symbol.kind == "variable" and h.row.symbol.container for h in hits)

    def _reexported(self, target: Target, imp: ImportRow, name: str, files: list[str], module: str) -> list[Hit]:
        return self._python_reexport(target, name, files, module, depth=3)

    def _reference_occurrences(
        self, target: Target, definition: Symbol
    ) -> tuple[
        ReceiverTypes | None,
        dict[str, list[tuple[int, int, str]]],
        dict[str, dict[tuple[int, int], str]],
        JsDocTypes | None,
    ]:
        receivers, occurrences = self._python_receivers(target, definition)
        return receivers, occurrences, {}, None

    def _visible_through_reexports(
        self, target: Target, name: str, importers: set[str], visible: dict[str, int], aliases: dict[str, set[str]]
    ) -> None:
        index, queries, path = target.index, target.queries, target.path
        # One hop of re-export: files importing `name` from a module that imports it from here.
        for imp in index.imports_mentioning(name):
            if imp.path == path or imp.name != name:
                continue
            via = module_files(index, imp.path, queries, imp.module)
            if any(v in importers for v in via):
                visible.setdefault(imp.path, 2)
                aliases.setdefault(imp.path, set()).add("")

    def _python_reexport(self, target: Target, name: str, files: list[str], module: str, depth: int) -> list[Hit]:
        """`from .impl import name` in a package's __init__.py: follow the re-export (a few hops at most)."""
        if depth == 0:
            return []
        for path in files:
            for imp in target.index.imports_of(path):
                if imp.alias != name and imp.name != "*":
                    continue
                wanted = name if imp.name in ("", "*") else imp.name
                further = module_files(target.index, path, "python", imp.module)
                found = self._hits_in(target, wanted, further, [], f"imported from {module} (re-exported)")
                if not found:
                    found = self._python_reexport(target, wanted, further, module, depth - 1)
                if found:
                    return found
        return []

    def _python_receivers(
        self, target: Target, definition: Symbol
    ) -> tuple[ReceiverTypes | None, dict[str, list[tuple[int, int, str]]]]:
        """The receiver rules of a Python member, and the occurrences of the name that can be references.

        A function nested in a function is local to it: only that function's lines can name it. A module-level
        name is not what a function that binds the same name itself uses.
        """
        occurrences = target.index.occurrences(definition.name)
        if target.queries != "python":
            return None, occurrences
        symbols = target.index.symbols_in(target.path)
        scope = local_scope(symbols, definition)
        if scope is not None:
            first, last = scope
            occurrences = {target.path: [spot for spot in occurrences.get(target.path, []) if first <= spot[0] <= last]}
        elif not definition.container:
            # A module-level name used where a function binds the same name itself means that local.
            for path, spots in occurrences.items():
                if any(role == "r" for _, _, role in spots):
                    hidden = set(shadowed(target.index.symbols_in(path), definition.name, spots))
                    occurrences[path] = [spot for spot in spots if spot not in hidden]
        if definition.kind not in ("method", "field") or not definition.container:
            return None, occurrences
        receivers = ReceiverTypes(
            target.index,
            target.language,
            lambda path: self._lines(target.repo, target.commit, path),
            definition.name,
            definition.container.split(".")[-1],
        )
        return receivers, occurrences
