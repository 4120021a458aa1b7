"""Prepare the standard benchmark corpus: the Linux source from Debian's `linux-source` package.

Produces (idempotently) under $CODEWELL_BENCH_DIR (default /var/tmp/codewell-bench):
  linux/            a git repository with the whole tree in one commit on branch `main`
  linux-split/      one git repository per top-level directory (for multi-repository runs)
Run: python bench/corpus.py [--split]
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tarfile
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", action="store_true", help="also build one repository per top-level directory")
    args = parser.parse_args()
    print(linux_repo())
    if args.split:
        print(linux_split())


if __name__ == "__main__":
    main()
