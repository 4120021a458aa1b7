"""Repos benchmark: read_file / list_files latency on the Linux corpus, and mirroring 200 local repositories.

Figures are compared with git itself in the same run:
  read_file   vs `git cat-file -p <rev>:<path>` (one process per read, what a naive server does) and
              vs a long-lived `git cat-file --batch` (lock-step, one blob at a time)
  list_files  vs `git ls-tree <rev>:<dir>` (one process per listing)
  mirroring   200 small local repositories through the site config + sync jobs; the peak number of
              concurrent git processes (direct children of this process, sampled from /proc every 5 ms)
              must stay ≤ 2 per core.
Run: python bench/repos_bench.py [--reads 400] [--lists 200] [--repos 200]   (needs bench/corpus.py first)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchkit import open_runtime
from codewell.config.schema import SiteConfig
from codewell.core.actors import INTERNAL
from codewell.jobs.runner import JobRunner
from codewell.jobs.service import JobService
from codewell.repos import git as gitmod
from codewell.repos.service import RepoService
from codewell.runtime import Runtime

BENCH_DIR = Path(os.environ.get("CODEWELL_BENCH_DIR", "/var/tmp/codewell-bench"))
RESULTS = Path(__file__).parent / ".results"


def ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p90_ms": round(ordered[int(len(ordered) * 0.9)] * 1000, 3),
        "max_ms": round(ordered[-1] * 1000, 3),
    }


def timed(call: object, *args: object, **kwargs: object) -> float:
    assert callable(call)
    start = time.perf_counter()
    call(*args, **kwargs)
    return time.perf_counter() - start


def bench_reads(runtime: Runtime, corpus: Path, reads: int, lists: int) -> dict[str, object]:
    service = runtime.get(RepoService)
    start = time.perf_counter()
    repo = service.add_repo(INTERNAL, str(corpus), name="bench/linux")
    outcome = service.sync_repo(INTERNAL, repo.name)
    assert outcome.ok, outcome.error
    register_seconds = time.perf_counter() - start
    mirror = outcome.repo.mirror_path
    files = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", "main"], cwd=mirror, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    dirs = [*sorted({str(Path(f).parent) for f in files} - {"."}), ""]
    rng = random.Random(42)
    sample_files = rng.sample(files, reads)
    sample_dirs = rng.sample(dirs, min(lists, len(dirs)))
    sizes = [len(service.read_file(INTERNAL, repo.name, f).lines) for f in sample_files]  # warm-up pass

    read_ours = [timed(service.read_file, INTERNAL, repo.name, f) for f in sample_files]
    read_proc = [
        timed(subprocess.run, ["git", "cat-file", "-p", f"main:{f}"], cwd=mirror, capture_output=True, check=True)
        for f in sample_files
    ]
    read_batch = batch_cat_file(mirror, sample_files)
    for d in sample_dirs:
        service.list_files(INTERNAL, repo.name, d)  # warm-up
    list_ours = [timed(service.list_files, INTERNAL, repo.name, d) for d in sample_dirs]
    list_proc = [
        timed(subprocess.run, ["git", "ls-tree", f"main:{d}"], cwd=mirror, capture_output=True, check=True)
        for d in sample_dirs
    ]
    return {
        "corpus_files": len(files),
        "register_and_mirror_seconds": round(register_seconds, 2),
        "mean_lines_per_read": round(statistics.mean(sizes), 1),
        "read_file": ms(read_ours),
        "git_cat_file_process": ms(read_proc),
        "git_cat_file_batch": ms(read_batch),
        "list_files": ms(list_ours),
        "git_ls_tree_process": ms(list_proc),
        "read_file_vs_cat_file_process": round(statistics.median(read_proc) / statistics.median(read_ours), 2),
        "read_file_vs_cat_file_batch": round(statistics.median(read_batch) / statistics.median(read_ours), 2),
        "list_files_vs_ls_tree_process": round(statistics.median(list_proc) / statistics.median(list_ours), 2),
    }


def batch_cat_file(mirror: Path, paths: list[str]) -> list[float]:
    """Lock-step reads through one `git cat-file --batch` process (the best a git-CLI server can do)."""
    process = subprocess.Popen(
        ["git", "cat-file", "--batch"], cwd=mirror, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert process.stdin
    assert process.stdout
    samples = []
    for path in paths:
        start = time.perf_counter()
        process.stdin.write(f"main:{path}\n".encode())
        process.stdin.flush()
        header = process.stdout.readline().split()
        process.stdout.read(int(header[2]) + 1)
        samples.append(time.perf_counter() - start)
    process.stdin.close()
    process.wait()
    return samples


class GitProcessSampler:
    """Counts this process's direct `git` children every 5 ms and keeps the peak."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = str(os.getpid())
        while not self._stop.is_set():
            count = 0
            for entry in os.listdir("/proc"):
                if not entry.isdigit():
                    continue
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text()
                except OSError:
                    continue
                comm = stat[stat.index("(") + 1 : stat.rindex(")")]
                ppid = stat[stat.rindex(")") + 2 :].split()[1]
                if ppid == me and comm == "git":
                    count += 1
            self.peak = max(self.peak, count)
            time.sleep(0.005)

    def __enter__(self) -> GitProcessSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def make_small_repos(root: Path, count: int) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@example.com",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@example.com",
    }
    for n in range(count):
        repo = root / f"team{n % 10}" / f"repo{n:03d}"
        (repo / "src").mkdir(parents=True)
        for k in range(5):
            (repo / "src" / f"f{k}.c").write_text(f"int f{k}(void) {{ return {n * k}; }}\n" * 20)
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True, env=env)
        subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env=env)
        subprocess.run(["git", "commit", "-q", "-m", "init"], cwd=repo, check=True, env=env)


def bench_mirroring(runtime: Runtime, root: Path, count: int) -> dict[str, object]:
    make_small_repos(root, count)
    service = runtime.get(RepoService)
    runtime.site_config.write(SiteConfig.model_validate({"repositories": [{"kind": "local", "path": str(root)}]}))
    # The reconcile and sync jobs, run by a job runner with one thread per allowed git process.
    runner = JobRunner(
        runtime, role="bench", kinds=frozenset({"repos.reconcile", "repos.sync"}), concurrency=gitmod.GIT_PROCESS_LIMIT
    )
    gitmod.LIMITER.reset_max()

    def done() -> bool:
        states = [r.sync_state for r in service.all_repos(INTERNAL) if r.name.startswith("local/team")]
        return len(states) == count and all(s in ("ready", "failed") for s in states)

    start = time.perf_counter()
    with GitProcessSampler() as sampler:
        runtime.get(JobService).enqueue("repos.reconcile", "site", cause="config.changed")
        runner.start()
        while not done():
            time.sleep(0.05)
    seconds = time.perf_counter() - start
    runner.stop()
    repos = [r for r in service.all_repos(INTERNAL) if r.name.startswith("local/team")]
    return {
        "repos": count,
        "ready": sum(r.sync_state == "ready" for r in repos),
        "seconds": round(seconds, 2),
        "repos_per_second": round(count / seconds, 1),
        "cores": os.cpu_count(),
        "limit": gitmod.GIT_PROCESS_LIMIT,
        "peak_git_processes_sampled": sampler.peak,
        "peak_git_processes_limiter": gitmod.LIMITER.max_active,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reads", type=int, default=400)
    parser.add_argument("--lists", type=int, default=200)
    parser.add_argument("--repos", type=int, default=200)
    args = parser.parse_args()
    corpus = BENCH_DIR / "linux"
    if not (corpus / ".git").exists():
        sys.exit(f"corpus missing: run `python bench/corpus.py` first ({corpus})")
    with tempfile.TemporaryDirectory(prefix="repos-bench-") as tmp:
        runtime = open_runtime(Path(tmp) / "data")
        try:
            results = {"reads": bench_reads(runtime, corpus, args.reads, args.lists)}
            results["mirroring"] = bench_mirroring(runtime, Path(tmp) / "many", args.repos)
        finally:
            runtime.close()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "repos_bench.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
