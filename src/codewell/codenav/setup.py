"""Wiring of the codenav capability: symbols for every revision search indexes, and search's symbol source.

Search calls `CodeNavService.on_indexed` after each new index generation (in its indexing thread), so a
revision's symbols exist before anyone navigates it, and reads symbol tables through the `SymbolSource`
interface it defines (search never imports codenav). Removing a repository deletes its symbol indexes and
its SCIP uploads.

Auto-indexing (codenav/autoindex.py) listens last: its listener only queues jobs (a background thread runs
the SCIP indexers), and runs after the symbols are built so that it never delays them.
"""

from __future__ import annotations

from codewell.codenav.autoindex import AutoIndexService
from codewell.codenav.precise import PreciseService
from codewell.codenav.service import CodeNavService
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from codewell.search.service import SearchService


def setup(runtime: Runtime) -> None:
    nav = runtime.get(CodeNavService)
    runtime.get(RepoService).add_removal_listener(nav.drop)
    runtime.get(RepoService).add_removal_listener(runtime.get(PreciseService).drop)
    search = runtime.get(SearchService)
    search.add_index_listener(nav.on_indexed)
    search.set_symbol_source(nav)
    autoindex = runtime.get(AutoIndexService)
    runtime.get(RepoService).add_removal_listener(autoindex.drop)
    search.add_index_listener(autoindex.on_indexed)
