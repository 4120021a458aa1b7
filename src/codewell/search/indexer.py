"""Turn a git mirror into shard documents: the default branch plus extra branches, blobs shared once."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pygit2
from pygit2.enums import FileMode, ObjectType

from codewell.repos.git import walk_blobs
from codewell.search.index.builder import MAX_FILE_SIZE, SourceDoc, build_shard, skip_reason

__all__ = ["MirrorSource", "branch_commits", "build_from_mirror", "build_from_mirrors", "commit_docs"]


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
    # The object database's read, not repo[oid].data: a Blob object and then a copy of its bytes cost 1.75x
    # the CPU (measured on the Linux tree: reading blobs was then the build's largest part, issue #30).
    odb = repo.odb
    for _branch, entries in per_branch:
        for path, oid in entries:
            key = (path, oid)
            if key in emitted:
                continue
            emitted.add(key)
            kind, raw = odb.read(oid)
            assert kind == ObjectType.BLOB
            size = len(raw)
            data = raw if size <= MAX_FILE_SIZE else b""
            reason = skip_reason(data, size)
            yield SourceDoc(path, None if reason else data, size, frozenset(seen[key]), reason, slot)


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
