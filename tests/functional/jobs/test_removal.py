"""A repository removed while its index job runs leaves nothing behind: its clean-up jobs wait for the running
index (they share its lock), then remove what it built."""

from __future__ import annotations

import threading
from pathlib import Path

from codewell.capabilities import wire
from codewell.core.actors import INTERNAL
from codewell.jobs.models import JobRow
from codewell.jobs.service import JobService
from codewell.repos.service import RepoService, repo_resource
from codewell.runtime import Runtime
from codewell.search.service import SearchService
from tests.gitfixtures import make_repo, register_local_repo


def test_a_repository_removed_while_it_is_indexed_leaves_nothing_behind(runtime: Runtime, tmp_path: Path) -> None:
    wire(runtime)
    source = make_repo(tmp_path / "src", {"a.py": "def needle_removed():\n    return 1\n"})
    repo = register_local_repo(runtime, source, "acme/gone")
    search = runtime.get(SearchService)
    assert search.shard(repo) is not None
    data = runtime.settings.data_dir
    assert (data / "codenav" / str(repo.id)).is_dir()
    assert (data / "nls" / str(repo.id)).is_dir()

    # A worker is indexing it again (we hold that job's claim, as another process would).
    jobs = runtime.get(JobService)
    jobs.enqueue("search.index", repo_resource(repo.id), {"repo_id": repo.id})
    running = jobs.claim("other-worker", frozenset({"search.index"}))
    assert running is not None

    search.index(repo, force=True)  # the running job has built its new generation, and is not finished yet

    removal = threading.Thread(target=runtime.get(RepoService).remove_repo, args=(INTERNAL, "acme/gone"))
    removal.start()
    removal.join(3)
    assert removal.is_alive()  # search's clean-up waits for the running index of the same repository
    jobs.succeed(running, None)
    removal.join(60)
    assert not removal.is_alive()

    assert search.shard(repo) is None
    assert not (data / "codenav" / str(repo.id)).exists()
    assert not (data / "nls" / str(repo.id)).exists()
    assert not repo.mirror_path.exists()
    admin_results = search.search(INTERNAL, "needle_")
    assert admin_results.files == []
    with runtime.db.session() as session:
        left = session.query(JobRow).filter(JobRow.resource == repo_resource(repo.id)).all()
        assert {job.state for job in left} <= {"succeeded", "cancelled"}
        assert {job.kind for job in left if job.state == "succeeded"} >= {
            "search.drop",
            "codenav.drop",
            "nls.drop",
            "repos.delete_mirror",
        }
