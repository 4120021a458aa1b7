"""Mirroring: clone, fetch, failures with back-off, listeners, removal, config reconcile, the scheduler."""

from __future__ import annotations

import shutil
import threading
from datetime import timedelta
from pathlib import Path

import pytest

from codewell.config.schema import SiteConfig
from codewell.core.actors import ANONYMOUS, INTERNAL
from codewell.core.errors import Conflict, InvalidInput, NotFound, Unavailable
from codewell.db.base import utcnow
from codewell.jobs.runner import JobRunner
from codewell.jobs.service import JobService
from codewell.repos import git as gitmod
from codewell.repos.service import Repo, RepoService, backoff_seconds
from codewell.runtime import Runtime
from tests.gitfixtures import commit, git, make_bare, make_repo, register_local_repo

pytestmark = pytest.mark.database


def test_first_sync_clones_a_bare_mirror_with_branches_and_tags_only(
    runtime: Runtime, service: RepoService, sample: Repo, sample_source: Path
) -> None:
    assert sample.sync_state == "ready"
    assert sample.last_error is None
    assert sample.default_branch == "main"
    assert sample.mirror_path == runtime.settings.data_dir / "repos" / "local" / "sample.git"
    assert (sample.mirror_path / "HEAD").is_file()
    assert not (sample.mirror_path / ".git").exists()
    assert sample.size_bytes
    assert sample.size_bytes > 0
    assert sample.last_fetched_at is not None
    refs = git(sample.mirror_path, "for-each-ref", "--format=%(refname)").split()
    assert sorted(refs) == [
        "refs/heads/feature",
        "refs/heads/main",
        "refs/tags/v1.0",
        "refs/tags/v2.0",
        "refs/tags/v3.0",
    ]
    assert not list(sample.mirror_path.parent.glob("*.tmp-*"))


def test_fetch_brings_new_commits_and_prunes_deleted_branches(
    runtime: Runtime, service: RepoService, tmp_path: Path
) -> None:
    source = make_repo(tmp_path / "src", {"a.txt": "one\n"}, branches={"old": {"b.txt": "b\n"}})
    register_local_repo(runtime, source, "local/src")
    synced: list[str] = []
    service.add_sync_listener(lambda repo: synced.append(repo.name))
    unchanged = service.sync_repo(INTERNAL, "local/src")
    assert unchanged.ok
    assert not unchanged.changed
    assert synced == []
    new_head = commit(source, {"a.txt": "two\n"}, message="second")
    git(source, "branch", "-D", "old")
    outcome = service.sync_repo(INTERNAL, "local/src")
    assert outcome.ok
    assert outcome.changed
    assert synced == ["local/src"]
    assert service.read_file(ANONYMOUS, "local/src", "a.txt").commit == new_head
    assert [r.short_name for r in service.list_refs(ANONYMOUS, "local/src").refs] == ["main"]


def test_the_default_branch_follows_the_source_head(runtime: Runtime, service: RepoService, tmp_path: Path) -> None:
    source = make_repo(tmp_path / "src", {"a.txt": "a\n"}, default_branch="trunk")
    repo = register_local_repo(runtime, source, "local/trunk")
    assert repo.default_branch == "trunk"
    assert service.resolve(ANONYMOUS, "local/trunk").revision == "trunk"


def test_a_bare_source_and_a_file_url_can_be_mirrored(runtime: Runtime, service: RepoService, tmp_path: Path) -> None:
    bare = make_bare(tmp_path / "x.git", make_repo(tmp_path / "w", {"f.txt": "f\n"}))
    repo = service.add_repo(INTERNAL, f"file://{bare}", private=False)
    assert repo.name == f"localhost{bare}".removesuffix(".git")
    assert service.sync_repo(INTERNAL, repo.name).ok
    assert service.read_file(ANONYMOUS, repo.name, "f.txt").lines == ["f"]


def test_a_clone_failure_is_recorded_with_back_off_and_leaves_nothing_behind(
    runtime: Runtime, service: RepoService, tmp_path: Path
) -> None:
    # Registering checks that a file:// repository exists; it disappears afterwards.
    make_bare(tmp_path / "missing.git", make_repo(tmp_path / "work", {"a.txt": "a\n"}))
    repo = service.add_repo(INTERNAL, f"file://{tmp_path}/missing.git", name="bad/missing")
    shutil.rmtree(tmp_path / "missing.git")
    before = utcnow()
    outcome = service.sync_repo(INTERNAL, "bad/missing")
    assert not outcome.ok
    assert outcome.error
    failed = service.get(INTERNAL, "bad/missing")
    assert failed.sync_state == "failed"
    assert failed.failures == 1
    assert "does not appear to be a git repository" in (failed.last_error or "")
    assert failed.next_sync_at is not None
    assert failed.next_sync_at >= before + timedelta(seconds=backoff_seconds(1))
    assert not repo.mirror_path.exists()
    assert not list(repo.mirror_path.parent.glob("*.tmp-*"))
    service.sync_repo(INTERNAL, "bad/missing")
    assert service.get(INTERNAL, "bad/missing").failures == 2
    with pytest.raises(Unavailable, match="not cloned yet"):
        service.read_file(INTERNAL, "bad/missing", "a.txt")


def test_back_off_is_exponential_and_capped() -> None:
    assert [backoff_seconds(n) for n in (1, 2, 3, 4)] == [30, 60, 120, 240]
    assert backoff_seconds(30) == 6 * 3600


def test_credentials_never_reach_names_errors_or_the_mirror_config(
    runtime: Runtime, service: RepoService, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Port 9 on loopback: nothing listens, the connection is refused at once.
    repo = service.add_repo(INTERNAL, "https://alice:hunter2secret@127.0.0.1:9/org/repo.git")
    assert repo.name == "127.0.0.1/org/repo"
    assert "hunter2" not in repo.clone_url
    outcome = service.sync_repo(INTERNAL, repo.name)
    assert not outcome.ok
    assert "hunter2secret" not in (outcome.error or "")
    assert "127.0.0.1" in (outcome.error or "")
    monkeypatch.setenv("CW_TEST_TOKEN", "tok-abcdef123456")
    env_repo = service.add_repo(INTERNAL, "https://127.0.0.1:9/org/other.git", credentials_env="CW_TEST_TOKEN")
    env_outcome = service.sync_repo(INTERNAL, env_repo.name)
    assert not env_outcome.ok
    assert "tok-abcdef123456" not in (env_outcome.error or "")
    monkeypatch.delenv("CW_TEST_TOKEN")
    missing = service.sync_repo(INTERNAL, env_repo.name)
    assert missing.error == "environment variable CW_TEST_TOKEN (credentialsEnv) is not set"


def test_adding_bad_sources_is_rejected(service: RepoService, tmp_path: Path, sample: Repo) -> None:
    with pytest.raises(InvalidInput, match="is not a directory"):
        service.add_repo(INTERNAL, str(tmp_path / "nope"))
    with pytest.raises(Conflict, match="already registered"):
        service.add_repo(INTERNAL, "https://example.com/x.git", name="local/sample")
    with pytest.raises(InvalidInput, match="invalid repository name"):
        service.add_repo(INTERNAL, "https://example.com/x.git", name="../escape")


def test_a_source_that_fails_validation_registers_nothing(
    service: RepoService, tmp_path: Path, sample_source: Path
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("not a repository\n")
    refused = [
        ("file:///etc", "is not a git repository"),
        (f"file://{plain}", "is not a git repository"),
        (str(plain), "is not a git repository"),
        ("ext::sh -c touch% /tmp/pwned", "remote helpers"),
        ("fd::3", "remote helpers"),
        ("ftp://host.example/org/repo.git", "unsupported clone URL scheme"),
        ("https://host.example/org/-rf.git", "starts with '-'"),
    ]
    for url, message in refused:
        with pytest.raises(InvalidInput, match=message):
            service.add_repo(INTERNAL, url)
    with pytest.raises(InvalidInput, match="starts with '-'"):
        service.add_repo(INTERNAL, str(sample_source), name="-rf")
    assert service.all_repos(INTERNAL) == []
    # A file:// URL of a real repository is fine.
    added = service.add_repo(INTERNAL, f"file://{sample_source}", name="local/by-url")
    assert service.sync_repo(INTERNAL, added.name).ok


def test_git_refuses_transports_codewell_does_not_register(tmp_path: Path) -> None:
    # Defence in depth under the URL check: git itself is held to the registered transports. git's own default
    # already refuses `ext::`, but runs any other remote helper (`git-remote-<name>` on PATH) named in a URL.
    for url in ("ext::sh -c true", "somehelper::anything"):
        transport = url.partition("::")[0]
        with pytest.raises(gitmod.GitCommandError, match=f"transport '{transport}' not allowed"):
            gitmod.run_git(["ls-remote", url], cwd=tmp_path, timeout=30)


def test_removing_a_repo_deletes_its_mirror_and_tells_listeners(service: RepoService, sample: Repo) -> None:
    removed: list[str] = []
    service.add_removal_listener(lambda repo: removed.append(repo.name))
    service.remove_repo(INTERNAL, "local/sample")
    assert removed == ["local/sample"]
    assert not sample.mirror_path.exists()
    assert not sample.mirror_path.parent.exists()  # the empty `local/` parent went too
    assert service.mirror_root.is_dir()
    with pytest.raises(NotFound):
        service.get(INTERNAL, "local/sample")


def test_a_failing_listener_does_not_fail_the_sync(runtime: Runtime, service: RepoService, tmp_path: Path) -> None:
    def broken(_repo: Repo) -> None:
        raise RuntimeError("indexer bug")

    service.add_sync_listener(broken)
    repo = register_local_repo(runtime, make_repo(tmp_path / "s", {"a": "a\n"}), "local/s")
    assert repo.sync_state == "ready"


def _config(runtime: Runtime, repositories: list[dict[str, object]]) -> SiteConfig:
    config = SiteConfig.model_validate({"repositories": repositories})
    runtime.site_config.write(config)
    return config


def test_site_config_sources_are_reconciled_into_the_repos_table(
    runtime: Runtime, service: RepoService, tmp_path: Path
) -> None:
    root = tmp_path / "code"
    make_repo(root / "one", {"a": "a\n"})
    make_repo(root / "two", {"b": "b\n"})
    report = service.reconcile(
        _config(
            runtime,
            [
                {"kind": "local", "path": str(root), "prefix": "corp", "branches": ["dev"], "private": True},
                {"kind": "git", "urls": ["https://example.com/org/tool.git"], "syncIntervalSeconds": 60},
            ],
        )
    )
    assert sorted(report.added) == ["corp/one", "corp/two", "example.com/org/tool"]
    one = service.get(INTERNAL, "corp/one")
    assert one.private
    assert one.extra_branches == ("dev",)
    assert one.source == "config:local"
    assert service.get(INTERNAL, "example.com/org/tool").sync_interval_seconds == 60
    assert service.reconcile().added == []  # idempotent
    report = service.reconcile(
        _config(runtime, [{"kind": "local", "path": str(root), "prefix": "corp", "private": False}])
    )
    assert report.removed == ["example.com/org/tool"]
    assert sorted(report.updated) == ["corp/one", "corp/two"]
    assert not service.get(INTERNAL, "corp/one").private


def test_a_source_that_fails_to_list_removes_nothing(runtime: Runtime, service: RepoService, tmp_path: Path) -> None:
    service.reconcile(_config(runtime, [{"kind": "git", "urls": ["https://example.com/a/b.git"]}]))
    report = service.reconcile(
        _config(runtime, [{"kind": "git", "urls": ["https://example.com/"]}])  # no path: cannot be named
    )
    assert report.errors
    assert "repositories[0] (git)" in report.errors[0]
    assert report.removed == []
    assert service.get(INTERNAL, "example.com/a/b").name == "example.com/a/b"


def test_the_process_limiter_caps_concurrency_and_records_the_peak() -> None:
    limiter = gitmod.ProcessLimiter(2)
    inside = threading.Barrier(2, timeout=5)
    peak_ok = threading.Event()

    def work() -> None:
        with limiter:
            inside.wait()
            if limiter.active <= 2:
                peak_ok.set()

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert limiter.max_active == 2
    assert limiter.active == 0
    assert peak_ok.is_set()


def test_git_subprocess_timeouts_kill_the_process(tmp_path: Path) -> None:
    with pytest.raises(gitmod.GitCommandError, match="timed out"):
        # A shell alias that sleeps stands in for a hung fetch.
        gitmod.run_git(["-c", "alias.wait=!sleep 30", "wait"], cwd=tmp_path, timeout=0.5)
    assert gitmod.LIMITER.active == 0


def test_scheduled_sync_jobs_sync_due_repos_and_a_failure_does_not_block_the_others(
    runtime: Runtime, service: RepoService, tmp_path: Path
) -> None:
    good = make_repo(tmp_path / "good", {"a": "a\n"})
    _config(
        runtime,
        [
            {"kind": "git", "urls": [f"file://{tmp_path}/nothing-here.git"], "prefix": "bad"},
            {"kind": "local", "path": str(good), "prefix": "ok"},
        ],
    )
    runner = JobRunner(runtime, role="test")
    runtime.get(JobService).enqueue("repos.reconcile", "site", cause="config.changed")
    while runner.run_one():  # the reconcile queues both first syncs, in its transaction
        pass
    states = {r.name: r.sync_state for r in service.all_repos(INTERNAL)}
    bad_name = f"bad{tmp_path}/nothing-here"  # a prefix replaces the host, the path stays
    assert states == {bad_name: "failed", "ok/good": "ready"}
    failed = runtime.get(JobService).list_jobs(INTERNAL, state="failed")
    assert [j.kind for j in failed] == ["repos.sync"]
    assert failed[0].last_error is not None
    assert "nothing-here" in failed[0].last_error
    # Nothing is due now: the good one waits for its interval, the bad one for its back-off.
    assert service.due_repos() == []
    runtime.get(JobService).enqueue("repos.schedule", "site")
    while runner.run_one():
        pass
    assert runtime.get(JobService).list_jobs(INTERNAL, kind="repos.sync", state="queued") == []
    # A config change is picked up by the next reconcile.
    _config(runtime, [{"kind": "local", "path": str(good), "prefix": "ok"}])
    runtime.get(JobService).enqueue("repos.reconcile", "site", cause="config.changed")
    while runner.run_one():
        pass
    assert [r.name for r in service.all_repos(INTERNAL)] == ["ok/good"]
