"""Wiring of nls: a chunk index for every revision search indexes (after codenav's symbols, listed before)."""

from __future__ import annotations

from codewell.nls.service import NlsService
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from codewell.search.service import SearchService


def setup(runtime: Runtime) -> None:
    nls = runtime.get(NlsService)
    runtime.get(RepoService).add_removal_listener(nls.drop)
    runtime.get(SearchService).add_index_listener(nls.on_indexed)
