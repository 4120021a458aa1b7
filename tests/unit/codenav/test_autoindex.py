"""Auto-indexing jobs (codenav/autoindex.py) with fake indexers, the size limit in site config, and their keys.

The fake indexers are shell scripts in the test's directory that behave like a broken scip-python would: fail,
hang, write garbage, write too much, or copy an index built with codenav's schema module. Jobs run synchronously
through `AutoIndexService.run` (what `codewell codeintel autoindex` calls) over real git repositories, real
`git archive` and real SQLite. The real scip-python run is in tests/functional/codenav/test_autoindex.py.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from codewell.cli.main import cli
from codewell.codenav import scip
from codewell.codenav.autoindex import AutoIndexService, detect_languages
from codewell.codenav.models import ScipUpload
from codewell.codenav.precise import AUTO, UPLOADED, PreciseService
from codewell.config import parse_site_config
from codewell.core.actors import INTERNAL, Actor
from codewell.core.errors import ConfigError, InvalidInput, PermissionDenied
from codewell.jobs.runner import JobRunner
from codewell.jobs.service import Job, JobService
from codewell.repos.service import RepoService, repo_resource
from codewell.runtime import Runtime
from tests.factories import actor_of_user, make_user, set_site_config
from tests.gitfixtures import commit, make_repo, register_local_repo
from tests.unit.codenav.test_scip_upload import HELPER, build_index

pytestmark = pytest.mark.database
KIND = "codenav.autoindex"

FILES = {
    "app/__init__.py": "",
    "app/util.py": "def helper(x):\n    return x * 2\n",
    "web/package.json": '{"name": "web"}\n',
}


def script(folder: Path, name: str, body: str) -> str:
    """An executable shell script; `$out` is the path after `--output` (both scip indexers take that flag)."""
    path = folder / name
    path.write_text(
        '#!/bin/sh\nout=""\nprev=""\nfor a in "$@"; do [ "$prev" = --output ] && out="$a"; prev="$a"; done\n' + body
    )
    path.chmod(0o755)
    return str(path)


def configure(runtime: Runtime, python: str | None, *, timeout: int = 60, **extra: object) -> None:
    indexers = {"python": python} if python else {}
    set_site_config(
        runtime,
        {"codeIntel.autoIndexing": {"enabled": False, "indexers": indexers, "timeoutSeconds": timeout}, **extra},
    )


@pytest.fixture
def admin(runtime: Runtime) -> Actor:
    return actor_of_user(runtime, make_user(runtime, "root", site_admin=True))


@pytest.fixture
def repo(runtime: Runtime, tmp_path: Path) -> str:
    register_local_repo(runtime, make_repo(tmp_path / "app", FILES), "acme/app")
    return "acme/app"


def root(runtime: Runtime) -> list[str]:
    """The CLI's global options for the test's data dir and database."""
    return ["--data-dir", str(runtime.settings.data_dir), "--database-url", runtime.settings.database_url]


def uploads(runtime: Runtime) -> list[tuple[str, str]]:
    with runtime.db.session() as session:
        return [(t, s) for t, s in session.execute(select(ScipUpload.tool, ScipUpload.source))]


# --- site config ---------------------------------------------------------------------------------------------


def test_defaults_and_bad_values_name_the_key() -> None:
    config = parse_site_config("{}")
    assert config.code_intel_auto_indexing.enabled is False
    assert config.code_intel_max_upload_bytes == scip.MAX_INDEX_BYTES == 512 << 20
    cases = {
        '{"codeIntel.autoIndexing": {"enabled": true}}': "codeIntel.autoIndexing: enabled needs at least one indexer",
        '{"codeIntel.autoIndexing": {"indexers": {"python": "scip-python"}}}': (
            "codeIntel.autoIndexing.indexers.python: must be the absolute path"
        ),
        '{"codeIntel.autoIndexing": {"indexers": {"go": "/bin/true"}}}': "codeIntel.autoIndexing.indexers.go: unknown",
        '{"codeIntel.autoIndexing": {"timeoutSeconds": 0}}': "codeIntel.autoIndexing.timeoutSeconds:",
        '{"codeIntel.maxUploadBytes": 100}': "codeIntel.maxUploadBytes: Input should be greater than or equal to 1024",
        '{"codeIntel.maxUploadBytes": 4294967296}': "codeIntel.maxUploadBytes: Input should be less than or equal",
    }
    for text, expected in cases.items():
        with pytest.raises(ConfigError) as info:
            parse_site_config(text)
        assert expected in info.value.message, text


def test_languages_are_detected_from_paths() -> None:
    assert detect_languages(["setup.py", "README.md"]) == {"python"}
    assert detect_languages(["web/tsconfig.json", "web/src/a.ts"]) == {"typescript"}
    assert detect_languages(["package.json", "index.js"]) == {"typescript"}
    # JavaScript without a project file, a project file without sources, and vendored packages: nothing.
    assert detect_languages(["index.js", "web/package.json", "node_modules/x/y.py", "a/node_modules/z.py"]) == {
        "typescript"
    }
    assert detect_languages(["index.js", "docs/a.md"]) == set()
    assert detect_languages(["package.json", "node_modules/x/index.js"]) == set()


# --- the size limit ------------------------------------------------------------------------------------------


def test_max_upload_bytes_refuses_a_bigger_upload(runtime: Runtime, admin: Actor, repo: str, tmp_path: Path) -> None:
    index = build_index({"app/util.py": [([0, 4, 10], HELPER, scip.DEFINITION, [])]})
    padded = build_index({f"app/f{i}.py": [([0, 4, 10], HELPER, scip.DEFINITION, [])] for i in range(40)})
    assert len(index) < 1024 < len(padded)
    configure(runtime, None, **{"codeIntel.maxUploadBytes": 1024})
    precise = runtime.get(PreciseService)
    with pytest.raises(InvalidInput, match=r"is \d\.\d+ KB, over the 1 KB limit of one upload") as info:
        precise.upload(admin, repo, "main", padded)
    assert "codeIntel.maxUploadBytes" in (info.value.hint or "")
    assert uploads(runtime) == []
    assert precise.upload(admin, repo, "main", index).documents == 1

    big = tmp_path / "big.scip"
    big.write_bytes(padded)
    result = CliRunner().invoke(
        cli,
        [*root(runtime), "codeintel", "upload", str(big), "--repo", repo, "--commit", "main"],
    )
    assert result.exit_code == 1
    assert "over the 1 KB limit of one SCIP upload" in result.stderr
    assert "codeIntel.maxUploadBytes" in result.stderr
    assert uploads(runtime) == [("scip-test 9.9", UPLOADED)]


# --- jobs with fake indexers ---------------------------------------------------------------------------------


def test_a_job_stores_the_index_as_auto_indexed(runtime: Runtime, admin: Actor, tmp_path: Path) -> None:
    work = make_repo(tmp_path / "app", FILES)
    # Links: one inside the tree (kept), two leaving it (left out of the job's directory, not followed).
    for name, target in (("inner", "app/util.py"), ("escape", "/etc/hosts"), ("up", "../../../../etc/hosts")):
        (work / name).symlink_to(target)
    commit(work, message="links")
    repo = register_local_repo(runtime, work, "acme/app").name
    built = tmp_path / "built.scip"
    built.write_bytes(build_index({"app/util.py": [([0, 4, 10], HELPER, scip.DEFINITION, [0, 0, 1, 16])]}))
    checks = "[ -f app/util.py ] && [ -L inner ] && [ ! -e escape ] && [ ! -L escape ] && [ ! -L up ] || exit 9\n"
    configure(runtime, script(tmp_path, "ok.sh", f'{checks}cat {built} > "$out"\n'))
    result = runtime.get(AutoIndexService).run(admin, repo)
    assert result.ok, (result.reason, result.stderr_tail)
    assert result.languages == ["python"]
    assert result.summary is not None
    assert result.summary.documents == 1
    assert uploads(runtime) == [("scip-test 9.9", AUTO)]
    (info,) = runtime.get(PreciseService).uploads(INTERNAL, repo)
    assert (info.source, info.commit) == (AUTO, runtime.get(RepoService).resolve(INTERNAL, repo).commit)
    # The job's directory is gone; nothing else is left in the work root.
    assert list(runtime.get(AutoIndexService).work_root.iterdir()) == []


def test_two_languages_make_one_upload(runtime: Runtime, admin: Actor, tmp_path: Path) -> None:
    register_local_repo(
        runtime, make_repo(tmp_path / "mixed", {**FILES, "web/index.js": "export const a = 1;\n"}), "acme/mixed"
    )
    python = tmp_path / "py.scip"
    python.write_bytes(build_index({"app/util.py": [([0, 4, 10], HELPER, scip.DEFINITION, [])]}, tool="fake-py"))
    js = tmp_path / "js.scip"
    js.write_bytes(build_index({"web/index.js": [([0, 13, 14], "local 1", scip.DEFINITION, [])]}, tool="fake-ts"))
    set_site_config(
        runtime,
        {
            "codeIntel.autoIndexing": {
                "indexers": {
                    "python": script(tmp_path, "py.sh", f'cat {python} > "$out"\n'),
                    # --infer-tsconfig: the commit has a package.json but no tsconfig.json at its root.
                    "typescript": script(
                        tmp_path, "ts.sh", f'echo "$@" | grep -q -- --infer-tsconfig || exit 7\ncat {js} > "$out"\n'
                    ),
                }
            }
        },
    )
    result = runtime.get(AutoIndexService).run(admin, "acme/mixed")
    assert result.ok, (result.reason, result.stderr_tail)
    assert result.languages == ["python", "typescript"]
    assert result.summary is not None
    assert (result.summary.documents, result.summary.tool) == (2, "fake-py 9.9 + fake-ts 9.9")


def test_a_failing_indexer_stores_nothing_and_loses_nothing(
    runtime: Runtime, admin: Actor, repo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEWELL_TEST_SECRET", "hunter2")
    precise = runtime.get(PreciseService)
    precise.upload(admin, repo, "main", build_index({"app/util.py": [([0, 4, 10], HELPER, scip.DEFINITION, [])]}))
    lines = "".join(f"echo line {i} >&2\n" for i in range(30))
    configure(runtime, script(tmp_path, "fail.sh", f"{lines}exit 3\n"))
    autoindex = runtime.get(AutoIndexService)
    result = autoindex.run(admin, repo)
    assert (result.ok, result.exit_code, result.reason) == (False, 3, "the python indexer exited with status 3")
    assert result.stderr_tail.splitlines() == [f"line {i}" for i in range(10, 30)]  # the last 20 lines
    assert uploads(runtime) == [("scip-test 9.9", UPLOADED)]  # the earlier upload stays

    # The environment the indexer saw: no codewell setting or secret of ours; the job's paths shortened.
    configure(runtime, script(tmp_path, "env.sh", 'env >&2\necho "error in $PWD/app/util.py" >&2\nexit 4\n'))
    seen = autoindex.run(admin, repo)
    names = {line.split("=", 1)[0] for line in seen.stderr_tail.splitlines() if "=" in line}
    assert {"PATH", "HOME", "LANG"} <= names <= {"PATH", "HOME", "LANG", "PWD", "OLDPWD", "SHLVL", "_"}
    assert "HOME=<job>" in seen.stderr_tail
    assert "hunter2" not in seen.stderr_tail
    assert seen.stderr_tail.endswith("error in ./app/util.py")

    # Status: only the last failure of the commit is kept.
    (failure,) = autoindex.failures(INTERNAL, repo)
    assert (failure.exit_code, failure.reason) == (4, "the python indexer exited with status 4")
    listing = CliRunner().invoke(
        cli,
        [*root(runtime), "codeintel", "list", "--repo", repo],
    )
    assert listing.exit_code == 0, listing.stderr
    assert "  uploaded  1 documents  scip-test 9.9" in listing.stdout
    assert "auto-indexing failures" in listing.stdout
    assert "  exit 4  the python indexer exited with status 4" in listing.stdout
    assert "    | error in ./app/util.py" in listing.stdout
    assert uploads(runtime) == [("scip-test 9.9", UPLOADED)]


def test_a_hanging_indexer_is_killed_with_its_children(
    runtime: Runtime, admin: Actor, repo: str, tmp_path: Path
) -> None:
    pidfile = tmp_path / "child.pid"
    configure(
        runtime, script(tmp_path, "hang.sh", f"sleep 60 &\necho $! > {pidfile}\necho started >&2\nwait\n"), timeout=1
    )
    started = time.monotonic()
    result = runtime.get(AutoIndexService).run(admin, repo)
    assert time.monotonic() - started < 15
    assert (result.ok, result.exit_code) == (False, None)
    assert "timed out after 1 s (codeIntel.autoIndexing.timeoutSeconds)" in result.reason
    assert result.stderr_tail == "started"
    child = int(pidfile.read_text())
    # The background `sleep` was in the indexer's process group: gone (or a zombie waiting for its reaper).
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            break
        if state == "Z":
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the indexer's child {child} still runs")
    assert uploads(runtime) == []


def test_garbage_and_oversized_indexes_are_refused(runtime: Runtime, admin: Actor, repo: str, tmp_path: Path) -> None:
    autoindex = runtime.get(AutoIndexService)
    configure(runtime, script(tmp_path, "garbage.sh", "printf '\\010garbage\\377' > \"$out\"\n"))
    result = autoindex.run(admin, repo)
    assert not result.ok
    assert result.reason.startswith("the index was refused: the upload is not a SCIP index")

    configure(runtime, script(tmp_path, "nothing.sh", "exit 0\n"))
    assert autoindex.run(admin, repo).reason == "the python indexer exited with status 0 but wrote no index"

    # Every file the indexer writes is capped one byte over codeIntel.maxUploadBytes.
    configure(
        runtime,
        script(tmp_path, "big.sh", 'head -c 5000 /dev/zero > "$out"\nwc -c < "$out" >&2\nexit 0\n'),
        **{"codeIntel.maxUploadBytes": 1024},
    )
    big = autoindex.run(admin, repo)
    assert "over the 1 KB limit (codeIntel.maxUploadBytes)" in big.reason
    # The write past the cap killed `head` (SIGXFSZ): nothing bigger reached the disk.
    assert big.stderr_tail.splitlines()[-1] == "1025"
    assert uploads(runtime) == []

    missing = str(tmp_path / "no-such-indexer")
    configure(runtime, missing)
    assert autoindex.run(admin, repo).reason == f"the python indexer {missing} is not an executable file"


def enqueue(runtime: Runtime, repo: str) -> tuple[str, str]:
    """Queue the `codenav.autoindex` job of `repo`'s main branch (what `search.indexed` does); (resource, commit)."""
    found = runtime.get(RepoService).get(INTERNAL, repo)
    commit = runtime.get(RepoService).resolve(INTERNAL, repo).commit
    resource = repo_resource(found.id)
    runtime.get(JobService).enqueue(KIND, resource, {"repo_id": found.id, "commits": {"main": commit}})
    return resource, commit


def run_job(runtime: Runtime, repo: str) -> Job:
    """Queue the repository's auto-indexing job and run it in this thread, as any worker would; the job after."""
    enqueue(runtime, repo)
    assert JobRunner(runtime, role="test", kinds=frozenset({KIND})).run_one()
    return last_job(runtime)


def last_job(runtime: Runtime) -> Job:
    return runtime.get(JobService).list_jobs(INTERNAL, kind=KIND, limit=1)[0]


def test_the_job_indexes_and_failures_are_not_run_again_until_the_indexers_change(
    runtime: Runtime, admin: Actor, repo: str, tmp_path: Path
) -> None:
    # No thread and no in-process queue: the durable job does the work, in whichever process claims it.
    assert not hasattr(AutoIndexService, "wait_idle")
    built = tmp_path / "built.scip"
    built.write_bytes(build_index({"app/util.py": [([0, 4, 10], HELPER, scip.DEFINITION, [])]}))
    failing = script(tmp_path, "fail.sh", "exit 3\n")
    set_site_config(runtime, {"codeIntel.autoIndexing": {"enabled": True, "indexers": {"python": failing}}})
    first_job = run_job(runtime, repo)
    commit = runtime.get(RepoService).resolve(INTERNAL, repo).commit
    assert first_job.state == "succeeded"  # the indexer failed, the job did its work: no retry of a broken indexer
    assert first_job.result == {"indexed": [], "failed": {commit: "the python indexer exited with status 3"}}
    autoindex = runtime.get(AutoIndexService)
    (first,) = autoindex.failures(INTERNAL, repo)
    assert first.indexers == f"python={failing}"
    again = run_job(runtime, repo)
    assert again.result == {"indexed": [], "failed": {}}  # not run again
    assert autoindex.failures(INTERNAL, repo) == [first]

    fixed = script(tmp_path, "fixed.sh", "exit 4\n")
    set_site_config(runtime, {"codeIntel.autoIndexing": {"enabled": True, "indexers": {"python": fixed}}})
    run_job(runtime, repo)
    (second,) = autoindex.failures(INTERNAL, repo)
    assert (second.indexers, second.exit_code) == (f"python={fixed}", 4)

    working = script(tmp_path, "ok.sh", f'cat {built} > "$out"\n')
    set_site_config(runtime, {"codeIntel.autoIndexing": {"enabled": True, "indexers": {"python": working}}})
    assert run_job(runtime, repo).result == {"indexed": [commit], "failed": {}}
    assert uploads(runtime) == [("scip-test 9.9", AUTO)]
    assert autoindex.failures(INTERNAL, repo) == []  # a success clears the commit's failure
    assert run_job(runtime, repo).result == {"indexed": [], "failed": {}}  # it has an upload now


def test_nothing_is_indexed_while_auto_indexing_is_disabled(runtime: Runtime, repo: str, tmp_path: Path) -> None:
    configure(runtime, script(tmp_path, "never.sh", f"touch {tmp_path / 'ran'}\n"))  # indexer set, not enabled
    assert run_job(runtime, repo).result == {"indexed": [], "failed": {}}
    assert not os.path.exists(tmp_path / "ran")


def test_only_site_admins_run_jobs(runtime: Runtime, repo: str, tmp_path: Path) -> None:
    reader = actor_of_user(runtime, make_user(runtime, "reader"))
    configure(runtime, script(tmp_path, "never.sh", f"touch {tmp_path / 'ran'}\n"))
    with pytest.raises(PermissionDenied):
        runtime.get(AutoIndexService).run(reader, repo)
    configure(runtime, None)
    with pytest.raises(InvalidInput, match="no SCIP indexer is configured"):
        runtime.get(AutoIndexService).run(INTERNAL, repo)
    assert not os.path.exists(tmp_path / "ran")


def test_cli_autoindex_runs_one_job(runtime: Runtime, repo: str, tmp_path: Path) -> None:
    built = tmp_path / "built.scip"
    built.write_bytes(build_index({"app/util.py": [([0, 4, 10], HELPER, scip.DEFINITION, [])]}))
    configure(runtime, script(tmp_path, "ok.sh", f'cat {built} > "$out"\n'))
    ok = CliRunner().invoke(cli, [*root(runtime), "codeintel", "autoindex", "--repo", repo, "--commit", "main"])
    assert ok.exit_code == 0, ok.stderr
    assert "auto-indexed (python), stored 1 documents" in ok.stdout

    configure(runtime, script(tmp_path, "fail.sh", "echo 'cannot parse app/util.py' >&2\nexit 2\n"))
    bad = CliRunner().invoke(cli, [*root(runtime), "codeintel", "autoindex", "--repo", repo])
    assert bad.exit_code == 1
    assert "    | cannot parse app/util.py" in bad.stderr
    assert "the python indexer exited with status 2; nothing was stored" in bad.stderr
    assert uploads(runtime) == [("scip-test 9.9", AUTO)]
    missing = CliRunner().invoke(cli, [*root(runtime), "codeintel", "autoindex", "--repo", "acme/none"])
    assert missing.exit_code == 1
    assert "not found" in missing.stderr


def start_hanging_job(runtime: Runtime, repo: str, tmp_path: Path) -> threading.Thread:
    """A worker thread running the repository's job with an indexer that hangs; returns once it runs."""
    started = tmp_path / "started"
    hang = script(tmp_path, "hang.sh", f"touch {started}\nsleep 60\n")
    set_site_config(
        runtime, {"codeIntel.autoIndexing": {"enabled": True, "indexers": {"python": hang}, "timeoutSeconds": 600}}
    )
    enqueue(runtime, repo)
    worker = threading.Thread(target=JobRunner(runtime, role="test", kinds=frozenset({KIND})).run_one, daemon=True)
    worker.start()
    deadline = time.monotonic() + 30
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert started.exists()
    return worker


def test_closing_kills_a_running_job_which_runs_again_later(runtime: Runtime, repo: str, tmp_path: Path) -> None:
    worker = start_hanging_job(runtime, repo, tmp_path)
    begun = time.monotonic()
    runtime.get(AutoIndexService).close()  # what runtime.close() calls at shutdown
    worker.join(5)
    assert not worker.is_alive()
    assert time.monotonic() - begun < 5
    assert runtime.get(AutoIndexService).failures(INTERNAL, repo) == []  # a shutdown is no failure of the indexer
    assert uploads(runtime) == []
    job = last_job(runtime)
    # Not lost with the process (the old in-memory queue lost it): queued again for any worker.
    assert (job.state, job.attempts) == ("queued", 1)
    assert job.last_error is not None
    assert "interrupted by a shutdown" in job.last_error


def test_an_operator_cancel_kills_the_running_indexer(
    runtime: Runtime, admin: Actor, repo: str, tmp_path: Path
) -> None:
    worker = start_hanging_job(runtime, repo, tmp_path)
    begun = time.monotonic()
    runtime.get(JobService).cancel(admin, last_job(runtime).id)
    worker.join(15)  # the lease keeper notices the cancel within seconds, the indexer is asked twice a second
    assert not worker.is_alive()
    assert time.monotonic() - begun < 15
    assert last_job(runtime).state == "cancelled"
    assert runtime.get(AutoIndexService).failures(INTERNAL, repo) == []
    assert uploads(runtime) == []
