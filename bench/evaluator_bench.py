"""Evaluator benchmark: latency of scripts through the warm worker pool, against baselines in the same run.

Baselines: the same script run in-process (the Lua sandbox alone, no process boundary), a cold worker
process per script (what the pool avoids), and for a search-calling script the direct SearchService call
(the pipe round trip's overhead). Target: a trivial script costs ≤ 20 ms through the pool.
Writes bench/.results/evaluator.json.
Run: python bench/evaluator_bench.py [--runs 300]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from codewell.core.actors import INTERNAL
from codewell.core.settings import Settings
from codewell.db import Database
from codewell.evaluator.pool import RunLimits, Worker
from codewell.evaluator.sandbox import SandboxLimits, run_script
from codewell.evaluator.service import EvaluatorService
from codewell.repos.service import register_local_repo
from codewell.runtime import Runtime
from codewell.search.service import SearchService

OUT = Path(__file__).with_name(".results")
TRIVIAL = "return 1"
SMALL = (
    "local t = {} for i = 1, 1000 do t[#t + 1] = i * 2 end local s = 0 for _, v in ipairs(t) do s = s + v end return s"
)
SEARCH = (
    "local files = search('needle count:1000') local n = 0 for _, f in ipairs(files) do n = n + #f.matches end return n"
)


def timings(fn: Callable[[], object], runs: int) -> dict[str, float]:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return {
        "p50_ms": round(statistics.median(samples), 3),
        "p95_ms": round(samples[int(len(samples) * 0.95) - 1], 3),
        "mean_ms": round(statistics.fmean(samples), 3),
    }


def no_host(name: str, args: list[Any]) -> tuple[str, Any, str]:
    return "error", "no host", ""


def cold_process(script: str) -> None:
    worker = Worker(address_space=512 * 1024 * 1024, max_frame=1 << 20)
    try:
        worker.run(script, RunLimits(SandboxLimits()), lambda n, a, d: {"status": "error", "value": "", "kind": ""})
    finally:
        worker.kill()


def corpus_runtime(root: Path) -> Runtime:
    """A runtime on SQLite with one indexed repository of 300 files, 3 'needle' lines each."""
    source = root / "src"
    source.mkdir()
    for n in range(300):
        lines = [f"line {i} of file {n}" for i in range(200)]
        for i in (10, 100, 190):
            lines[i] = f"needle {n}-{i}"
        (source / f"f{n:03d}.txt").write_text("\n".join(lines) + "\n")
    env = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@x"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "corpus"]):
        subprocess.run(["git", *args], cwd=source, check=True, env={**env, "PATH": "/usr/bin:/bin"})
    settings = Settings.from_env({}, data_dir=root / "data", database_url=f"sqlite:///{root / 'cw.db'}")
    Database(settings.database_url).upgrade()
    runtime = Runtime.open(settings)
    repo = register_local_repo(runtime, source, "bench/corpus")
    runtime.get(SearchService).index(repo)
    return runtime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=300)
    args = parser.parse_args()
    results: dict[str, Any] = {"runs": args.runs}
    with tempfile.TemporaryDirectory() as tmp:
        runtime = corpus_runtime(Path(tmp))
        service = EvaluatorService(runtime, pool_size=2)
        service.warm()
        try:
            for name, script in (("trivial", TRIVIAL), ("small_loop", SMALL)):
                in_process = timings(lambda s=script: run_script(s, SandboxLimits(), no_host), args.runs)
                pooled = timings(lambda s=script: service.run(INTERNAL, s), args.runs)
                results[name] = {"pool": pooled, "in_process_baseline": in_process}
            results["trivial"]["cold_process_baseline"] = timings(lambda: cold_process(TRIVIAL), 20)
            search = runtime.get(SearchService)
            expected = service.run(INTERNAL, SEARCH).value
            direct = timings(lambda: search.search(INTERNAL, "needle count:1000"), args.runs // 3)
            scripted = timings(lambda: service.run(INTERNAL, SEARCH), args.runs // 3)
            results["search_900_matches"] = {"pool": scripted, "direct_search_baseline": direct, "value": expected}
        finally:
            service.close()
            runtime.close()

    trivial = results["trivial"]
    pool_p50 = trivial["pool"]["p50_ms"]
    print(
        f"trivial script through the pool: p50 {pool_p50:.2f} ms, "
        f"p95 {trivial['pool']['p95_ms']:.2f} ms (target ≤ 20 ms)"
    )
    print(
        f"  vs in-process sandbox: {pool_p50 / trivial['in_process_baseline']['p50_ms']:.1f}x; "
        f"vs a cold process per script: {pool_p50 / trivial['cold_process_baseline']['p50_ms']:.3f}x "
        f"({trivial['cold_process_baseline']['p50_ms']:.1f} ms)"
    )
    small = results["small_loop"]
    print(
        f"small loop script: p50 {small['pool']['p50_ms']:.2f} ms, "
        f"{small['pool']['p50_ms'] / small['in_process_baseline']['p50_ms']:.1f}x in-process"
    )
    found = results["search_900_matches"]
    print(
        f"search script ({found['value']} matches): p50 {found['pool']['p50_ms']:.2f} ms, "
        f"{found['pool']['p50_ms'] / found['direct_search_baseline']['p50_ms']:.2f}x the direct search "
        f"({found['direct_search_baseline']['p50_ms']:.2f} ms)"
    )
    results["target_met"] = pool_p50 <= 20
    OUT.mkdir(exist_ok=True)
    (OUT / "evaluator.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
