"""Wiring of the codenav capability: search's symbol source.

Symbols are built as jobs (`codenav/jobs.py`) for every revision search indexes (`search.indexed`), so a
revision's symbols exist before anyone navigates it; search reads symbol tables through the `SymbolSource`
interface it defines (search never imports codenav). A repository's removal deletes its symbol indexes and its
SCIP uploads (`repo.removed`).
"""

from __future__ import annotations

from codewell.codenav.service import CodeNavService
from codewell.runtime import Runtime
from codewell.search.service import SearchService


def setup(runtime: Runtime) -> None:
    runtime.get(SearchService).set_symbol_source(runtime.get(CodeNavService))
