"""Precise navigation from a SCIP upload against the syntactic path, on Python nobody here wrote.

Corpus: a copy of standard-library packages (default: json, email, logging) committed to a git repository and
registered. The real indexer (`scip-python`, tests/scip/node_modules; `npm ci` there first) indexes it; the
index is uploaded through PreciseService. Usages (a reference occurrence of a symbol the index defines in the
corpus) and definitions are sampled from the index itself (seed). All are asked before the upload (the
syntactic path), then all after it (precise), in the same process; printed: indexer and upload cost, p50 of both
calls on both paths and their ratio, and how often the syntactic top-1 is the definition scip-python names.

    .venv/bin/python bench/codenav_scip_bench.py [--packages json,email,logging] [--samples 200] [--seed 16]
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from codewell.codenav import scip
from codewell.codenav.precise import PreciseService
from codewell.codenav.results import PRECISE, Definitions
from codewell.codenav.service import CodeNavService
from codewell.core.actors import INTERNAL
from codewell.core.errors import CodewellError
from codewell.core.settings import Settings
from codewell.repos.service import RepoService, register_local_repo
from codewell.runtime import Runtime

STDLIB = Path("/usr/lib/python3.11")
INDEXER = Path(__file__).resolve().parents[1] / "tests" / "scip" / "node_modules" / ".bin" / "scip-python"
REPO = "bench/stdlib-scip"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def make_corpus(root: Path, packages: list[str]) -> int:
    for package in packages:
        shutil.copytree(STDLIB / package, root / package, ignore=shutil.ignore_patterns("__pycache__", "test*"))
    env = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
    for git in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "corpus"]):
        subprocess.run(["git", *git], cwd=root, check=True, env={**env, "PATH": "/usr/bin:/bin"})
    return sum(p.stat().st_size for p in root.rglob("*.py"))


def run_indexer(root: Path, work: Path) -> tuple[bytes, float, float]:
    """index.scip of `root`, and the indexer's wall and CPU seconds."""
    (work / "env.json").write_text("[]")  # no pip queries: the corpus is the whole project
    started, cpu = time.monotonic(), _children_cpu()
    command = [str(INDEXER), "index", ".", "--project-name", "stdlib", "--project-version", "3.11"]
    command += ["--environment", str(work / "env.json"), "--output", str(work / "index.scip")]
    subprocess.run(command, cwd=root, check=True, capture_output=True)
    return (work / "index.scip").read_bytes(), time.monotonic() - started, _children_cpu() - cpu


Usage = tuple[str, str, str, int]  # path, name, defining path, definition line


def sample(root: Path, data: bytes, count: int, seed: int) -> tuple[list[Usage], list[tuple[str, str]]]:
    """References to symbols the index defines once in the corpus, and definitions, named as the source spells
    them; only names that mean one symbol throughout their file (the tools take a name, not a position)."""
    index = scip.parse_index(data)
    definitions: dict[str, list[tuple[str, int]]] = {}
    for document in index.documents:
        for o in document.occurrences:
            if o.symbol_roles & scip.DEFINITION and not o.symbol.startswith("local "):
                definitions.setdefault(o.symbol, []).append((document.relative_path, o.range[0] + 1))
    usages: set[Usage] = set()
    defs: set[tuple[str, str]] = set()
    for document in index.documents:
        lines = (root / document.relative_path).read_text().split("\n")
        meanings: dict[str, set[str]] = {}
        candidates: list[tuple[str, str, bool]] = []
        for o in document.occurrences:
            if len(o.range) != 3:
                continue
            name = lines[o.range[0]][o.range[1] : o.range[2]]
            meanings.setdefault(name, set()).add(o.symbol)
            parsed = scip.parse_symbol(o.symbol)
            if parsed is None or parsed.local or len(definitions.get(o.symbol, [])) != 1:
                continue
            if name == parsed.name and parsed.kind() != "module" and not name.startswith("__"):
                candidates.append((name, o.symbol, bool(o.symbol_roles & scip.DEFINITION)))
        for name, symbol, is_definition in candidates:
            if len(meanings[name]) != 1:
                continue
            if is_definition:
                defs.add((document.relative_path, name))
            else:
                usages.add((document.relative_path, name, *definitions[symbol][0]))
    rng = random.Random(seed)
    return rng.sample(sorted(usages), min(count, len(usages))), rng.sample(sorted(defs), min(count, len(defs)))


def timed(call: Callable[..., Any], *args: Any) -> tuple[float, float, Any]:
    """(wall ms, CPU ms of this thread, answer), the median of 3 runs: CPU time is the steady figure under load."""
    runs = []
    for _ in range(3):
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            out = call(*args)
        except CodewellError as exc:  # a miss is an answer here
            out = exc
        runs.append(((time.perf_counter() - wall) * 1000, (time.thread_time() - cpu) * 1000))
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs), out


Timings = tuple[list[float], list[float], list[float], list[float], int, int]


def measure(nav: CodeNavService, usages: list[Usage], defs: list[tuple[str, str]]) -> Timings:
    """Wall and CPU ms of go_to_definition and find_references; top-1 = scip-python's definition; labelled precise."""
    def_wall, def_cpu, ref_wall, ref_cpu, same, labelled = [], [], [], [], 0, 0
    for path, name, def_path, def_line in usages:
        wall, cpu, out = timed(nav.go_to_definition, INTERNAL, REPO, path, name)
        def_wall.append(wall)
        def_cpu.append(cpu)
        top = out.candidates[0] if isinstance(out, Definitions) and out.candidates else None
        same += top is not None and (top.path, top.line) == (def_path, def_line)
        labelled += top is not None and top.how == PRECISE
    for path, name in defs:
        wall, cpu, _ = timed(nav.find_references, INTERNAL, REPO, path, name)
        ref_wall.append(wall)
        ref_cpu.append(cpu)
    return def_wall, def_cpu, ref_wall, ref_cpu, same, labelled


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--packages", default="json,email,logging")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--seed", type=int, default=16)
    args = parser.parse_args()
    packages = args.packages.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "corpus"
        source_bytes = make_corpus(root, packages)
        data, index_wall, index_cpu = run_indexer(root, Path(tmp))
        data_dir = Path(tmp) / "data"
        runtime = Runtime.open(Settings.from_env({}, data_dir=data_dir, database_url=f"sqlite:///{data_dir}/cw.db"))
        runtime.db.upgrade()
        register_local_repo(runtime, root, REPO)
        nav = runtime.get(CodeNavService)
        resolved = runtime.get(RepoService).resolve(INTERNAL, REPO)
        nav.index_revision(resolved.repo, resolved.commit).close()  # the symbol index, built before timing
        usages, defs = sample(root, data, args.samples, args.seed)
        syntactic = measure(nav, usages, defs)
        started, upload_cpu = time.perf_counter(), time.thread_time()
        summary = runtime.get(PreciseService).upload(INTERNAL, REPO, "main", data)
        upload_seconds, upload_cpu = time.perf_counter() - started, time.thread_time() - upload_cpu
        precise = measure(nav, usages, defs)
        runtime.close()

    p50 = statistics.median
    n = max(1, len(usages))
    print(f"corpus: {', '.join(packages)}; {source_bytes / 1e6:.2f} MB of Python")
    print(f"scip-python: {index_wall:.1f} s wall, {index_cpu:.1f} s CPU; index {len(data) / 1e6:.2f} MB")
    print(
        f"upload: {upload_seconds:.2f} s wall, {upload_cpu:.2f} s CPU; {summary.documents} documents, "
        f"{summary.occurrences} occurrences, {summary.rows} rows"
    )
    print(f"samples: {len(usages)} usages, {len(defs)} definitions (seed {args.seed})")
    print(
        f"top-1 = scip-python's definition: syntactic {syntactic[4]}/{len(usages)} ({100 * syntactic[4] / n:.1f} %), "
        f"after the upload {precise[4]}/{len(usages)}, labelled precise {precise[5]}"
    )
    for label, i in (("go_to_definition", 0), ("find_references", 2)):
        for unit, j in (("wall", i), ("CPU", i + 1)):
            before, after = p50(syntactic[j]), p50(precise[j])
            print(f"{label} p50 {unit}: syntactic {before:.2f} ms, precise {after:.2f} ms (ratio {after / before:.2f})")


if __name__ == "__main__":
    main()
