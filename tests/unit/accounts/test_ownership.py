"""Layering of accounts (issue #15): accounts sits below auth and alone writes its tables."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import codewell

SRC = Path(codewell.__file__).parent


def _imports(path: Path) -> Iterator[str]:
    """Every module a file imports (module level or not, TYPE_CHECKING included)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def _offenders(folder: str, forbidden: tuple[str, ...]) -> list[str]:
    found = []
    for path in sorted((SRC / folder).rglob("*.py")):
        for name in _imports(path):
            if any(name == f or name.startswith(f + ".") for f in forbidden):
                found.append(f"{path.relative_to(SRC)} imports {name}")
    return found


def test_accounts_imports_no_capability_above_it() -> None:
    assert _offenders("accounts", ("codewell.auth", "codewell.oauth", "codewell.mcp", "codewell.analytics")) == []


def test_only_accounts_touches_its_tables() -> None:
    others = [p.name for p in SRC.iterdir() if p.is_dir() and p.name not in {"accounts", "db", "__pycache__"}]
    offenders = [o for folder in others for o in _offenders(folder, ("codewell.accounts.models",))]
    assert offenders == []
