"""Git access for the repos capability: git CLI subprocesses (bounded) and pygit2 object reads.

Other capabilities read git objects through these helpers (history, search indexing): open a mirror with
`open_mirror`, resolve a revision with `resolve_commit`, read `blob_at`/`tree_at`, list `refs`.
Network work (clone, fetch) is always the git CLI, run through `run_git`, which never lets more than
`GIT_PROCESS_LIMIT` git processes run at once in this process.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pygit2
from pygit2.enums import FileMode, ObjectType

# At most two git processes per core (issue #3): fetches are I/O bound, but index-pack is CPU bound.
GIT_PROCESS_LIMIT = 2 * (os.cpu_count() or 1)

# Environment for every git subprocess: never prompt (a prompt would hang a background sync forever),
# never read the user's or system config (credential helpers, url rewrites), stable messages.
_BASE_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_ASKPASS": "true",
    "SSH_ASKPASS": "true",
    "GIT_SSH_COMMAND": "ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new",
    "GIT_CONFIG_NOSYSTEM": "1",
    # The transports codewell registers (sources.URL_SCHEMES): never `ext::` or another remote helper.
    "GIT_ALLOW_PROTOCOL": "https:http:ssh:git:file",
    "LC_ALL": "C",
}

# What a git child inherits from the server's environment, and nothing else: where programs and the home
# directory are, how to reach the network (proxies, CA bundles, an ssh agent), and git's own location settings.
# Everything else stays behind (issue #33): the server's environment holds secrets (tokens named by
# `credentialsEnv` or `tokenEnv`, database URLs, API keys) that no git process, nor a hook or helper it runs,
# needs. A call's credentials come in its own `env` (repos/sync.py's `Credentials.env`), for that child only.
INHERITED_ENV = frozenset(
    {
        "PATH",
        "HOME",
        "TMPDIR",
        "USER",
        "LOGNAME",
        "LANG",
        "SSH_AUTH_SOCK",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "no_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "CURL_CA_BUNDLE",
        "GIT_SSL_CAINFO",
        "GIT_SSL_CAPATH",
        "GIT_EXEC_PATH",
        "GIT_CONFIG_GLOBAL",
        "XDG_CONFIG_HOME",
    }
)


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a git child: the few inherited variables, the fixed settings, then `extra`."""
    inherited = {name: value for name, value in os.environ.items() if name in INHERITED_ENV}
    return {**inherited, **_BASE_ENV, **(extra or {})}


class GitCommandError(Exception):
    """A git subprocess failed or timed out; `message` is already free of credentials."""

    def __init__(self, message: str, *, returncode: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.returncode = returncode


class ProcessLimiter:
    """A counting gate for git subprocesses that also records the highest concurrency it has seen."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._semaphore = threading.BoundedSemaphore(limit)
        self._lock = threading.Lock()
        self.active = 0
        self.max_active = 0

    def __enter__(self) -> ProcessLimiter:
        self._semaphore.acquire()
        with self._lock:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self.active -= 1
        self._semaphore.release()

    def reset_max(self) -> None:
        with self._lock:
            self.max_active = self.active


LIMITER = ProcessLimiter(GIT_PROCESS_LIMIT)

_PROGRESS = re.compile(r"^(?:remote: )?([A-Za-z ]+):\s+(\d+)%")


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    # git clone/fetch spawn helpers (remote-https, index-pack): kill the whole process group.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def run_git(
    args: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 600.0,
    redact: Callable[[str], str] = lambda text: text,
    on_progress: Callable[[str, int], None] | None = None,
) -> str:
    """Run `git <args>` with empty stdin and a timeout; return stdout, or raise GitCommandError (redacted).

    The child's environment is `child_env(env)`: never the server's whole environment."""
    full_env = child_env(env)
    stdout_chunks: list[bytes] = []
    stderr_chunks: list[bytes] = []
    with (
        LIMITER,
        subprocess.Popen(
            ["git", *args],
            cwd=cwd,
            env=full_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        ) as process,
    ):
        # Both pipes are drained by threads: a full stderr pipe (progress) must never stall git.
        readers = [
            threading.Thread(target=_read_stream, args=(process.stdout, stdout_chunks, None), daemon=True),
            threading.Thread(target=_read_stream, args=(process.stderr, stderr_chunks, on_progress), daemon=True),
        ]
        for reader in readers:
            reader.start()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            process.wait()
            raise GitCommandError(f"git {args[0]} timed out after {timeout:g} s") from None
        finally:
            for reader in readers:
                reader.join(10)
    stderr = b"".join(stderr_chunks).decode("utf-8", "replace")
    if process.returncode != 0:
        raise GitCommandError(redact(_summarize(stderr) or f"git {args[0]} failed"), returncode=process.returncode)
    return b"".join(stdout_chunks).decode("utf-8", "replace")


def _read_stream(stream: IO[bytes] | None, chunks: list[bytes], on_progress: Callable[[str, int], None] | None) -> None:
    if stream is None:
        return
    buffer = b""
    while True:
        data = os.read(stream.fileno(), 65536)
        if not data:
            break
        chunks.append(data)
        if on_progress is None:
            continue
        buffer += data
        # Progress lines are terminated by \r while they update and by \n when a phase ends.
        *lines, buffer = re.split(rb"[\r\n]", buffer)
        for line in lines:
            match = _PROGRESS.match(line.decode("utf-8", "replace"))
            if match:
                on_progress(match.group(1).strip(), int(match.group(2)))


def _summarize(stderr: str) -> str:
    """The meaningful lines of git's stderr (errors and fatals), without progress noise."""
    lines = [line.strip() for line in re.split(r"[\r\n]", stderr) if line.strip()]
    important = [line for line in lines if line.startswith(("fatal:", "error:", "ERROR", "remote: ERROR"))]
    chosen = important or lines[-3:]
    return "; ".join(dict.fromkeys(chosen))[:2000]


# --- object reads (pygit2) -------------------------------------------------------------------------------

_local = threading.local()


def open_mirror(path: Path) -> pygit2.Repository:
    """The pygit2 repository at `path`, cached per thread (pygit2 objects are not shared across threads).

    The cache key includes the directory's inode so that a mirror removed and cloned again is re-opened.
    """
    cache: dict[str, tuple[int, pygit2.Repository]] | None = getattr(_local, "repos", None)
    if cache is None:
        cache = {}
        _local.repos = cache
    key = str(path)
    inode = os.stat(path).st_ino
    cached = cache.get(key)
    if cached is not None and cached[0] == inode:
        return cached[1]
    repo = pygit2.Repository(key)
    if len(cache) > 256:
        cache.clear()
    cache[key] = (inode, repo)
    return repo


# Revision syntax we accept: names, SHAs and ancestry suffixes; no `:` (path specs), no `@{` (reflogs),
# no leading `-` (options), no `:/` message searches (they walk the whole history).
_REVISION = re.compile(r"^(?!-)(?!.*@\{)(?!.*\.\.)[A-Za-z0-9._/+\-~^]+$")


def valid_revision(revision: str) -> bool:
    """True when `revision` is a branch, tag, SHA or `HEAD` style expression we are willing to resolve."""
    return bool(_REVISION.match(revision)) and len(revision) <= 255


def resolve_commit(repo: pygit2.Repository, revision: str) -> pygit2.Commit | None:
    """The commit `revision` names (annotated tags peeled), or None when it names nothing or no commit."""
    try:
        obj = repo.revparse_single(revision)
        commit = obj.peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
        return None
    return commit if isinstance(commit, pygit2.Commit) else None


def default_branch(repo: pygit2.Repository) -> str | None:
    """The branch HEAD points to (short name) if it exists, else main/master/the first branch, else None."""
    try:
        head = repo.references["HEAD"].target
    except KeyError:
        head = None
    branches = [
        name.removeprefix("refs/heads/") for name in repo.listall_references() if name.startswith("refs/heads/")
    ]
    if isinstance(head, str) and head.startswith("refs/heads/") and head.removeprefix("refs/heads/") in branches:
        return head.removeprefix("refs/heads/")
    for candidate in ("main", "master"):
        if candidate in branches:
            return candidate
    return sorted(branches)[0] if branches else None


def object_at(commit: pygit2.Commit, path: str) -> pygit2.Object | None:
    """The tree or blob at `path` (repo-relative, no leading slash; "" is the root tree), or None."""
    if not path:
        return commit.tree
    try:
        return commit.tree[path]
    except KeyError:
        return None


@dataclass(frozen=True, slots=True)
class TreeItem:
    name: str
    kind: str  # "dir" | "file" | "symlink" | "submodule"


_KINDS = {
    FileMode.TREE: "dir",
    FileMode.LINK: "symlink",
    FileMode.COMMIT: "submodule",
}


def walk_blobs(repo: pygit2.Repository, tree: pygit2.Tree, prefix: str = "") -> Iterator[tuple[str, pygit2.Oid, int]]:
    """(path, blob id, file mode) of every blob below `tree`, in tree order, reading no blob. Symbolic links are
    blobs too (mode `FileMode.LINK`): the caller keeps or drops them; submodules are left out."""
    for entry in tree:
        path = f"{prefix}{entry.name or ''}"
        if entry.type_str == "tree":
            subtree = repo[entry.id]
            assert isinstance(subtree, pygit2.Tree)
            yield from walk_blobs(repo, subtree, f"{path}/")
        elif entry.type_str == "blob":
            yield path, entry.id, entry.filemode


def tree_items(tree: pygit2.Tree) -> list[TreeItem]:
    """Direct children of `tree`: directories first, then the rest, each group sorted by name."""
    items = [TreeItem(entry.name or "", _KINDS.get(entry.filemode, "file")) for entry in tree]
    return sorted(items, key=lambda item: (item.kind != "dir", item.name))


@dataclass(frozen=True, slots=True)
class RefItem:
    name: str  # full ref name, e.g. refs/heads/main
    kind: str  # "branch" | "tag"
    commit: str  # peeled commit SHA
    annotated: bool


def refs(repo: pygit2.Repository) -> list[RefItem]:
    """Every branch and tag with the commit it points to (annotated tags peeled); non-commit tags skipped."""
    items: list[RefItem] = []
    for name in repo.listall_references():
        if name.startswith("refs/heads/"):
            kind = "branch"
        elif name.startswith("refs/tags/"):
            kind = "tag"
        else:
            continue
        try:
            reference = repo.references[name]
            target = repo.get(reference.target)
            commit = reference.peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError):
            continue
        annotated = target is not None and target.type == ObjectType.TAG
        items.append(RefItem(name, kind, str(commit.id), annotated))
    return items


def ref_snapshot(path: Path) -> dict[str, str]:
    """Every ref of the mirror at `path` and its direct target (to tell whether a fetch changed anything)."""
    if not path.exists():
        return {}
    repo = pygit2.Repository(str(path))
    snapshot: dict[str, str] = {}
    for name in repo.listall_references():
        target = repo.references[name].target
        snapshot[name] = str(target)
    return snapshot


def directory_size(path: Path) -> int:
    """Bytes used by the files under `path` (the mirror's size on disk)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total
