"""Reading a mirrored repository: revisions, files (ranges, large-file cuts, binary detection), trees, refs.

Every function takes a `Repo` the facade (`RepoService`) has already looked up for the actor, so the
visibility rule is applied once, before any git object is read.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Callable
from dataclasses import replace

import pygit2

from codewell.core.errors import InvalidInput, NotFound, Unavailable
from codewell.http import urls
from codewell.repos import git
from codewell.repos.records import (
    LIST_REFS_MAX,
    MAX_FILE_BYTES,
    MAX_LIST_FILES,
    TRUNCATED_LINES,
    FileContent,
    FileEntry,
    FileListing,
    RefInfo,
    RefList,
    Repo,
    ResolvedRevision,
)

# People's pages read whole files (no 200-line cut) up to this size; past it the file view says how big the file
# is and offers the raw view, which serves the blob's bytes up to MAX_RAW_BYTES.
MAX_WHOLE_FILE_BYTES = 5 * 1024 * 1024
MAX_RAW_BYTES = 64 * 1024 * 1024
# The file finder's path list of one commit (Linux has ~90,000 files).
MAX_PATHS = 200_000


def clean_path(path: str, *, required: bool) -> str:
    """A repo-relative path without `.`/empty parts; InvalidInput for NUL bytes, absolute paths and `..`."""
    if "\x00" in path:
        raise InvalidInput("path contains a NUL byte", hint="pass a plain repository-relative path")
    if path.startswith("/"):
        raise InvalidInput(
            f"path {path!r} is absolute", hint="paths are relative to the repository root, e.g. src/main.py"
        )
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise InvalidInput(f"path {path!r} contains '..'", hint="paths are relative to the repository root")
    if required and not parts:
        raise InvalidInput("path is required", hint="give a file path such as README.md; list_files shows them")
    return "/".join(parts)


def _sniff_type(path: str, data: bytes) -> str:
    signatures = (
        (b"\x89PNG", "image/png"),
        (b"\xff\xd8\xff", "image/jpeg"),
        (b"GIF8", "image/gif"),
        (b"%PDF", "application/pdf"),
        (b"PK\x03\x04", "application/zip"),
        (b"\x1f\x8b", "application/gzip"),
        (b"\x7fELF", "application/x-elf"),
    )
    for magic, kind in signatures:
        if data.startswith(magic):
            return kind
    guessed, _ = mimetypes.guess_type(path)
    return guessed or "application/octet-stream"


def check_refs_limit(limit: int) -> None:
    """list_refs' `limit` range (checked before the repository is looked up, as the reference does)."""
    if not 1 <= limit <= LIST_REFS_MAX:
        raise InvalidInput(f"limit must be between 1 and {LIST_REFS_MAX} (got {limit})", hint="the default is 100")


class Contents:
    """Git reads of mirrors; `external_url` gives the address printed in file URLs (it follows site config)."""

    def __init__(self, external_url: Callable[[], str]) -> None:
        self.external_url = external_url

    def resolve(self, repo: Repo, revision: str | None) -> ResolvedRevision:
        """The commit `revision` (default branch when None) names in `repo`."""
        commit = self.resolve_commit(repo, revision)
        return ResolvedRevision(repo, revision or repo.default_branch or "HEAD", str(commit.id))

    def open(self, repo: Repo) -> pygit2.Repository:
        try:
            return git.open_mirror(repo.mirror_path)
        except (OSError, pygit2.GitError):
            raise Unavailable(
                f"repository {repo.name!r} is not cloned yet (sync state: {repo.sync_state})",
                hint="wait for the first sync, or see `codewell repos status` for errors",
            ) from None

    def resolve_commit(self, repo: Repo, revision: str | None) -> pygit2.Commit:
        mirror = self.open(repo)
        if revision is None or revision == "":
            revision = repo.default_branch or git.default_branch(mirror)
            if revision is None:
                raise NotFound(f"repository {repo.name!r} has no commits yet", hint="push a branch to it first")
        if "\x00" in revision or not git.valid_revision(revision):
            raise InvalidInput(
                f"invalid revision {revision!r}", hint="give a branch, a tag, a commit SHA or HEAD, e.g. main or v1.2"
            )
        commit = git.resolve_commit(mirror, revision)
        if commit is None:
            raise NotFound(
                f"revision {revision!r} not found in repository {repo.name!r}",
                hint="list_refs shows the branches and tags; commit SHAs need at least 4 hex digits",
            )
        return commit

    def _blob_url(self, name: str, commit: str, path: str, line_range: tuple[int, int] | None) -> str:
        return urls.blob_url(self.external_url(), name, commit, path, line_range)

    def read_file(
        self,
        repo: Repo,
        clean: str,
        start_line: int | None = None,
        end_line: int | None = None,
        revision: str | None = None,
        *,
        whole: bool = False,
    ) -> FileContent:
        """A file's numbered lines at `revision`: ranges, a 200-line cut for files over 128 KB, binary detection.

        An `end_line` past the end is clamped to the last line; a `start_line` past the end is InvalidInput.
        `whole` (people's pages): no 200-line cut; a file over MAX_WHOLE_FILE_BYTES comes without lines,
        `truncated`, with a notice giving its size.
        """
        proto, obj = self._blob(repo, clean, revision)
        asked_range = self._check_range(start_line, end_line)
        if obj.is_binary:
            kind = _sniff_type(clean, obj.data[:16])
            notice = f"Binary file ({obj.size} bytes, {kind}); its contents are not shown."
            return replace(proto, binary=True, content_type=kind, notice=notice)
        if whole and obj.size > MAX_WHOLE_FILE_BYTES:
            data = obj.data
            total = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
            notice = (
                f"This file is too big to show here ({obj.size / 1024 / 1024:.1f} MB, {total} lines; "
                f"files up to {MAX_WHOLE_FILE_BYTES // 1024 // 1024} MB are shown). Open the raw file instead."
            )
            return replace(proto, total_lines=total, truncated=True, notice=notice)
        return self._text_content(proto, obj.data, asked_range, cut=not whole)

    def read_raw(self, repo: Repo, clean: str, revision: str | None = None) -> tuple[FileContent, bytes]:
        """A file's bytes as stored (line ends and encoding untouched) for the raw view, up to MAX_RAW_BYTES;
        the FileContent says whether it is binary."""
        proto, obj = self._blob(repo, clean, revision)
        if obj.size > MAX_RAW_BYTES:
            raise InvalidInput(
                f"{clean!r} is {obj.size} bytes, over the raw view's {MAX_RAW_BYTES // 1024 // 1024} MB",
                hint="clone the repository to get this file",
            )
        if obj.is_binary:
            return replace(proto, binary=True, content_type=_sniff_type(clean, obj.data[:16])), b""
        return proto, obj.data

    def list_paths(self, repo: Repo, revision: str | None = None) -> tuple[str, list[str], bool]:
        """(commit, every file path at `revision` in tree order, cut at MAX_PATHS): the file finder's list. Reads
        trees only, no blob; submodules are left out."""
        commit = self.resolve_commit(repo, revision)
        paths: list[str] = []
        for path, _oid, _mode in git.walk_blobs(self.open(repo), commit.tree):
            if len(paths) == MAX_PATHS:
                return str(commit.id), paths, True
            paths.append(path)
        return str(commit.id), paths, False

    def _blob(self, repo: Repo, clean: str, revision: str | None) -> tuple[FileContent, pygit2.Blob]:
        """The blob at `clean` and a FileContent with its address and size (NotFound, or InvalidInput for a
        directory or a submodule)."""
        name = repo.name
        commit = self.resolve_commit(repo, revision)
        sha = str(commit.id)
        shown_revision = revision or repo.default_branch or "HEAD"
        obj = git.object_at(commit, clean)
        if obj is None:
            raise NotFound(
                f"file {clean!r} not found in {name}@{shown_revision}",
                hint="list_files shows what a directory contains",
            )
        if isinstance(obj, pygit2.Tree):
            raise InvalidInput(f"{clean!r} is a directory, not a file", hint="use list_files to see its contents")
        if not isinstance(obj, pygit2.Blob):
            raise InvalidInput(f"{clean!r} is a submodule, not a file", hint="read files inside its own repository")
        return FileContent(name, clean, shown_revision, sha, self._blob_url(name, sha, clean, None), obj.size), obj

    @staticmethod
    def _check_range(start_line: int | None, end_line: int | None) -> tuple[int, int | None] | None:
        if start_line is None and end_line is None:
            return None
        start = 1 if start_line is None else start_line
        if start < 1:
            raise InvalidInput(f"startLine must be 1 or more (got {start})", hint="lines are numbered from 1")
        if end_line is not None and end_line < start:
            raise InvalidInput(
                f"endLine {end_line} is before startLine {start}", hint="give endLine ≥ startLine, or omit it"
            )
        return start, end_line

    def _text_content(
        self, proto: FileContent, data: bytes, asked: tuple[int, int | None] | None, *, cut: bool = True
    ) -> FileContent:
        text = data.decode("utf-8", "replace")
        lines = text.split("\n")
        if text.endswith("\n") or not text:
            # "a\nb\n" is two lines, not three (the reference's spurious empty last line).
            lines.pop()
        if "\r" in text:
            lines = [line.removesuffix("\r") for line in lines]
        total = len(lines)
        start, end = 1, total
        if asked is not None:
            start, end = asked[0], min(asked[1] if asked[1] is not None else total, total)
            if start > total:
                raise InvalidInput(
                    f"startLine {start} is past the end of the file ({total} lines)",
                    hint=f"ask for lines between 1 and {total}",
                )
        selected = lines[start - 1 : end]
        truncated, notice = False, None
        size = len(data) if asked is None else sum(len(line) + 1 for line in selected)
        if cut and size > MAX_FILE_BYTES and len(selected) > TRUNCATED_LINES:
            selected = selected[:TRUNCATED_LINES]
            truncated = True
            shown_end = start + TRUNCATED_LINES - 1
            notice = (
                f"File truncated: it is over 128 KB ({len(data)} bytes, {total} lines); showing lines "
                f"{start}-{shown_end}. Read further with startLine and endLine, "
                f"e.g. startLine={shown_end + 1}, endLine={min(total, shown_end + TRUNCATED_LINES)}."
            )
        url = proto.url
        if asked is not None:
            url = self._blob_url(proto.repo, proto.commit, proto.path, (start, start + len(selected) - 1))
        return replace(
            proto, url=url, lines=selected, start_line=start, total_lines=total, truncated=truncated, notice=notice
        )

    def list_files(self, repo: Repo, clean: str, revision: str | None = None) -> FileListing:
        """Direct children of directory `clean` at `revision`: directories first (with `/`), at most 1000."""
        name = repo.name
        commit = self.resolve_commit(repo, revision)
        obj = git.object_at(commit, clean)
        shown_revision = revision or repo.default_branch or "HEAD"
        if obj is None:
            raise NotFound(
                f"directory {clean!r} not found in {name}@{shown_revision}",
                hint="list the parent directory first (path empty = repository root)",
            )
        if not isinstance(obj, pygit2.Tree):
            raise InvalidInput(f"{clean!r} is a file, not a directory", hint="use read_file to read it")
        items = git.tree_items(obj)
        prefix = f"{clean}/" if clean else ""
        entries = [FileEntry(prefix + item.name + ("/" if item.kind == "dir" else ""), item.kind) for item in items]
        truncated = len(entries) > MAX_LIST_FILES
        notice = None
        if truncated:
            notice = (
                f"Showing the first {MAX_LIST_FILES} of {len(entries)} entries; "
                "list a subdirectory or use keyword_search with a file: filter to find more."
            )
        return FileListing(
            name, clean, shown_revision, str(commit.id), entries[:MAX_LIST_FILES], len(entries), truncated, notice
        )

    def list_refs(
        self,
        repo: Repo,
        tags_only: bool = False,
        heads_only: bool = False,
        contains_commit: str | None = None,
        limit: int = LIST_REFS_MAX,
    ) -> RefList:
        """Branches and tags (both unless one filter is set), optionally only those containing a commit.

        `tags_only` and `heads_only` together mean both kinds. The default branch comes first, then
        branches, then tags, each by name.
        """
        mirror = self.open(repo)
        kinds = {"branch", "tag"}
        if tags_only != heads_only:
            kinds = {"tag"} if tags_only else {"branch"}
        items = [item for item in git.refs(mirror) if item.kind in kinds]
        if contains_commit:
            target = str(self.resolve_commit(repo, contains_commit).id)
            items = [item for item in items if _contains(mirror, item.commit, target)]
        default_ref = f"refs/heads/{repo.default_branch}" if repo.default_branch else None
        items.sort(key=lambda item: (item.name != default_ref, item.kind != "branch", item.name))
        refs = [
            RefInfo(
                item.name,
                item.name.removeprefix("refs/heads/").removeprefix("refs/tags/"),
                item.kind,
                item.commit,
                item.annotated,
                item.name == default_ref,
            )
            for item in items
        ]
        return RefList(repo.name, refs[:limit], len(refs), len(refs) > limit)


def _contains(mirror: pygit2.Repository, ref_commit: str, target: str) -> bool:
    if ref_commit == target:
        return True
    try:
        return bool(mirror.descendant_of(ref_commit, target))
    except (KeyError, ValueError, pygit2.GitError):
        return False
