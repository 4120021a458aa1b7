"""Auto-indexing: run a SCIP indexer (scip-python, scip-typescript) on each newly indexed branch commit.

Off unless site config `codeIntel.autoIndexing.enabled` says so, and only with indexers an admin installed
(`codeIntel.autoIndexing.indexers`: absolute paths of the executables; codewell downloads nothing). After search
indexes a repository (`search.indexed`), the durable job `codenav.autoindex` of that repository (codenav/jobs.py;
run by `codewell serve` or any `codewell worker`, at most one per repository at a time, and queued work survives
restarts) indexes each branch commit without an upload, and without a failure under the same indexers, one
after the other; within a process one indexer runs at a time, because an indexer can take minutes.

A job, in a fresh temporary directory:
- `git archive` of the commit, extracted there (never the mirror itself: no hooks, no work tree of ours;
  members that would land outside the directory, links out of it and device files are left out);
- the languages the tree holds (Python: any `.py`; TypeScript/JavaScript: a `tsconfig.json` or `package.json`
  with `.ts`/`.js` sources) that have an indexer configured;
- each indexer in its own process group, with the configured timeout (past it the whole group is killed),
  an environment of only PATH, HOME (the job's directory) and LANG (no codewell setting or secret reaches it),
  niced, with every file it writes capped at `codeIntel.maxUploadBytes` (RLIMIT_FSIZE), and only the tail of
  its output kept;
- the `index.scip` it wrote is stored through PreciseService.upload, the path CLI and REST uploads take (parsed
  whole, then one transaction replacing the commit's previous upload), recorded as `auto`.
A failing, hanging or garbage-writing indexer stores nothing and removes nothing; the job records the failure
(exit code, reason, the last lines of stderr with the job's paths replaced) for `codewell codeintel list`.

We run no code from the repository: the indexers analyse it statically, scip-python gets an empty package
environment (so it does not ask pip), and scip-typescript neither installs packages nor runs scripts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Self

import pygit2
from sqlalchemy import delete, insert, select

from codewell.authz import Action, ensure
from codewell.codenav import scip
from codewell.codenav.models import AutoIndexFailure
from codewell.codenav.precise import AUTO, PreciseService, UploadSummary, format_size
from codewell.config.schema import AutoIndexingConfig
from codewell.core.actors import INTERNAL, Actor
from codewell.core.errors import CodewellError, InvalidInput, NotFound
from codewell.repos.git import GitCommandError, run_git, walk_blobs
from codewell.repos.service import Repo, RepoService

if TYPE_CHECKING:
    from codewell.runtime import Runtime

__all__ = ["AutoIndexService", "FailureInfo", "Interrupted", "JobResult", "detect_languages"]

log = logging.getLogger(__name__)

LANGUAGES = ("python", "typescript")
# What is kept of an indexer's stdout and stderr while it runs (bounded memory however much it prints) ...
_TAIL_BYTES = 64 << 10
# ... and what a failure records of it.
TAIL_LINES = 20
TAIL_CHARS = 4000
# How often a running indexer's job is asked whether it was cancelled.
CANCEL_POLL_SECONDS = 0.5
_TS_SOURCES = (".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|[\x00-\x08\x0b-\x1f\x7f]")
# Sets the limits, then becomes the indexer (same pid, so the process group we kill is the indexer's).
# A fresh interpreter instead of `preexec_fn`, which is unsafe in a process with threads. Python ignores
# SIGPIPE and SIGXFSZ, and ignored signals survive exec: restored, so a write past the cap kills the indexer.
_LIMITED_EXEC = (
    "import os, resource, signal, sys\n"
    "n = int(sys.argv[1])\n"
    "resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))\n"
    "signal.signal(signal.SIGXFSZ, signal.SIG_DFL)\n"
    "signal.signal(signal.SIGPIPE, signal.SIG_DFL)\n"
    "os.nice(10)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


@dataclass(frozen=True, slots=True)
class JobResult:
    repo: str
    commit: str
    languages: list[str]  # the languages indexed (empty: nothing in the commit for the configured indexers)
    summary: UploadSummary | None  # the stored upload, None when the job failed or had nothing to index
    reason: str  # why it failed or was skipped, "" when stored
    exit_code: int | None
    stderr_tail: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.summary is not None


@dataclass(frozen=True, slots=True)
class FailureInfo:
    commit: str
    indexers: str
    exit_code: int | None
    reason: str
    stderr_tail: str
    failed_at: datetime


class _Failed(Exception):
    def __init__(self, reason: str, exit_code: int | None = None, tail: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.exit_code = exit_code
        self.tail = tail


class _Cancelled(Exception):
    """The job was cancelled or the service is closing: the indexer was killed; nothing is recorded."""


class Interrupted(CodewellError):
    """The process is shutting down: the job's indexer was killed and nothing was recorded. Raised out of the
    job handler so that the jobs layer queues the job again (another process, or this one after a restart,
    indexes the commit) instead of marking it done."""


def detect_languages(paths: Iterable[str]) -> set[str]:
    """The auto-indexable languages of a commit's file paths (vendored node_modules left out)."""
    python = ts_sources = ts_project = False
    for path in paths:
        if path.startswith("node_modules/") or "/node_modules/" in path:
            continue
        name = path.rsplit("/", 1)[-1]
        python = python or name.endswith(".py")
        ts_sources = ts_sources or name.endswith(_TS_SOURCES)
        ts_project = ts_project or name in ("tsconfig.json", "package.json")
        if python and ts_sources and ts_project:
            break
    found = {"python"} if python else set()
    if ts_sources and ts_project:
        found.add("typescript")
    return found


def _tree_paths(mirror: Path, commit: str) -> list[str]:
    """Every blob path of `commit` (names only, no contents read)."""
    repository = pygit2.Repository(str(mirror))
    return [path for path, _oid, _mode in walk_blobs(repository, repository[commit].peel(pygit2.Tree))]


def _safe_member(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    # tarfile's `data` filter refuses absolute paths, `..`, links leaving the directory and special files; such
    # a member is left out rather than failing the job (a repository may hold a symlink to /etc/hosts).
    try:
        return tarfile.data_filter(member, dest)
    except tarfile.FilterError:
        return None


def _tail(chunks: deque[bytes]) -> str:
    return b"".join(chunks).decode("utf-8", "replace")


def _drain(stream: IO[bytes] | None, chunks: deque[bytes]) -> None:
    """Read a pipe to its end keeping only its last _TAIL_BYTES (a chatty indexer never fills memory)."""
    if stream is None:
        return
    kept = 0
    for chunk in iter(lambda: stream.read(8192), b""):
        chunks.append(chunk)
        kept += len(chunk)
        while kept - len(chunks[0]) >= _TAIL_BYTES:
            kept -= len(chunks.popleft())


def _indexers_key(config: AutoIndexingConfig) -> str:
    return ";".join(
        f"{language}={command}" for language in LANGUAGES if (command := getattr(config.indexers, language)) is not None
    )


class AutoIndexService:
    """Auto-indexing: which commits a `codenav.autoindex` job indexes, and running one indexer job."""

    def __init__(self, runtime: Runtime, work_root: Path) -> None:
        self.runtime = runtime
        self.work_root = work_root
        self._cond = threading.Condition()
        self._closing = False
        self._process: subprocess.Popen[bytes] | None = None
        # One indexer per process at a time: jobs of every repository and `codewell codeintel autoindex` alike.
        self._run_lock = threading.Lock()

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime, runtime.settings.data_dir / "codenav-autoindex")

    @property
    def repos(self) -> RepoService:
        return self.runtime.get(RepoService)

    @property
    def precise(self) -> PreciseService:
        return self.runtime.get(PreciseService)

    @property
    def config(self) -> AutoIndexingConfig:
        return self.runtime.config.code_intel_auto_indexing

    # --- the job ---------------------------------------------------------------------------------------

    def due(self, repo: Repo, branches: Mapping[str, str]) -> list[str]:
        """The branch commits to index (when auto-indexing is on): no upload yet, no failure under the same
        indexers. Two indexed queries per commit."""
        config = self.config
        if not config.enabled:
            return []
        key = _indexers_key(config)
        return [
            commit
            for commit in sorted(set(branches.values()))
            if not self.precise.has_upload(repo, commit) and not self._failed_with(repo.id, commit, key)
        ]

    def index_due(
        self,
        repo: Repo,
        branches: Mapping[str, str],
        *,
        cancelled: Callable[[], bool] = lambda: False,
        progress: Callable[[int, int, str], None] | None = None,
    ) -> list[JobResult]:
        """The work of a `codenav.autoindex` job: index each due commit of `branches`, one after the other.

        Stops early when `cancelled()` turns true (an operator's cancel: the running indexer is killed, nothing
        is recorded). Raises `Interrupted` when the service closes meanwhile (shutdown)."""
        commits = self.due(repo, branches)
        results: list[JobResult] = []
        for done, commit in enumerate(commits):
            if cancelled():
                break
            if progress is not None:
                progress(done, len(commits), f"indexing {commit[:12]}")
            result = self._queued_job(repo, commit, cancelled)
            if result is not None:
                results.append(result)
        return results

    def _queued_job(self, repo: Repo, commit: str, cancelled: Callable[[], bool]) -> JobResult | None:
        config = self.config
        # The situation may have changed while the job waited: auto-indexing turned off, a CI upload arrived.
        if not config.enabled or self.precise.has_upload(repo, commit):
            return None
        try:
            current = self.repos.get(INTERNAL, repo.name)
        except NotFound:
            return None  # removed meanwhile
        if current.id != repo.id:
            return None
        try:
            result = self._run(current, commit, config, cancelled)
        except NotFound:
            return None  # the repository or commit went away while the job ran
        if result.reason == "cancelled" and self._closing:
            raise Interrupted(
                "auto-indexing was interrupted by a shutdown",
                hint="the job runs again (here after a restart, or elsewhere)",
            )
        if result.ok:
            log.info("auto-indexed", extra={"repo": repo.name, "commit": commit, "seconds": round(result.seconds, 2)})
        elif result.languages and result.reason != "cancelled":
            log.warning(
                "auto-indexing failed: %s",
                result.reason,
                extra={"repo": repo.name, "commit": commit, "exit_code": result.exit_code},
            )
        return result

    def close(self) -> None:
        """Shutting down (runtime.close): a running indexer is killed and no other starts; nothing is recorded."""
        with self._cond:
            self._closing = True
            process = self._process
        if process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)

    def drop(self, repo: Repo) -> None:
        """After a repository's removal: forget its failures (its queued jobs are cancelled by the jobs layer; a
        running one ends on its own: its upload finds the repository gone)."""
        with self.runtime.db.session() as session:
            session.execute(delete(AutoIndexFailure).where(AutoIndexFailure.repo_id == repo.id))

    # --- status ----------------------------------------------------------------------------------------

    def _failed_with(self, repo_id: int, commit: str, indexers: str) -> bool:
        with self.runtime.db.session() as session:
            found = session.execute(
                select(AutoIndexFailure.id).where(
                    AutoIndexFailure.repo_id == repo_id,
                    AutoIndexFailure.commit == commit,
                    AutoIndexFailure.indexers == indexers,
                )
            ).first()
        return found is not None

    def failures(self, actor: Actor, repo: str) -> list[FailureInfo]:
        """The last failed job of each commit of a readable repository, newest first."""
        found = self.repos.get(actor, repo)
        with self.runtime.db.session() as session:
            rows = session.execute(
                select(
                    AutoIndexFailure.commit,
                    AutoIndexFailure.indexers,
                    AutoIndexFailure.exit_code,
                    AutoIndexFailure.reason,
                    AutoIndexFailure.stderr_tail,
                    AutoIndexFailure.failed_at,
                )
                .where(AutoIndexFailure.repo_id == found.id)
                .order_by(AutoIndexFailure.failed_at.desc(), AutoIndexFailure.id.desc())
            ).all()
        return [FailureInfo(*row) for row in rows]

    def _record(self, repo: Repo, commit: str, indexers: str, failure: _Failed | None) -> None:
        """Keep the commit's last failure (replacing an older one), or clear it after a success."""
        with self.runtime.db.session() as session:
            same = (AutoIndexFailure.repo_id == repo.id, AutoIndexFailure.commit == commit)
            session.execute(delete(AutoIndexFailure).where(*same))
            if failure is not None:
                session.execute(
                    insert(AutoIndexFailure).values(
                        repo_id=repo.id,
                        commit=commit,
                        indexers=indexers,
                        exit_code=failure.exit_code,
                        reason=failure.reason[:500],
                        stderr_tail=failure.tail,
                        failed_at=datetime.now(UTC),
                    )
                )

    # --- jobs ------------------------------------------------------------------------------------------

    def run(self, actor: Actor, repo: str, commit: str | None = None) -> JobResult:
        """Run one job now, in this thread (`codewell codeintel autoindex`): site admins only.

        Unlike queued jobs it runs whether or not auto-indexing is enabled, and re-indexes a commit that already
        has an upload (replacing it on success). The default commit is the default branch's.
        """
        ensure(actor, Action.REPOS_MANAGE)
        config = self.config
        if not _indexers_key(config):
            raise InvalidInput(
                "no SCIP indexer is configured",
                hint="set codeIntel.autoIndexing.indexers.python (the path of scip-python) or "
                ".typescript (scip-typescript) in the site config",
            )
        resolved = self.repos.resolve(actor, repo, commit)
        return self._run(resolved.repo, resolved.commit, config, lambda: False)

    def _run(self, repo: Repo, commit: str, config: AutoIndexingConfig, cancelled: Callable[[], bool]) -> JobResult:
        started = time.monotonic()
        key = _indexers_key(config)
        languages: list[str] = []
        with self._run_lock:
            self.work_root.mkdir(parents=True, exist_ok=True)
            job = Path(tempfile.mkdtemp(prefix="job-", dir=self.work_root))
            try:
                configured = {lang for lang in LANGUAGES if getattr(config.indexers, lang) is not None}
                languages = sorted(detect_languages(_tree_paths(repo.mirror_path, commit)) & configured)
                if not languages:
                    reason = "nothing to index: no Python or TypeScript/JavaScript project for the configured indexers"
                    return JobResult(repo.name, commit, [], None, reason, None, "", time.monotonic() - started)
                source = job / "src"
                self._export(repo.mirror_path, commit, job, source, config.timeout_seconds)
                outputs = [
                    self._index(
                        language, getattr(config.indexers, language), repo, commit, job, source, config, cancelled
                    )
                    for language in languages
                ]
                data = self._combine(outputs)
                try:
                    summary = self.precise.upload(INTERNAL, repo.name, commit, data, source=AUTO)
                except InvalidInput as exc:
                    raise _Failed(f"the index was refused: {exc.message}", 0) from None
            except _Cancelled:
                return JobResult(repo.name, commit, languages, None, "cancelled", None, "", time.monotonic() - started)
            except _Failed as failure:
                self._record(repo, commit, key, failure)
                return JobResult(
                    repo.name,
                    commit,
                    languages,
                    None,
                    failure.reason,
                    failure.exit_code,
                    failure.tail,
                    time.monotonic() - started,
                )
            finally:
                shutil.rmtree(job, ignore_errors=True)
        self._record(repo, commit, key, None)
        return JobResult(repo.name, commit, languages, summary, "", 0, "", time.monotonic() - started)

    def _export(self, mirror: Path, commit: str, job: Path, source: Path, timeout: int) -> None:
        """`git archive` of `commit` (through repos' git runner: its own process group, killed at the timeout),
        extracted into `source`."""
        archive = job / "src.tar"
        try:
            run_git(
                ["archive", "--format=tar", f"--output={archive}", commit],
                cwd=mirror,
                env={"HOME": str(job), "GIT_CONFIG_GLOBAL": os.devnull},
                timeout=timeout,
                redact=lambda text: text.replace(str(mirror), "<mirror>"),
            )
        except GitCommandError as exc:
            if exc.returncode is None:  # timed out
                raise _Failed(exc.message) from None
            raise _Failed("git archive failed", exc.returncode, exc.message[-TAIL_CHARS:]) from None
        source.mkdir()
        with tarfile.open(archive) as tar:
            tar.extractall(source, filter=_safe_member)
        archive.unlink()

    def _command(
        self, language: str, executable: str, repo: Repo, commit: str, job: Path, source: Path, output: Path
    ) -> list[str]:
        if language == "python":
            # An empty package environment: otherwise scip-python runs `pip` to list installed packages.
            environment = job / "environment.json"
            environment.write_text("[]")
            project = re.sub(r"[^A-Za-z0-9._-]+", "-", repo.name).strip("-") or "project"
            return [
                executable,
                "index",
                "--cwd",
                str(source),
                "--project-name",
                project,
                "--project-version",
                commit[:12],
                "--environment",
                str(environment),
                "--output",
                str(output),
                "--quiet",
            ]
        command = [executable, "index", "--cwd", str(source), "--output", str(output), "--no-progress-bar"]
        if not (source / "tsconfig.json").is_file():
            command.append("--infer-tsconfig")
        return command

    def _index(
        self,
        language: str,
        executable: str,
        repo: Repo,
        commit: str,
        job: Path,
        source: Path,
        config: AutoIndexingConfig,
        cancelled: Callable[[], bool],
    ) -> bytes:
        """Run one indexer and return the index it wrote; _Failed otherwise."""
        if not (os.path.isfile(executable) and os.access(executable, os.X_OK)):
            raise _Failed(f"the {language} indexer {executable} is not an executable file")
        output = job / f"index-{language}.scip"
        limit = self.precise.max_bytes
        command = self._command(language, executable, repo, commit, job, source, output)
        # The file cap one byte over the limit: an index of exactly the limit is still accepted.
        code, timed_out, text = self._execute(
            [sys.executable, "-I", "-S", "-c", _LIMITED_EXEC, str(limit + 1), *command],
            job,
            source,
            config.timeout_seconds,
            cancelled,
        )
        tail = self._scrub(text, job, source)
        if timed_out:
            raise _Failed(
                f"the {language} indexer timed out after {config.timeout_seconds} s "
                "(codeIntel.autoIndexing.timeoutSeconds) and was killed",
                None,
                tail,
            )
        if code == -signal.SIGXFSZ:
            raise _Failed(
                f"the {language} indexer wrote a file over the {format_size(limit)} limit "
                "(codeIntel.maxUploadBytes) and was stopped",
                code,
                tail,
            )
        if code != 0:
            how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
            raise _Failed(f"the {language} indexer {how}", code, tail)
        if not output.is_file():
            raise _Failed(f"the {language} indexer exited with status 0 but wrote no index", code, tail)
        size = output.stat().st_size
        if size > limit:
            raise _Failed(
                f"the {language} indexer wrote {format_size(size)}, over the {format_size(limit)} limit "
                "(codeIntel.maxUploadBytes)",
                code,
                tail,
            )
        return output.read_bytes()

    def _execute(
        self, argv: list[str], job: Path, source: Path, timeout: int, cancelled: Callable[[], bool]
    ) -> tuple[int, bool, str]:
        """Run `argv` in `source` in its own process group: (exit code, timed out, the tail of stderr or stdout).

        `cancelled()` is asked every CANCEL_POLL_SECONDS: when true, the group is killed and _Cancelled raised."""
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(job), "LANG": "C.UTF-8"}
        stdout: deque[bytes] = deque()
        stderr: deque[bytes] = deque()
        with self._cond:
            if self._closing:
                raise _Cancelled
            process = subprocess.Popen(
                argv,
                cwd=source,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
            self._process = process
        readers = [
            threading.Thread(target=_drain, args=(process.stdout, stdout), daemon=True),
            threading.Thread(target=_drain, args=(process.stderr, stderr), daemon=True),
        ]
        for reader in readers:
            reader.start()
        timed_out = stopped = False
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    process.wait(timeout=max(0.0, min(CANCEL_POLL_SECONDS, deadline - time.monotonic())))
                    break
                except subprocess.TimeoutExpired:
                    if cancelled():
                        stopped = True
                        break
                    if time.monotonic() >= deadline:
                        timed_out = True
                        break
        finally:
            # The whole group, also after a normal exit: nothing the indexer started outlives the job.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            for reader in readers:
                reader.join(10)
            for stream in (process.stdout, process.stderr):
                if stream is not None:
                    stream.close()
            with self._cond:
                self._process = None
                closing = self._closing
        if closing or stopped:
            raise _Cancelled
        return process.returncode, timed_out, _tail(stderr) or _tail(stdout)

    @staticmethod
    def _scrub(text: str, job: Path, source: Path) -> str:
        """The last lines of an indexer's output, for operators: the job's paths shortened, no terminal codes."""
        text = text.replace(str(source), ".").replace(str(job), "<job>")
        lines = [cleaned for line in text.splitlines() if (cleaned := _ANSI.sub("", line).rstrip())]
        return "\n".join(lines[-TAIL_LINES:])[-TAIL_CHARS:]

    def _combine(self, outputs: list[bytes]) -> bytes:
        """One index of the indexers' outputs: one upload per commit, whichever languages it holds."""
        if len(outputs) == 1:
            return outputs[0]
        merged = scip.index_class()()
        names = []
        for data in outputs:
            try:
                index = scip.parse_index(data, self.precise.max_bytes)
            except InvalidInput as exc:
                raise _Failed(f"the index was refused: {exc.message}", 0) from None
            tool = index.metadata.tool_info
            names.append(f"{tool.name} {tool.version}".strip())
            merged.MergeFrom(index)
        merged.metadata.tool_info.name = " + ".join(n for n in names if n)
        merged.metadata.tool_info.version = ""
        return bytes(merged.SerializeToString())
