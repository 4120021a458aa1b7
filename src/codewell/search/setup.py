"""Wiring of the search capability: each new index generation emits `search.indexed` (codewell.jobs), and
`codewell repos status` shows the index state. Indexing itself runs as jobs (`search/jobs.py`)."""

from __future__ import annotations

from codewell.core.actors import INTERNAL
from codewell.jobs.service import JobService
from codewell.repos.service import Repo, RepoService, repo_resource
from codewell.runtime import Runtime
from codewell.search.service import SearchService


def index_states(service: SearchService, name: str | None) -> dict[str, str]:
    """Repository name -> its index state for `codewell repos status` ("indexed 1234 files", "failed: ...")."""
    states = {}
    for s in service.status(INTERNAL, name):
        label = f"indexed {s.documents} files" if s.state == "indexed" else s.state
        states[s.repo] = f"{label}: {s.error}" if s.error else label
    return states


def setup(runtime: Runtime) -> None:
    service = runtime.get(SearchService)
    jobs = runtime.get(JobService)

    def indexed(repo: Repo, commits: dict[str, str]) -> None:
        jobs.emit("search.indexed", repo_resource(repo.id), {"repo_id": repo.id, "commits": commits})

    service.add_index_listener(indexed)
    runtime.get(RepoService).add_status_column("index", lambda name: index_states(service, name))
