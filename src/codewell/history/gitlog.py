"""Reading commit metadata out of a bare git mirror with the git CLI (streamed, never buffered whole).

`git log` is the better engine for walking many commits with their changed paths (it uses the commit-graph
and its own tree diff); pygit2 is used elsewhere for single diffs.
"""

from __future__ import annotations

import codecs
import subprocess
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from codewell.repos.git import child_env

RS, FS = "\x1e", "\x1f"
# Fields: sha, parents, author name, e-mail, time, committer name, e-mail, time, raw message.
_FORMAT = "%x1e%H%x1f%P%x1f%an%x1f%ae%x1f%at%x1f%cn%x1f%ce%x1f%ct%x1f%B%x1f"
_GIT = ("git", "-c", "core.quotePath=false", "-c", "log.showSignature=false")
# Every git child gets repos' small environment (`child_env`), never the server's (its secrets), issue #33.


@dataclass(frozen=True, slots=True)
class LoggedCommit:
    sha: str
    parents: tuple[str, ...]
    author_name: str
    author_email: str
    authored_at: datetime
    committer_name: str
    committer_email: str
    committed_at: datetime
    message: str
    paths: tuple[str, ...]

    @property
    def subject(self) -> str:
        return self.message.split("\n", 1)[0].strip()


@dataclass(frozen=True, slots=True)
class RefTip:
    name: str  # full ref name, e.g. refs/heads/main
    commit: str  # the commit it points to (annotated tags peeled)


class GitError(Exception):
    """git failed; the message is for logs, never shown to callers as is."""


def _epoch(value: str) -> datetime:
    return datetime.fromtimestamp(int(value or "0"), UTC)


def _parse_record(record: str) -> LoggedCommit | None:
    fields = record.split(FS)
    if len(fields) < 10:
        return None
    tail = fields[9]
    if tail.startswith("\0\n"):
        tail = tail[2:]
    paths = tuple(p for p in tail.split("\0") if p.strip("\n"))
    return LoggedCommit(
        sha=fields[0],
        parents=tuple(fields[1].split()),
        author_name=fields[2],
        author_email=fields[3],
        authored_at=_epoch(fields[4]),
        committer_name=fields[5],
        committer_email=fields[6],
        committed_at=_epoch(fields[7]),
        message=fields[8].rstrip("\n"),
        paths=paths,
    )


def list_ref_tips(git_dir: Path) -> list[RefTip]:
    """Branches and tags of a repository with the commit each points to; refs to non-commits are skipped."""
    out = subprocess.run(
        [
            *_GIT,
            f"--git-dir={git_dir}",
            "for-each-ref",
            "--format=%(objecttype) %(objectname) %(*objecttype) %(*objectname) %(refname)",
            "refs/heads",
            "refs/tags",
        ],
        capture_output=True,
        check=False,
        env=child_env(),
    )
    if out.returncode != 0:
        raise GitError(out.stderr.decode(errors="replace").strip())
    tips: list[RefTip] = []
    for line in out.stdout.decode(errors="replace").splitlines():
        kind, sha, peeled_kind, peeled, name = [*line.split(" ", 4), "", "", "", ""][:5]
        if kind == "commit":
            tips.append(RefTip(name, sha))
        elif kind == "tag" and peeled_kind == "commit":
            tips.append(RefTip(name, peeled))
    return tips


def log_commits(git_dir: Path, include: Iterable[str], exclude: Iterable[str] = ()) -> Iterator[LoggedCommit]:
    """Stream the commits reachable from `include` but not from `exclude` (missing SHAs ignored), newest first."""
    revs = _revs(include, exclude)
    args = [
        *_GIT,
        f"--git-dir={git_dir}",
        "log",
        "--stdin",
        "--ignore-missing",
        "-z",
        "--name-only",
        "--diff-merges=first-parent",
        "--no-renames",
        f"--format={_FORMAT}",
    ]
    yield from _stream_records(args, revs)


def rev_list(git_dir: Path, include: Iterable[str], exclude: Iterable[str] = ()) -> Generator[str, None, None]:
    """Stream the SHAs reachable from `include` but not from `exclude` (missing SHAs ignored)."""
    revs = _revs(include, exclude)
    args = [*_GIT, f"--git-dir={git_dir}", "rev-list", "--stdin", "--ignore-missing"]
    with subprocess.Popen(
        args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env()
    ) as proc:
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.write(revs.encode())
        proc.stdin.close()
        for line in proc.stdout:
            yield line.decode().strip()
        if proc.wait() != 0:
            raise GitError((proc.stderr.read() if proc.stderr else b"").decode(errors="replace").strip())


def _revs(include: Iterable[str], exclude: Iterable[str]) -> str:
    # `^sha` lines rather than `--not`: git < 2.42 rejects options on --stdin.
    return "".join(f"{sha}\n" for sha in include) + "".join(f"^{sha}\n" for sha in exclude)


def is_ancestor(git_dir: Path, ancestor: str, descendant: str) -> bool:
    """True when `ancestor` is reachable from `descendant` (False also when either is missing)."""
    result = subprocess.run(
        [*_GIT, f"--git-dir={git_dir}", "merge-base", "--is-ancestor", ancestor, descendant],
        capture_output=True,
        check=False,
        env=child_env(),
    )
    return result.returncode == 0


def _stream_records(args: list[str], stdin_text: str) -> Iterator[LoggedCommit]:
    with subprocess.Popen(
        args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env()
    ) as proc:
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.write(stdin_text.encode())
        proc.stdin.close()
        buffer = ""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        try:
            while chunk := proc.stdout.read1(1 << 16):  # type: ignore[attr-defined]
                buffer += decoder.decode(chunk)
                *complete, buffer = buffer.split(RS)
                for record in complete:
                    if record and (commit := _parse_record(record)) is not None:
                        yield commit
            if buffer and (commit := _parse_record(buffer)) is not None:
                yield commit
        finally:
            if proc.poll() is None:
                proc.kill()
        if proc.wait() != 0:
            stderr = proc.stderr.read() if proc.stderr else b""
            raise GitError(stderr.decode(errors="replace").strip())
