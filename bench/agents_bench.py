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

from codewell.agents import answering
from codewell.agents.naming import named_repositories
from codewell.agents.retrieval import extract_terms, retrieve
from codewell.agents.service import AgentService
from codewell.capabilities import wire
from codewell.core.actors import INTERNAL, Actor
from codewell.core.errors import CodewellError, InvalidInput
from codewell.core.settings import Settings
from codewell.repos.service import RepoService, register_local_repo
from codewell.runtime import Runtime
from codewell.search.service import SearchService
from gojs_corpus import SPECS as GOJS_SPECS
from gojs_corpus import corpus_repo as gojs_repo
from gojs_corpus import load_sources as gojs_sources

HERE = Path(__file__).parent
RESULTS = HERE / ".results"
TASKS = HERE / "agents_tasks.json"
# Go and JavaScript tasks and deep search questions written by someone who did not write the pipeline (#31);
# their corpus (npm tarballs, Debian golang-*-dev packages, and the PyPI packages above) is built offline by
# bench/gojs_corpus.py.
GOJS_TASKS, QUESTIONS = GOJS_SPECS
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


_QUOTED_LINE = re.compile(r"^ *```\n(?: *\d+: .*\n)+", re.MULTILINE)


def run_questions(runtime: Runtime, actor: Actor, questions: list[dict[str, Any]], verbose: bool) -> dict[str, Any]:
    """Deep search without a model (the job's answerer: `answering.answer(purpose="deepsearch")`, no model
    configured) on each question: does the answer quote code, cite only the repositories the question allows,
    and cite at least one expected file? Baseline: keyword_search with the question's words (ORed, within the
    allowed repositories), its first 8 files."""
    readable = sorted(r.name for r in runtime.get(RepoService).readable(actor))
    rows: list[dict[str, Any]] = []
    for q in questions:
        named = q.get("repos")
        allowed = set(readable) if named in (None, "all", []) else {named} if isinstance(named, str) else set(named)
        expected = {(e["repo"], e["path"]) for e in q["expected"]}
        t = time.perf_counter()
        answer = answering.answer(runtime, actor, q["question"], purpose="deepsearch", scope=None)
        ms = (time.perf_counter() - t) * 1000
        cited = list(dict.fromkeys((c.repo, c.path) for c in answer.sources))
        words = extract_terms(q["question"], ignore=frozenset(w for r in allowed for w in re.split(r"[^a-z0-9]+", r)))
        pattern = " OR ".join([*words.identifiers, *words.keywords, *(f'"{x}"' for x in words.quoted)])
        scope = "repo:^(?:" + "|".join(re.escape(r) for r in sorted(allowed)) + ")$ "
        t = time.perf_counter()
        try:
            found = runtime.get(SearchService).search(actor, f"{scope}({pattern})")
            base = list(dict.fromkeys((f.repo, f.path) for f in found.files))[:8]
        except CodewellError:
            base = []
        row = {
            "id": q["id"],
            "quotes_code": bool(answer.sources) and bool(_QUOTED_LINE.search(answer.text)),
            "only_allowed": all(repo in allowed for repo, _ in cited),
            "hit": bool(expected & set(cited)),
            "rank": next((i + 1 for i, f in enumerate(cited) if f in expected), None),
            "baseline_hit": bool(expected & set(base)),
            "ms": ms,
            "baseline_ms": (time.perf_counter() - t) * 1000,
            "cited": [f"{r}:{p}" for r, p in cited],
        }
        rows.append(row)
        if verbose or not (row["quotes_code"] and row["only_allowed"] and row["hit"]):
            mark = "ok  " if row["hit"] and row["only_allowed"] and row["quotes_code"] else "MISS"
            print(f"{mark} {q['id']}: rank {row['rank']} {ms:.0f} ms {row['cited'][:3]} want {sorted(expected)}")
    n = max(1, len(rows))
    return {
        "questions": len(rows),
        "quotes_code": 100.0 * sum(r["quotes_code"] for r in rows) / n,
        "only_allowed": 100.0 * sum(r["only_allowed"] for r in rows) / n,
        "cites_expected": 100.0 * sum(r["hit"] for r in rows) / n,
        "baseline_cites_expected": 100.0 * sum(r["baseline_hit"] for r in rows) / n,
        "p50_ms": statistics.median(r["ms"] for r in rows) if rows else 0.0,
        "baseline_p50_ms": statistics.median(r["baseline_ms"] for r in rows) if rows else 0.0,
        "misses": [r for r in rows if not (r["quotes_code"] and r["only_allowed"] and r["hit"])],
    }


def run_tasks(runtime: Runtime, actor: Actor, tasks: list[dict[str, Any]], verbose: bool) -> list[dict[str, Any]]:
    """code_finder (no model) on each task, and the keyword_search baseline: the rank of an expected file."""
    repos = runtime.get(RepoService)
    rows: list[dict[str, Any]] = []
    for task in tasks:
        expected = [e["path"] for e in task["expected"]]
        t, cpu = time.perf_counter(), time.process_time()
        retried = False
        try:
            try:
                answer = runtime.get(AgentService).code_finder(actor, task["task"])
            except InvalidInput:
                if named_repositories(task["task"], repos.readable_refs(actor)):
                    raise
                # The task names no repository: code_finder declines, and its hint tells the agent to name
                # one; asked again the way an agent would, timed together.
                retried = True
                answer = runtime.get(AgentService).code_finder(actor, f"{task['task']} (in {task['repo']})")
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
            "retried_with_repository": retried,
        }
        rows.append(row)
        if verbose or row["rank"] is None or row["rank"] > 3:
            mark = "ok " if row["rank"] is not None and row["rank"] <= 3 else "MISS"
            print(f"{mark} {task['id']}: rank {row['rank']} {ours_ms:.0f} ms {files[:3]} want {expected} {error}")
    return rows


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = max(1, len(rows))

    def acc(key: str, k: int) -> float:
        return 100.0 * sum(1 for r in rows if r[key] is not None and r[key] <= k) / n

    def stats(prefix: str) -> dict[str, float]:
        return {
            "p50_ms": statistics.median(r[f"{prefix}ms"] for r in rows),
            "p95_ms": _percentile([r[f"{prefix}ms"] for r in rows], 95),
            "cpu_p50_ms": statistics.median(r[f"{prefix}cpu_ms"] for r in rows),
            "cpu_p95_ms": _percentile([r[f"{prefix}cpu_ms"] for r in rows], 95),
        }

    return {
        "tasks": len(rows),
        "retried_with_repository": sum(1 for r in rows if r.get("retried_with_repository")),
        "code_finder": {"top1": acc("rank", 1), "top3": acc("rank", 3), "top5": acc("rank", 5), **stats("")},
        "baseline_keyword_search": {
            "top1": acc("baseline_rank", 1),
            "top3": acc("baseline_rank", 3),
            **stats("baseline_"),
        },
        "misses": [r for r in rows if r["rank"] is None or r["rank"] > 3],
    }


def _print_tasks(label: str, summary: dict[str, Any]) -> None:
    cf, bl = summary["code_finder"], summary["baseline_keyword_search"]
    retried = summary["retried_with_repository"]
    again = f" ({retried} name no repository: declined, then asked again with it named)" if retried else ""
    print(
        f"{label}: {summary['tasks']} tasks{again}\n"
        f"  code_finder (no model): top-1 {cf['top1']:.1f} %  top-3 {cf['top3']:.1f} %  "
        f"p50 {cf['p50_ms']:.0f} ms  p95 {cf['p95_ms']:.0f} ms  (CPU p50 {cf['cpu_p50_ms']:.0f} ms  "
        f"p95 {cf['cpu_p95_ms']:.0f} ms)\n"
        f"  baseline keyword_search: top-1 {bl['top1']:.1f} %  top-3 {bl['top3']:.1f} %  "
        f"p50 {bl['p50_ms']:.0f} ms  p95 {bl['p95_ms']:.0f} ms  (CPU p50 {bl['cpu_p50_ms']:.0f} ms  "
        f"p95 {bl['cpu_p95_ms']:.0f} ms)"
    )


def build_corpus(
    runtime: Runtime, spec: dict[str, Any], tasks: list[dict[str, Any]], questions: bool
) -> tuple[dict[str, Path], float]:
    """Register and index the repositories the tasks use (every repository of the Go/JS corpus when there are
    deep search questions, so that citing only the allowed ones means something); (name → path, seconds)."""
    repos = runtime.get(RepoService)
    wanted = {t["repo"] for t in tasks}
    sources = gojs_sources() if questions or any(not t["repo"].startswith("pypi/") for t in tasks) else {}
    if questions:
        wanted |= set(sources)
    corpus: dict[str, Path] = {}
    for package in spec["packages"]:
        if f"pypi/{package['name']}" in wanted:
            corpus[f"pypi/{package['name']}"] = corpus_repo(package)
    for name, source in sources.items():
        if name in wanted and name not in corpus:
            corpus[name] = gojs_repo(name, source)
    known = {r.name for r in repos.readable(INTERNAL)}
    build_seconds = 0.0
    for name, path in corpus.items():
        if name not in known:
            t = time.perf_counter()
            register_local_repo(runtime, path, name)  # wired: mirrored, then indexed (shard, codenav, nls)
            runtime.get(SearchService).index(repos.get(INTERNAL, name))
            build_seconds += time.perf_counter() - t
    return corpus, build_seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="", help="run the tasks and questions whose id contains this")
    parser.add_argument(
        "--set", choices=("all", "python", "gojs"), default="all",
        help="python: the PyPI tasks; gojs: the Go/JavaScript tasks and the deep search questions",
    )  # fmt: skip
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--data", default="", help="data dir to (re)use; default: a fresh temporary one")
    args = parser.parse_args()
    spec = json.loads(TASKS.read_text())
    tasks = [t for t in spec["tasks"] if args.only in t["id"]] if args.set != "gojs" else []
    gojs = json.loads(GOJS_TASKS.read_text()) if args.set != "python" and GOJS_TASKS.exists() else {"tasks": []}
    asked = json.loads(QUESTIONS.read_text()) if args.set != "python" and QUESTIONS.exists() else {"questions": []}
    gojs_tasks = [t for t in gojs["tasks"] if args.only in t["id"]]
    questions = [q for q in asked["questions"] if args.only in q["id"]]
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(args.data) if args.data else Path(tmp) / "data"
        data.mkdir(parents=True, exist_ok=True)
        settings = Settings.from_env({}, data_dir=data, database_url=f"sqlite:///{data}/codewell.db")
        runtime = Runtime.open(settings)
        runtime.db.upgrade()
        wire(runtime)
        repos = runtime.get(RepoService)
        corpus, build_seconds = build_corpus(runtime, spec, [*tasks, *gojs_tasks], bool(questions))
        actor = INTERNAL
        # Warm-up (first loads of shards, symbol tables, nls indexes), not timed.
        for name in corpus:
            retrieve(runtime, actor, "parse", scope=repos.resolve(actor, name))
        results: dict[str, Any] = {"load_average": [], "index_build_seconds": round(build_seconds, 1)}
        if tasks:
            results["python"] = summarize(run_tasks(runtime, actor, tasks, args.verbose))
            results["python"]["packages"] = {p["name"]: p["version"] for p in spec["packages"]}
            results["deepsearch_retrieve_scope_none"] = check_deepsearch(
                runtime, actor, [t["task"] for t in tasks[:10]]
            )
        if gojs_tasks:
            results["gojs"] = summarize(run_tasks(runtime, actor, gojs_tasks, args.verbose))
        if questions:
            results["deepsearch"] = run_questions(runtime, actor, questions, args.verbose)
        results["load_average"] = list(os.getloadavg())
        runtime.close()
    print(f"corpus: {len(corpus)} repositories (index build {build_seconds:.1f} s)")
    if "python" in results:
        _print_tasks("PyPI tasks (bench/agents_tasks.json)", results["python"])
        print(f"deep search retrieve(scope=None): {results['deepsearch_retrieve_scope_none']}")
    if "gojs" in results:
        _print_tasks("Go/JavaScript tasks (bench/agents_tasks_gojs.json)", results["gojs"])
    if "deepsearch" in results:
        d = results["deepsearch"]
        print(
            f"deep search without a model (bench/deepsearch_questions.json): {d['questions']} questions  "
            f"quotes code {d['quotes_code']:.0f} %  cites only allowed repositories {d['only_allowed']:.0f} %  "
            f"cites an expected file {d['cites_expected']:.0f} %  p50 {d['p50_ms']:.0f} ms\n"
            f"  baseline keyword_search (first 8 files): cites an expected file {d['baseline_cites_expected']:.0f} %  "
            f"p50 {d['baseline_p50_ms']:.0f} ms"
        )
    print(f"load average during the run: {results['load_average']}")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"agents-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"summary: {out}")


if __name__ == "__main__":
    main()
