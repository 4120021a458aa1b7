"""code_finder without a model (the deterministic retrieval pipeline) on Python nobody here wrote (#18).

Corpus: the packages listed in `bench/agents_tasks.json` at the exact versions recorded there, one git
repository each under /var/tmp/codewell-bench/agents/<name>-<version>/ (built once): the package folders as
installed in the venv when the installed version is the recorded one, else from the sdist
(`pip download --no-binary :all: --no-deps name==version`). They are registered in a fresh data dir as
`pypi/<name>` and indexed like any repository (search shard, codenav symbols, nls chunks).

Tasks: "where is X done in pypi/Y" requests, each with the file(s) that answer it, checked by reading the code
(the symbol and line are recorded beside the file). code_finder (`AgentService.code_finder`, no model
configured) runs each task at the service API (as the internal actor, which reads every repository); a hit at
k when an expected file is among the first k cited files. Baseline, in the same process: keyword_search
(`SearchService.search`) with the task's own words (question and stop words dropped, ORed, `repo:` scoped)
→ its first 3 files. Printed: top-1/top-3 file accuracy, p50/p95 latency (wall and this process's CPU time:
the machine may be shared) of both, and the deep search check (`retrieve(scope=None)`: every cited range
read back at its commit); JSON summary under bench/.results/.

    .venv/bin/python bench/agents_bench.py [--only NAME] [--verbose] [--data DIR]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

from codewell.agents.retrieval import extract_terms, retrieve
from codewell.agents.service import AgentService
from codewell.capabilities import wire
from codewell.core.actors import INTERNAL, Actor
from codewell.core.errors import CodewellError
from codewell.core.settings import Settings
from codewell.repos.service import RepoService, register_local_repo
from codewell.runtime import Runtime
from codewell.search.service import SearchService

HERE = Path(__file__).parent
RESULTS = HERE / ".results"
TASKS = HERE / "agents_tasks.json"
BENCH_DIR = Path(os.environ.get("CODEWELL_BENCH_DIR", "/var/tmp/codewell-bench")) / "agents"
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


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, stdout=subprocess.DEVNULL)


def _from_sdist(name: str, version: str, folders: list[str], target: Path) -> None:
    """Copy `folders` out of the sdist of name==version (downloaded with pip)."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps", "-d", tmp,
             f"{name}=={version}"],
            check=True,
        )  # fmt: skip
        (archive,) = list(Path(tmp).iterdir())
        unpacked = Path(tmp) / "src"
        if archive.suffix == ".zip":
            with zipfile.ZipFile(archive) as z:
                z.extractall(unpacked)
        else:
            with tarfile.open(archive) as t:
                t.extractall(unpacked, filter="data")
        (root,) = list(unpacked.iterdir())
        for folder in folders:
            source = next(p for p in (root / "src" / folder, root / folder) if p.is_dir())
            # Without the test folders some sdists ship inside the package (wheels leave them out): the same
            # files as the installed package.
            shutil.copytree(source, target / folder, ignore=shutil.ignore_patterns("__pycache__", "*.so", "tests"))


def corpus_repo(package: dict[str, Any]) -> Path:
    """The git repository of one package at its recorded version (built once)."""
    name, version, folders = package["name"], package["version"], package["folders"]
    target = BENCH_DIR / f"{name}-{version}"
    if (target / ".git").is_dir():
        return target
    tmp = BENCH_DIR / f"{name}-{version}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        installed = importlib.metadata.version(package.get("dist", name))
    except importlib.metadata.PackageNotFoundError:
        installed = None
    if installed == version:
        for folder in folders:
            shutil.copytree(SITE / folder, tmp / folder, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    else:
        _from_sdist(package.get("dist", name), version, folders, tmp)
    _git(tmp, "init", "-q", "-b", "main")
    _git(tmp, "add", "-A", ".")
    _git(tmp, "commit", "-q", "-m", f"{name} {version}")
    tmp.rename(target)
    return target


def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def baseline_query(task: str, repo: str) -> str:
    terms = extract_terms(task, ignore=frozenset(re.split(r"[^a-z0-9_]+", repo.lower())))
    words = [*terms.identifiers, *terms.keywords]
    quoted = [f'"{q}"' for q in terms.quoted]
    return f"repo:^{re.escape(repo)}$ (" + " OR ".join([*words, *quoted]) + ")"


def _rank(files: list[str], expected: list[str]) -> int | None:
    return next((i + 1 for i, f in enumerate(files) if f in expected), None)


def check_deepsearch(runtime: Runtime, actor: Actor, questions: list[str]) -> dict[str, Any]:
    """`retrieve(scope=None)` (deep search without a model): every cited range exists at its commit."""
    repos = runtime.get(RepoService)
    cited = bad = 0
    latencies: list[float] = []
    for question in questions:
        t = time.perf_counter()
        answer = retrieve(runtime, actor, question, scope=None, deadline=time.monotonic() + 20)
        latencies.append((time.perf_counter() - t) * 1000)
        for c in answer.sources:
            cited += 1
            content = repos.read_file(actor, c.repo, c.path, c.start_line, c.end_line, c.commit)
            if content.commit != c.commit or content.start_line != c.start_line or content.end_line != c.end_line:
                bad += 1
        if not answer.sources or "No model wrote this answer" not in answer.notice:
            bad += 1
    return {"questions": len(questions), "citations": cited, "bad": bad, "p50_ms": statistics.median(latencies)}


def main() -> None:  # noqa: PLR0915
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="", help="run the tasks whose id contains this")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--data", default="", help="data dir to (re)use; default: a fresh temporary one")
    args = parser.parse_args()
    spec = json.loads(TASKS.read_text())
    tasks = [t for t in spec["tasks"] if args.only in t["id"]]
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(args.data) if args.data else Path(tmp) / "data"
        fresh = not (data / "codewell.db").exists()
        data.mkdir(parents=True, exist_ok=True)
        settings = Settings.from_env({}, data_dir=data, database_url=f"sqlite:///{data}/codewell.db")
        runtime = Runtime.open(settings)
        runtime.db.upgrade()
        wire(runtime)
        repos = runtime.get(RepoService)
        build_seconds = 0.0
        # Only the repositories the selected tasks name (all of them unless --only narrows the tasks).
        wanted = {t["repo"] for t in tasks}
        packages = [p for p in spec["packages"] if f"pypi/{p['name']}" in wanted]
        for package in packages:
            name = f"pypi/{package['name']}"
            path = corpus_repo(package)
            if fresh:
                t = time.perf_counter()
                register_local_repo(runtime, path, name)  # wired: mirrored, then indexed (shard, codenav, nls)
                runtime.get(SearchService).index(repos.get(INTERNAL, name))
                build_seconds += time.perf_counter() - t
        actor = INTERNAL
        # Warm-up (first loads of shards, symbol tables, nls indexes), not timed.
        for package in packages:
            retrieve(runtime, actor, "parse", scope=repos.resolve(actor, f"pypi/{package['name']}"))
        rows: list[dict[str, Any]] = []
        for task in tasks:
            expected = [e["path"] for e in task["expected"]]
            t, cpu = time.perf_counter(), time.process_time()
            try:
                answer = runtime.get(AgentService).code_finder(actor, task["task"])
                files = list(dict.fromkeys(c.path for c in answer.sources))
                error = ""
            except CodewellError as exc:
                files, error = [], str(exc)
            ours_ms = (time.perf_counter() - t) * 1000
            ours_cpu_ms = (time.process_time() - cpu) * 1000
            t, cpu = time.perf_counter(), time.process_time()
            try:
                found = runtime.get(SearchService).search(actor, baseline_query(task["task"], task["repo"]))
                base_files = [f.path for f in found.files]
            except CodewellError:
                base_files = []
            base_ms = (time.perf_counter() - t) * 1000
            base_cpu_ms = (time.process_time() - cpu) * 1000
            row = {
                "id": task["id"],
                "rank": _rank(files[:5], expected),
                "baseline_rank": _rank(base_files[:3], expected),
                "ms": ours_ms,
                "baseline_ms": base_ms,
                "cpu_ms": ours_cpu_ms,
                "baseline_cpu_ms": base_cpu_ms,
                "files": files[:5],
                "error": error,
            }
            rows.append(row)
            if args.verbose or row["rank"] is None or row["rank"] > 3:
                mark = "ok " if row["rank"] is not None and row["rank"] <= 3 else "MISS"
                print(f"{mark} {task['id']}: rank {row['rank']} {ours_ms:.0f} ms {files[:3]} want {expected} {error}")
        deep = check_deepsearch(runtime, actor, [t["task"] for t in tasks[:10]])
        runtime.close()
    n = len(rows)

    def acc(key: str, k: int) -> float:
        return 100.0 * sum(1 for r in rows if r[key] is not None and r[key] <= k) / n

    summary: dict[str, Any] = {
        "tasks": n,
        "packages": {p["name"]: p["version"] for p in spec["packages"]},
        "code_finder": {
            "top1": acc("rank", 1),
            "top3": acc("rank", 3),
            "top5": acc("rank", 5),
            "p50_ms": statistics.median(r["ms"] for r in rows),
            "p95_ms": _percentile([r["ms"] for r in rows], 95),
            "cpu_p50_ms": statistics.median(r["cpu_ms"] for r in rows),
            "cpu_p95_ms": _percentile([r["cpu_ms"] for r in rows], 95),
        },
        "baseline_keyword_search": {
            "top1": acc("baseline_rank", 1),
            "top3": acc("baseline_rank", 3),
            "p50_ms": statistics.median(r["baseline_ms"] for r in rows),
            "p95_ms": _percentile([r["baseline_ms"] for r in rows], 95),
            "cpu_p50_ms": statistics.median(r["baseline_cpu_ms"] for r in rows),
            "cpu_p95_ms": _percentile([r["baseline_cpu_ms"] for r in rows], 95),
        },
        "load_average": list(os.getloadavg()),
        "deepsearch_retrieve_scope_none": deep,
        "index_build_seconds": round(build_seconds, 1),
        "misses": [r for r in rows if r["rank"] is None or r["rank"] > 3],
    }
    cf, bl = summary["code_finder"], summary["baseline_keyword_search"]
    print(f"{n} tasks over {len(spec['packages'])} packages (index build {build_seconds:.1f} s)")
    print(
        f"code_finder (no model): top-1 {cf['top1']:.1f} %  top-3 {cf['top3']:.1f} %  "
        f"p50 {cf['p50_ms']:.0f} ms  p95 {cf['p95_ms']:.0f} ms  "
        f"(CPU p50 {cf['cpu_p50_ms']:.0f} ms  p95 {cf['cpu_p95_ms']:.0f} ms)"
    )
    print(
        f"baseline keyword_search: top-1 {bl['top1']:.1f} %  top-3 {bl['top3']:.1f} %  "
        f"p50 {bl['p50_ms']:.0f} ms  p95 {bl['p95_ms']:.0f} ms  "
        f"(CPU p50 {bl['cpu_p50_ms']:.0f} ms  p95 {bl['cpu_p95_ms']:.0f} ms)"
    )
    print(f"load average during the run: {summary['load_average']}")
    print(f"deep search retrieve(scope=None): {deep}")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"agents-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"summary: {out}")


if __name__ == "__main__":
    main()
