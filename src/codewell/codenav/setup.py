"""Wiring of the codenav capability: forget a repository's symbol indexes when it is removed."""

from __future__ import annotations

from codewell.codenav.service import CodeNavService
from codewell.repos.service import RepoService
from codewell.runtime import Runtime


def setup(runtime: Runtime) -> None:
    runtime.get(RepoService).add_removal_listener(runtime.get(CodeNavService).drop)
