"""The Go and JavaScript corpus of bench/agents_tasks_gojs.json and bench/deepsearch_questions.json (#31).

Each source of the JSON headers ("sources") is fetched offline at its pinned version: kind=npm with
`npm pack <name>@<version>`, kind=debian with `apt-get download <name>=<version>` + `dpkg -x`; the archive's
sha256 is checked, the folder `root` inside it becomes the top of one git repository (one commit, fixed author
and date) under /var/tmp/codewell-bench/agents-gojs/<short>-<upstream version>/ (e.g. cobra-1.6.1). kind=pypi
sources are the corpus of bench/agents_bench.py (/var/tmp/codewell-bench/agents/<name>-<version>/), copied
from the venv when the installed version is the pinned one. Building is idempotent (a finished repository is
kept). Then every expected file of every task and question is checked: it exists in the repository, its line
range is inside the file and the range contains the symbol's last name.

    .venv/bin/python bench/gojs_corpus.py [--only REPO] [--no-check]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
SPECS = (HERE / "agents_tasks_gojs.json", HERE / "deepsearch_questions.json")
BENCH_ROOT = Path(os.environ.get("CODEWELL_BENCH_DIR", "/var/tmp/codewell-bench"))
BENCH_DIR = BENCH_ROOT / "agents-gojs"
PYPI_DIR = BENCH_ROOT / "agents"
SITE = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z",
    "PATH": "/usr/bin:/bin",
}


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True, text=True)
    return done.stdout


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def folder_name(repo: str, source: dict[str, Any]) -> str:
    """`go/cobra` at Debian 1.6.1-1 → `cobra-1.6.1`; `npm/express` at 4.21.2 → `express-4.21.2`."""
    version = source["version"].rsplit("-", 1)[0] if source["kind"] == "debian" else source["version"]
    return f"{repo.rsplit('/', 1)[-1]}-{version}"


def _download(source: dict[str, Any], into: Path) -> Path:
    """The archive of `source` in `into` (downloaded once), its sha256 checked."""
    into.mkdir(parents=True, exist_ok=True)
    name, version = source["name"], source["version"]
    if source["kind"] == "npm":
        pattern = f"{name.replace('@', '').replace('/', '-')}-{version}.tgz"
        if not (into / pattern).is_file():
            subprocess.run(["npm", "pack", "--silent", f"{name}@{version}", "--pack-destination", str(into)],
                           check=True, stdout=subprocess.DEVNULL)  # fmt: skip
        archive = into / pattern
    else:
        matches = sorted(into.glob(f"{name}_{version.replace(':', '%3a')}_*.deb"))
        if not matches:
            subprocess.run(["apt-get", "download", "-q", f"{name}={version}"], cwd=into, check=True,
                           stdout=subprocess.DEVNULL)  # fmt: skip
            matches = sorted(into.glob(f"{name}_{version.replace(':', '%3a')}_*.deb"))
        (archive,) = matches
    digest = _sha256(archive)
    if digest != source["sha256"]:
        raise SystemExit(f"{archive}: sha256 {digest}, expected {source['sha256']}")
    return archive


def _unpack(source: dict[str, Any], archive: Path, target: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        unpacked = Path(tmp)
        if source["kind"] == "npm":
            with tarfile.open(archive) as t:
                t.extractall(unpacked, filter="data")
        else:
            subprocess.run(["dpkg", "-x", str(archive), str(unpacked)], check=True)
        root = unpacked / source["root"]
        if not root.is_dir():
            raise SystemExit(f"{archive}: no folder {source['root']}")
        shutil.copytree(root, target, symlinks=False)


def _pypi_repo(source: dict[str, Any]) -> Path:
    """The bench/agents_bench.py corpus of a PyPI package (the same repository as its pypi/<name>)."""
    name, version = source["name"], source["version"]
    target = PYPI_DIR / f"{name}-{version}"
    if (target / ".git").is_dir():
        return target
    if importlib.metadata.version(name) != version:
        raise SystemExit(f"pypi/{name} {version} is not installed: build it with bench/agents_bench.py --only {name}")
    tmp = PYPI_DIR / f"{name}-{version}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for folder in source["folders"]:
        shutil.copytree(SITE / folder, tmp / folder, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    _commit(tmp, f"{name} {version}")
    tmp.rename(target)
    return target


def _commit(path: Path, message: str) -> None:
    _git(path, "init", "-q", "-b", "main")
    _git(path, "add", "-A", ".")
    _git(path, "commit", "-q", "-m", message)


def corpus_repo(repo: str, source: dict[str, Any]) -> Path:
    """The git repository of one source at its pinned version (built once)."""
    if source["kind"] == "pypi":
        return _pypi_repo(source)
    target = BENCH_DIR / folder_name(repo, source)
    if (target / ".git").is_dir():
        return target
    archive = _download(source, BENCH_DIR / ".downloads")
    tmp = BENCH_DIR / f"{target.name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    _unpack(source, archive, tmp)
    _commit(tmp, f"{repo} {source['version']}")
    tmp.rename(target)
    return target


def load_sources() -> dict[str, dict[str, Any]]:
    sources: dict[str, dict[str, Any]] = {}
    for spec in SPECS:
        sources.update(json.loads(spec.read_text())["sources"])
    return sources


def _expectations() -> list[tuple[str, str, dict[str, Any]]]:
    """(where, repo, expected entry) for every expected file of the tasks and questions."""
    found: list[tuple[str, str, dict[str, Any]]] = []
    tasks = json.loads(SPECS[0].read_text())["tasks"]
    for task in tasks:
        found += [(task["id"], task["repo"], e) for e in task["expected"]]
    questions = json.loads(SPECS[1].read_text())["questions"]
    for question in questions:
        found += [(question["id"], e["repo"], e) for e in question["expected"]]
    return found


def symbol_names(symbol: str) -> list[str]:
    """The names a symbol note promises in its range: the last identifier of each `/`-separated part, notes
    in parentheses after a space left out (`(*Command).execute` → execute; `ld (Levenshtein)` → ld)."""
    names = []
    for part in symbol.split(" / "):
        bare = re.sub(r"\s+\(.*?\)", "", part).strip()
        identifiers = re.findall(r"[A-Za-z_]\w*", bare)
        names.append(identifiers[-1] if identifiers else bare)
    return names


def check(repos: dict[str, Path]) -> list[str]:
    """Problems with the expected files (empty when every one is where the JSON says)."""
    problems = []
    for where, repo, expected in _expectations():
        if repo not in repos:
            continue
        path = repos[repo] / expected["path"]
        first, last = expected["lines"]
        if expected.get("line", first) != first:
            problems.append(f"{where}: line {expected['line']} is not the first of {expected['lines']}")
        if not path.is_file():
            problems.append(f"{where}: {repo}:{expected['path']} does not exist")
            continue
        lines = path.read_text(errors="replace").splitlines()
        if not 1 <= first <= last <= len(lines):
            problems.append(f"{where}: {repo}:{expected['path']} has {len(lines)} lines, not {first}-{last}")
            continue
        text = "\n".join(lines[first - 1 : last])
        for name in symbol_names(expected["symbol"]):
            if name not in text:
                problems.append(f"{where}: {name!r} is not in {repo}:{expected['path']}#L{first}-{last}")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--only", action="append", help="a repository name (e.g. go/cobra); repeatable")
    parser.add_argument("--no-check", action="store_true", help="only build, do not check the expected files")
    args = parser.parse_args()
    sources = load_sources()
    repos = {}
    for repo, source in sources.items():
        if args.only and repo not in args.only:
            continue
        repos[repo] = corpus_repo(repo, source)
        head = _git(repos[repo], "rev-parse", "HEAD").strip()
        print(f"{repo:16} {source['version']:10} {head[:12]}  {repos[repo]}")
    if args.no_check:
        return
    problems = check(repos)
    for problem in problems:
        print("PROBLEM", problem)
    print(f"checked {sum(1 for _, r, _ in _expectations() if r in repos)} expected files: {len(problems)} problems")
    if problems:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
