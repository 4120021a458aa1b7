"""Prepare the standard benchmark corpus: the Linux source from Debian's `linux-source` package.

Produces (idempotently) under $CODEWELL_BENCH_DIR (default /var/tmp/codewell-bench):
  linux/            a git repository with the whole tree in one commit on branch `main`
  linux-split/      one git repository per top-level directory (for multi-repository runs)
  linux-source/     the extracted tree, plain files (what --many splits)
  linux-many/NNNNN  --many N: N small git repositories (--files-per-repo consecutive files each, in path order)
Run: python bench/corpus.py [--split] [--many N [--files-per-repo 20]]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import time
from multiprocessing import get_context
from pathlib import Path

BENCH_DIR = Path(os.environ.get("CODEWELL_BENCH_DIR", "/var/tmp/codewell-bench"))
GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z",
}


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, stdout=subprocess.DEVNULL)


def source_tarball() -> Path:
    found = sorted(glob.glob("/usr/src/linux-source-*.tar.xz"))
    if not found:
        print("installing Debian's linux-source package", file=sys.stderr)
        subprocess.run(["apt-get", "install", "-y", "-qq", "linux-source"], check=True)
        found = sorted(glob.glob("/usr/src/linux-source-*.tar.xz"))
    return Path(found[-1])


def _commit_tree(repo: Path) -> None:
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "core.autocrlf", "false")
    # Debian's linux-source tarball ships a .gitignore with `/*`: force-add the pristine tree.
    _git(repo, "add", "-A", "--force", ".")
    _git(repo, "commit", "-q", "-m", "import linux source")


def _has_main(repo: Path) -> bool:
    # Not a file check: `git gc --auto` may have moved the ref into packed-refs.
    found = subprocess.run(
        ["git", "rev-parse", "-q", "--verify", "refs/heads/main"], cwd=repo, capture_output=True, check=False
    )
    return found.returncode == 0


def linux_repo() -> Path:
    """The whole Linux tree as one git repository (built once, ~3 minutes)."""
    target = BENCH_DIR / "linux"
    if (target / ".git").is_dir() and _has_main(target):
        return target
    tmp = BENCH_DIR / "linux.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with tarfile.open(source_tarball()) as archive:
        archive.extractall(tmp, filter="tar")
    (inner,) = list(tmp.iterdir())
    _commit_tree(inner)
    inner.rename(target)
    shutil.rmtree(tmp)
    return target


def linux_split() -> Path:
    """One repository per top-level directory of the Linux tree."""
    target = BENCH_DIR / "linux-split"
    if (target / ".done").exists():
        return target
    whole = linux_repo()
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for entry in sorted(whole.iterdir()):
        if entry.is_dir() and entry.name != ".git":
            repo = target / entry.name
            shutil.copytree(entry, repo, symlinks=True)
            _commit_tree(repo)
    (target / ".done").write_text("")
    return target


def linux_source() -> Path:
    """The Linux tree extracted as plain files (no git), built once (~15 s)."""
    target = BENCH_DIR / "linux-source"
    if (BENCH_DIR / "linux-source.done").exists():
        return target
    tmp = BENCH_DIR / "linux-source.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(target, ignore_errors=True)
    tmp.mkdir(parents=True)
    with tarfile.open(source_tarball()) as archive:
        archive.extractall(tmp, filter="tar")
    (inner,) = list(tmp.iterdir())
    inner.rename(target)
    tmp.rmdir()
    (BENCH_DIR / "linux-source.done").write_text("")
    return target


def source_files(root: Path) -> list[bytes]:
    """Every file and symbolic link under `root` (relative paths as bytes), in byte order of their paths: the
    order git sorts a flat list of paths in, so consecutive entries share their directories."""
    found: list[bytes] = []
    base = os.fsencode(root)
    for directory, dirs, files in os.walk(base):
        rel = os.path.relpath(directory, base)
        prefix = b"" if rel == b"." else rel + b"/"
        # os.walk lists symbolic links to directories among dirs: they are entries of their own, not walked.
        found.extend(prefix + d for d in dirs if os.path.islink(os.path.join(directory, d)))
        found.extend(prefix + f for f in files)
    return sorted(found)


MANY_STAMP = "linux-many.json"
# Repository k holds chunk (k x SPREAD) mod 10,000 of the tree (chunk c: per_repo files from c x per_repo, wrapping),
# a golden-ratio stride: the first N repositories sample the whole tree evenly for any N, instead of the first N
# holding only Documentation/ (so `--repos 200` runs see C, headers and assembly like the 10,000 do).
SPREAD, CHUNKS = 6181, 10_000
ORDER = f"golden-{SPREAD}-{CHUNKS}"


def chunk_of(k: int) -> int:
    return (k % CHUNKS) * SPREAD % CHUNKS + k // CHUNKS * CHUNKS


def _quote(path: bytes) -> bytes:
    """A path as fast-import reads it: C-style quoted when it starts with a quote or holds a newline."""
    if not path.startswith(b'"') and b"\n" not in path:
        return path
    escaped = path.replace(b"\\", b"\\\\").replace(b'"', b'\\"').replace(b"\n", b"\\n")
    return b'"' + escaped + b'"'


def _build_small_repo(job: tuple[Path, Path, int, list[bytes]]) -> int:
    """One repository `<root>/<NNNNN>`: `git fast-import` of its files in one commit on `main`, plus the same
    files as its work tree (for ripgrep). Built under a hidden name and renamed, so a present name is whole."""
    source, root, k, paths = job
    target = root / f"{k:05d}"
    tmp = root / f".tmp-{k:05d}"
    shutil.rmtree(tmp, ignore_errors=True)
    subprocess.run(["git", "init", "-q", "--template=", "-b", "main", str(tmp)], check=True, env=GIT_ENV)
    stream = bytearray()
    entries = bytearray()
    src = os.fsencode(source)
    for mark, rel in enumerate(paths, start=1):
        full = os.path.join(src, rel)
        dest = os.path.join(os.fsencode(tmp), rel)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        info = os.lstat(full)
        if stat.S_ISLNK(info.st_mode):
            data, mode = os.fsencode(os.readlink(full)), b"120000"
            os.symlink(os.readlink(full), dest)
        else:
            with open(full, "rb") as handle:
                data = handle.read()
            mode = b"100755" if info.st_mode & 0o111 else b"100644"
            with open(dest, "wb") as handle:
                handle.write(data)
            os.chmod(dest, info.st_mode & 0o777)
        stream += b"blob\nmark :%d\ndata %d\n" % (mark, len(data)) + data + b"\n"
        entries += b"M %s :%d %s\n" % (mode, mark, _quote(rel))
    message = b"linux source, part %d" % chunk_of(k)
    stamp = b"bench <bench@example.com> 1704067200 +0000"
    stream += b"commit refs/heads/main\nauthor %s\ncommitter %s\ndata %d\n%s\n" % (stamp, stamp, len(message), message)
    stream += bytes(entries) + b"\ndone\n"
    subprocess.run(["git", "fast-import", "--quiet", "--done"], cwd=tmp, input=bytes(stream), check=True, env=GIT_ENV)
    # The index, so that the work tree reads as clean (`git status`), as a checkout would.
    subprocess.run(["git", "read-tree", "main"], cwd=tmp, check=True, env=GIT_ENV)
    tmp.rename(target)
    return k


def linux_many(repos: int, per_repo: int = 20, processes: int = 2) -> Path:
    """`repos` git repositories of `per_repo` consecutive files each (path order, wrapping around the tree;
    repository k holds chunk_of(k)), under linux-many/NNNNN, each one commit on `main` with its work tree.
    Idempotent and incremental: a stamp records what was built; asking for more builds only the missing ones."""
    target = BENCH_DIR / "linux-many"
    stamp_path = BENCH_DIR / MANY_STAMP
    source = linux_source()
    # A done stamp naming its source (bench/tiny_corpus.py) stands for the tarball: no Debian package needed.
    tarball = (BENCH_DIR / "linux-source.done").read_text().strip() or source_tarball().name
    stamp = json.loads(stamp_path.read_text()) if stamp_path.exists() else {}
    if stamp.get("files_per_repo") != per_repo or stamp.get("tarball") != tarball or stamp.get("order") != ORDER:
        shutil.rmtree(target, ignore_errors=True)
        stamp = {}
    if stamp.get("repos", 0) >= repos:
        return target
    target.mkdir(parents=True, exist_ok=True)
    # Parameters first: an interrupted build resumes with the repositories it finished.
    params = {"files_per_repo": per_repo, "tarball": tarball, "order": ORDER}
    stamp_path.write_text(json.dumps({**stamp, **params}, indent=2) + "\n")
    for leftover in target.glob(".tmp-*"):
        shutil.rmtree(leftover)
    started = time.perf_counter()
    files = source_files(source)
    jobs = [
        (source, target, k, [files[(chunk_of(k) * per_repo + i) % len(files)] for i in range(per_repo)])
        for k in range(repos)
        if not (target / f"{k:05d}").is_dir()
    ]
    with get_context("fork").Pool(processes) as pool:
        for done, _ in enumerate(pool.imap_unordered(_build_small_repo, jobs, chunksize=8), start=1):
            if done % 500 == 0:
                print(f"  {done}/{len(jobs)} repositories, {time.perf_counter() - started:.0f} s", file=sys.stderr)
    seconds = time.perf_counter() - started
    stamp = {
        "repos": repos,
        "files_per_repo": per_repo,
        "tarball": tarball,
        "order": ORDER,
        "source_files": len(files),
        "built_now": len(jobs),
        "seconds": round(seconds, 1),
    }
    stamp_path.write_text(json.dumps(stamp, indent=2) + "\n")
    print(f"built {len(jobs)} repositories in {seconds:.1f} s ({len(files)} source files)", file=sys.stderr)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", action="store_true", help="also build one repository per top-level directory")
    parser.add_argument("--many", type=int, metavar="N", help="build N small repositories under linux-many/ only")
    parser.add_argument("--files-per-repo", type=int, default=20, help="files per repository with --many")
    args = parser.parse_args()
    if args.many:
        print(linux_many(args.many, args.files_per_repo))
        return
    print(linux_repo())
    if args.split:
        print(linux_split())


if __name__ == "__main__":
    main()
