"""Auto-indexing wired into search (codenav/autoindex.py): the real scip-python runs after search indexes.

The app (the `client` fixture) runs every capability's setup, so registering a repository syncs it, search
indexes it, and `search.indexed` queues the repository's `codenav.autoindex` job, which the registration's drain
runs (in this thread, as any worker would) with the real `scip-python` 0.6.6 (npm, pinned by
tests/scip/package-lock.json, installed by scripts/test). One real run (a few seconds on the tiny fixture); the
failure modes are in tests/unit/codenav/test_autoindex.py.
"""

from __future__ import annotations

import threading
from pathlib import Path

from click.testing import CliRunner
from starlette.testclient import TestClient

from codewell.cli.main import cli
from codewell.codenav.autoindex import AutoIndexService
from codewell.codenav.precise import AUTO, PreciseService
from codewell.codenav.results import PRECISE, SYNTACTIC
from codewell.codenav.service import CodeNavService
from codewell.core.actors import INTERNAL
from codewell.jobs.runner import drain
from codewell.jobs.service import JobService
from codewell.repos.service import repo_resource
from codewell.runtime import Runtime
from tests.factories import set_site_config
from tests.gitfixtures import make_repo, register_local_repo
from tests.unit.codenav.test_scip_upload import FILES, INDEXER


def test_an_indexed_repository_is_auto_indexed_and_answers_precisely(
    runtime: Runtime, client: TestClient, tmp_path: Path
) -> None:
    assert INDEXER.exists(), "run scripts/test (npm ci in tests/scip) to install the scip-python test indexer"
    set_site_config(
        runtime,
        {"codeIntel.autoIndexing": {"enabled": True, "indexers": {"python": str(INDEXER)}, "timeoutSeconds": 300}},
    )
    repo = register_local_repo(runtime, make_repo(tmp_path / "app", FILES), "acme/app")  # synced, indexed, queued
    drain(runtime, repo_resource(repo.id))  # nothing left: the registration drained the auto-indexing job too
    (job,) = runtime.get(JobService).list_jobs(INTERNAL, kind="codenav.autoindex")
    assert (job.resource, job.state, job.cause) == (repo_resource(repo.id), "succeeded", "search.indexed")
    assert not [t for t in threading.enumerate() if t.name == "codenav-autoindex"]  # no thread of its own
    autoindex = runtime.get(AutoIndexService)
    (upload,) = runtime.get(PreciseService).uploads(INTERNAL, "acme/app")
    assert upload.source == AUTO
    assert upload.tool.startswith("scip-python ")
    assert upload.documents == 4  # app/extra.py too: the job indexes the whole commit
    assert autoindex.failures(INTERNAL, "acme/app") == []

    nav = runtime.get(CodeNavService)
    (helper,) = nav.go_to_definition(INTERNAL, "acme/app", "app/main.py", "helper").candidates
    assert (helper.how, helper.path, helper.line) == (PRECISE, "app/util.py", 11)
    # Only type inference knows `c.load()` is Config's (the syntactic path offers Config's and Cache's).
    (load,) = nav.go_to_definition(INTERNAL, "acme/app", "app/main.py", "load").candidates
    assert (load.how, load.container) == (PRECISE, "Config")

    root = ["--data-dir", str(runtime.settings.data_dir), "--database-url", runtime.settings.database_url]
    listing = CliRunner().invoke(cli, [*root, "codeintel", "list", "--repo", "acme/app"])
    assert listing.exit_code == 0, listing.stderr
    assert f"{upload.commit}  " in listing.stdout
    assert "  auto-indexed  4 documents  scip-python " in listing.stdout


def test_nothing_runs_while_auto_indexing_is_disabled(runtime: Runtime, client: TestClient, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    indexer = tmp_path / "indexer.sh"
    indexer.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    indexer.chmod(0o755)
    set_site_config(runtime, {"codeIntel.autoIndexing": {"enabled": False, "indexers": {"python": str(indexer)}}})
    repo = register_local_repo(runtime, make_repo(tmp_path / "app", FILES), "acme/app")
    drain(runtime, repo_resource(repo.id))
    # Switched off: the index enqueues no auto-indexing job at all (JobKind.when), so nothing can run.
    assert runtime.get(JobService).list_jobs(INTERNAL, kind="codenav.autoindex") == []
    autoindex = runtime.get(AutoIndexService)
    assert not marker.exists()
    assert runtime.get(PreciseService).uploads(INTERNAL, "acme/app") == []
    assert autoindex.failures(INTERNAL, "acme/app") == []
    found = runtime.get(CodeNavService).go_to_definition(INTERNAL, "acme/app", "app/main.py", "helper")
    assert found.candidates[0].how == SYNTACTIC
