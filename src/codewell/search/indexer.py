"""Turn a git mirror into shard documents: the default branch plus extra branches, blobs shared once."""

from __future__ import annotations

import itertools
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pygit2
from pygit2.enums import FileMode, ObjectType

from codewell.repos.git import LIMITER, GitCommandError, child_env, walk_blobs
from codewell.search.index.builder import MAX_FILE_SIZE, SourceDoc, build_shard, skip_reason

__all__ = ["MirrorSource", "branch_commits", "build_from_mirror", "build_from_mirrors", "commit_docs"]

# A repository with at least this many blobs to index is read through one `git cat-file --batch`: git's delta
# base cache makes that half the CPU of libgit2's reads (Linux tree: 3.7 against 7.9 CPU s, issue #30);
# below it, the start of a git process costs more than it saves (a compound shard reads thousands of small
# repositories).
CAT_FILE_MIN_BLOBS = 2000
# Object names written ahead of reading their objects: 41 bytes each stay within a 64 KiB pipe buffer, so
# writing a batch never waits for git, which waits for us to read its output.
_CAT_FILE_BATCH = 1024


def branch_commits(mirror: Path, default: str | None, extra: tuple[str, ...]) -> dict[str, str]:
    """Branch name → commit sha for the default branch and those extra branches that exist."""
    repo = pygit2.Repository(str(mirror))
    found: dict[str, str] = {}
    for name in (default, *extra):
        if not name or name in found:
            continue
        ref = repo.references.get(f"refs/heads/{name}")
        if ref is None:
            continue
        found[name] = str(ref.peel(pygit2.Commit).id)
    return found


def commit_docs(mirror: Path, commits: dict[str, str], slot: int = 0) -> Iterator[SourceDoc]:
    """Documents of every branch in `commits`; a (path, blob) present in several branches is yielded once.

    `slot` is the repository's position in the shard being built (several repositories share a compound one).
    """
    repo = pygit2.Repository(str(mirror))
    seen: dict[tuple[str, pygit2.Oid], set[str]] = {}
    per_branch: list[tuple[str, list[tuple[str, pygit2.Oid]]]] = []
    for branch, sha in commits.items():
        tree = repo[sha].peel(pygit2.Tree)
        entries = [(path, oid) for path, oid, mode in walk_blobs(repo, tree) if mode != FileMode.LINK]
        per_branch.append((branch, entries))
        for path, oid in entries:
            seen.setdefault((path, oid), set()).add(branch)
    emitted: set[tuple[str, pygit2.Oid]] = set()
    wanted: list[tuple[str, pygit2.Oid]] = []
    for _branch, entries in per_branch:
        for key in entries:
            if key not in emitted:
                emitted.add(key)
                wanted.append(key)
    oids = [oid for _, oid in wanted]
    blobs = _cat_file_blobs(mirror, oids) if len(oids) >= CAT_FILE_MIN_BLOBS else _odb_blobs(repo, oids)
    for (path, oid), raw in zip(wanted, blobs, strict=True):
        size = len(raw)
        data = raw if size <= MAX_FILE_SIZE else b""
        reason = skip_reason(data, size)
        yield SourceDoc(path, None if reason else data, size, frozenset(seen[(path, oid)]), reason, slot)


def _odb_blobs(repo: pygit2.Repository, oids: list[pygit2.Oid]) -> Iterator[bytes]:
    """The blobs' bytes through libgit2's object database (its read, not repo[oid].data: a Blob object and then
    a copy of its bytes cost 1.75x the CPU)."""
    odb = repo.odb
    for oid in oids:
        kind, raw = odb.read(oid)
        if kind != ObjectType.BLOB:
            raise GitCommandError(f"{oid} is not a blob")
        yield raw


def _cat_file_blobs(mirror: Path, oids: list[pygit2.Oid]) -> Iterator[bytes]:
    """The blobs' bytes, in order, from one `git cat-file --batch` (stopped when the iterator is closed)."""
    with (
        LIMITER,
        subprocess.Popen(
            ["git", f"--git-dir={mirror}", "cat-file", "--batch"],
            env=child_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        ) as process,
    ):
        assert process.stdin is not None
        assert process.stdout is not None
        try:
            for lo in range(0, len(oids), _CAT_FILE_BATCH):
                batch = oids[lo : lo + _CAT_FILE_BATCH]
                process.stdin.write("".join(f"{oid}\n" for oid in batch).encode())
                process.stdin.flush()
                for oid in batch:
                    # "<oid> blob <size>" then the bytes and a newline; "<oid> missing" for an absent object.
                    header = process.stdout.readline().split()
                    if len(header) != 3 or header[1] != b"blob":
                        raise GitCommandError(f"git cat-file: {oid} is not a blob of {mirror.name}")
                    raw = process.stdout.read(int(header[2]))
                    if len(raw) != int(header[2]) or process.stdout.read(1) != b"\n":
                        raise GitCommandError(f"git cat-file: {oid} was cut short")
                    yield raw
        finally:
            process.kill()


def build_from_mirror(
    target: Path,
    mirror: Path,
    commits: dict[str, str],
    meta: dict[str, object],
    *,
    workers: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> Path:
    """Build the shard for `commits` of the mirror at `target` (atomically)."""
    return build_shard(
        target, {**meta, "branches": commits}, commit_docs(mirror, commits), workers=workers, progress=progress
    )


@dataclass(frozen=True)
class MirrorSource:
    """One repository of a batch: its mirror, the branch commits to index and its facts for the shard."""

    mirror: Path
    commits: dict[str, str]
    meta: dict[str, object]  # id, name, default_branch, indexed_at


def build_from_mirrors(
    target: Path,
    sources: list[MirrorSource],
    *,
    workers: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> Path:
    """Build one shard holding the documents of every repository in `sources`, in that order (atomically)."""
    repos = [{**source.meta, "branches": source.commits} for source in sources]
    docs = itertools.chain.from_iterable(
        commit_docs(source.mirror, source.commits, slot) for slot, source in enumerate(sources)
    )
    return build_shard(target, {"repos": repos}, docs, workers=workers, progress=progress)
