"""History benchmark: commit index and history tools on 1,000 generated repositories (≥ 1M commits).

Data (generated once with `git fast-import`, kept under /var/tmp/codewell-bench/history, outside the tree):
  - N repositories (default 1000) × C commits (default 1000) on `main` (every 10th repo also has a
    `release` branch and tags), authors drawn from a pool of 3000 identities with a skewed distribution,
    messages from a vocabulary (with rare words), one line added/removed per commit (some with TODO).
  - one long linear history (default 200,000 commits), standing in for a real long-lived repository.
Targets (issue #7), each against a git baseline run over the same repositories in the same run:
  commit_search by message/author across all ≤ 200 ms p50       vs `git log --all --grep/--author -n 50` per repo
  get_contributor_repos ≤ 100 ms p50                            vs `git log --all --author` counting per repo
  diff_search over 100 repos for one year ≤ 2 s p50 (early stop) vs `git log --all -G -p --since -n 20` per repo
  incremental indexing of 1k new commits ≤ 5 s                   vs `git log --name-only` of those commits
Run: python bench/history_bench.py [--repos 1000] [--commits 1000] [--long 200000] [--database-url URL]
     [--runs 15] [--load-only] [--only diff_search,message]
     (--load-only: generate + first index, no cases; a later run reuses it. --only: cases by name substring)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from codewell.core.actors import INTERNAL
from codewell.core.settings import Settings
from codewell.history.service import HistoryService
from codewell.repos.service import RepoService
from codewell.runtime import Runtime

ROOT = Path(os.environ.get("CODEWELL_BENCH_DIR", "/var/tmp/codewell-bench")) / "history"
RESULTS = Path(__file__).parent / ".results"
START = 1_600_000_000  # 2020-09-13; the newest commits are about now
NOW = int(time.time())
WORDS = [
    "parser",
    "lexer",
    "cache",
    "config",
    "router",
    "handler",
    "scheduler",
    "client",
    "server",
    "index",
    "query",
    "planner",
    "buffer",
    "stream",
    "encoder",
    "decoder",
    "socket",
    "session",
    "token",
    "account",
    "upload",
    "storage",
    "backend",
    "frontend",
    "metrics",
    "logger",
]
VERBS = [
    "fix",
    "add",
    "remove",
    "refactor",
    "update",
    "improve",
    "rename",
    "document",
    "test",
    "optimize",
    "revert",
    "simplify",
]
RARE = ["zeppelin", "quokka", "narwhal", "axolotl"]  # each in ~0.05% of messages


def rng_author(rng: random.Random) -> tuple[str, str]:
    # Skewed: a few prolific authors, a long tail.
    n = int(rng.paretovariate(1.2)) % 3000
    return f"Dev{n:04d} Person{n % 97}", f"dev{n:04d}@corp{n % 7}.example"


def message(rng: random.Random) -> str:
    subject = f"{rng.choice(VERBS)}: {rng.choice(WORDS)} {rng.choice(WORDS)} handling"
    if rng.random() < 0.002:
        subject += f" ({rng.choice(RARE)})"
    body = f"Touches the {rng.choice(WORDS)} module.\nRefs: #{rng.randrange(1, 99999)}"
    return f"{subject}\n\n{body}\n"


def fast_import_stream(
    rng: random.Random,
    commits: int,
    t0: int,
    t1: int,
    *,
    branch: str = "main",
    parent: str | None = None,
    files: int = 20,
    window: int = 30,
) -> Iterator[bytes]:
    """A fast-import stream of `commits` linear commits on `branch`, each replacing one line of one file."""
    contents: dict[int, list[str]] = {}
    step = max(1, (t1 - t0) // max(commits, 1))
    for i in range(commits):
        author, email = rng_author(rng)
        when = t0 + i * step + rng.randrange(step)
        f = rng.randrange(files)
        lines = contents.setdefault(f, [])
        todo = " # TODO: revisit" if rng.random() < 0.05 else ""
        lines.append(f"value_{i} = {rng.choice(WORDS)}_{rng.randrange(10**6)}{todo}\n")
        if len(lines) > window:
            lines.pop(0)
        data = "".join(lines).encode()
        msg = message(rng).encode()
        head = f"commit refs/heads/{branch}\nmark :{i + 1}\n"
        head += f"author {author} <{email}> {when} +0000\ncommitter {author} <{email}> {when} +0000\n"
        out = head.encode() + f"data {len(msg)}\n".encode() + msg
        if i == 0 and parent:
            out += f"from {parent}\n".encode()
        out += f"M 100644 inline src/mod_{f}.py\ndata {len(data)}\n".encode() + data + b"\n"
        yield out


def fast_import(repo: Path, stream: Iterator[bytes], *, init: bool = True) -> None:
    if init:
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(repo)], check=True)
    proc = subprocess.Popen(["git", "--git-dir", str(repo), "fast-import", "--quiet"], stdin=subprocess.PIPE)
    assert proc.stdin is not None
    for chunk in stream:
        proc.stdin.write(chunk)
    proc.stdin.close()
    if proc.wait() != 0:
        raise SystemExit(f"fast-import failed for {repo}")


def generate_repo(index: int, commits: int) -> None:
    repo = ROOT / "src" / f"r{index:04d}.git"
    if (repo / "generated").exists():
        return
    rng = random.Random(index)
    fast_import(repo, fast_import_stream(rng, commits, START, NOW - 86400))
    if index % 10 == 0:
        git(repo, "branch", "release", "main~50")
        fast_import(
            repo,
            fast_import_stream(rng, 20, NOW - 40 * 86400, NOW - 86400, branch="release", parent="refs/heads/release^0"),
            init=False,
        )
        git(repo, "tag", "v1.0", "main~100")
    git(repo, "commit-graph", "write", "--reachable")
    (repo / "generated").write_text("ok")


def generate(repos: int, commits: int, long: int) -> float:
    started = time.perf_counter()
    (ROOT / "src").mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda i: generate_repo(i, commits), range(repos)))
    long_repo = ROOT / "src" / "long.git"
    if not (long_repo / "generated").exists():
        fast_import(
            long_repo, fast_import_stream(random.Random(7), long, START - 10 * 365 * 86400, NOW - 3600, files=400)
        )
        git(long_repo, "commit-graph", "write", "--reachable")
        (long_repo / "generated").write_text("ok")
    return time.perf_counter() - started


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(repo), *args], capture_output=True, text=True, check=True).stdout


def open_runtime(database_url: str | None) -> Runtime:
    data = ROOT / ("data-pg" if database_url else "data")
    settings = Settings.from_env({}, data_dir=data, database_url=database_url or f"sqlite:///{data}/codewell.db")
    runtime = Runtime.open(settings)
    runtime.db.upgrade()
    return runtime


def register_all(runtime: Runtime, repos: int) -> dict[str, float]:
    """Register + clone + index every repository (what the history.index job does after a sync); timings."""
    service = runtime.get(RepoService)
    known = {r.name for r in service.readable(INTERNAL)}
    names = [(f"bench/r{i:04d}", ROOT / "src" / f"r{i:04d}.git") for i in range(repos)]
    names.append(("bench/long", ROOT / "src" / "long.git"))
    todo = [(n, p) for n, p in names if n not in known]
    started = time.perf_counter()

    def one(item: tuple[str, Path]) -> None:
        name, path = item
        service.add_repo(INTERNAL, str(path), name=name)
        outcome = service.sync_repo(INTERNAL, name)
        assert outcome.ok, outcome.error
        runtime.get(HistoryService).index_repo(outcome.repo)

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(one, todo))
    return {"registered": len(todo), "seconds": round(time.perf_counter() - started, 1)}


def sample(fn: Callable[[], Any], runs: int) -> tuple[dict[str, float], Any]:
    times, result = [], None
    fn()  # warm-up (page cache, statement cache)
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    ordered = sorted(times)
    stats = {
        "p50_ms": round(statistics.median(ordered) * 1000, 1),
        "p90_ms": round(ordered[int(len(ordered) * 0.9)] * 1000, 1),
    }
    return stats, result


def once(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def git_each(mirrors: list[Path], *args: str) -> Callable[[], list[str]]:
    """The baseline: one git process per repository, sequentially (what answering without an index costs)."""

    def run() -> list[str]:
        return [
            subprocess.run(["git", "--git-dir", str(m), *args], capture_output=True, text=True, check=False).stdout
            for m in mirrors
        ]

    return run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repos", type=int, default=1000)
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--long", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--load-only", action="store_true", help="generate and index, run no cases")
    parser.add_argument("--only", default="", help="comma-separated substrings: run only cases whose name has one")
    args = parser.parse_args()
    report: dict[str, Any] = {"repos": args.repos, "commits_per_repo": args.commits, "long_history": args.long}
    report["generate_s"] = round(generate(args.repos, args.commits, args.long), 1)
    runtime = open_runtime(args.database_url)
    report["database"] = "postgresql" if args.database_url else "sqlite"
    report["initial_index"] = register_all(runtime, args.repos)
    with runtime.db.engine.begin() as conn:
        report["indexed_commits"] = conn.exec_driver_sql("SELECT count(*) FROM history_commits").scalar()
        if args.database_url:
            # What autovacuum does some time after a bulk load: without statistics the planner guesses
            # row counts (876 instead of 200,000 rows for one repository) and picks plans 30x slower.
            conn.exec_driver_sql("ANALYZE")
    print(json.dumps(report), flush=True)
    if args.load_only:
        runtime.close()
        return
    report["cases"] = run_cases(runtime, args.runs, [o for o in args.only.split(",") if o])
    report["incremental"] = incremental(runtime, args.repos)
    print(json.dumps(report["incremental"]), flush=True)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"history-{report['database']}{'-partial' if args.only else ''}.json"
    out.write_text(json.dumps(report, indent=2))
    print(f"wrote {out}")
    runtime.close()


def run_cases(runtime: Runtime, runs: int, only: list[str] | None = None) -> dict[str, Any]:
    """Every query case with its git baseline; returns the figures by case name."""
    history = runtime.get(HistoryService)
    repos = runtime.get(RepoService)
    everything = ["/^bench//"]
    mirrors = [r.mirror_path for r in repos.readable(INTERNAL) if r.name.startswith("bench/r")]
    hundred = ["/^bench/r00[0-9][0-9]$/"]
    hundred_mirrors = sorted(mirrors)[:100]
    cases: dict[str, Any] = {}

    def case(name: str, fn: Callable[[], Any], baseline: Callable[[], Any] | None, runs: int = runs) -> None:
        if only and not any(o in name for o in only):
            return
        stats, result = sample(fn, runs)
        entry: dict[str, Any] = {**stats}
        found = getattr(result, "commits", getattr(result, "matches", result))
        entry["results"] = len(found) if isinstance(found, list) else None
        if getattr(result, "timed_out", False):
            entry["timed_out"] = True
        if baseline is not None:
            base = once(baseline)
            entry["baseline_ms"] = round(base * 1000, 1)
            entry["speedup_vs_git"] = round(base * 1000 / max(stats["p50_ms"], 0.01), 1)
        cases[name] = entry
        print(f"{name:42} {json.dumps(entry)}", flush=True)

    case(
        "commit_search message common (fix)",
        lambda: history.commit_search(INTERNAL, everything, message_terms=["fix"]),
        git_each(mirrors, "log", "--all", "-i", "--grep=fix", "-n", "50", "--format=%H"),
    )
    case(
        "commit_search message rare (zeppelin)",
        lambda: history.commit_search(INTERNAL, everything, message_terms=["zeppelin"]),
        git_each(mirrors, "log", "--all", "-i", "--grep=zeppelin", "-n", "50", "--format=%H"),
    )
    case(
        "commit_search message absent",
        lambda: history.commit_search(INTERNAL, everything, message_terms=["nonexistentword"]),
        None,
    )
    case(
        "commit_search message short absent (qq, scan to the time budget)",
        lambda: history.commit_search(INTERNAL, everything, message_terms=["qq"]),
        git_each(mirrors, "log", "--all", "-i", "--grep=qq", "-n", "50", "--format=%H"),
        runs=2,
    )
    case(
        "commit_search message short common (ix)",
        lambda: history.commit_search(INTERNAL, everything, message_terms=["ix"]),
        None,
    )
    case(
        "commit_search author extreme (dev0001, ~55% of all commits)",
        lambda: history.commit_search(INTERNAL, everything, authors=["dev0001@"]),
        git_each(mirrors, "log", "--all", "-i", "--author=dev0001@", "-n", "50", "--format=%H"),
    )
    case(
        "commit_search author typical (dev0010, ~0.6%)",
        lambda: history.commit_search(INTERNAL, everything, authors=["dev0010@"]),
        git_each(mirrors, "log", "--all", "-i", "--author=dev0010@", "-n", "50", "--format=%H"),
    )
    case(
        "commit_search author rare (dev2999)",
        lambda: history.commit_search(INTERNAL, everything, authors=["dev2999@"]),
        git_each(mirrors, "log", "--all", "-i", "--author=dev2999@", "-n", "50", "--format=%H"),
    )
    case(
        "commit_search author+message+year",
        lambda: history.commit_search(
            INTERNAL, everything, authors=["Person3"], message_terms=["cache"], after="1 year ago"
        ),
        None,
    )
    case(
        "get_contributor_repos extreme (dev0001)",
        lambda: history.contributor_repos(INTERNAL, ["dev0001@"]),
        git_each(mirrors, "log", "--all", "-i", "--author=dev0001@", "--format=%ct"),
    )
    case(
        "get_contributor_repos typical (dev0010)",
        lambda: history.contributor_repos(INTERNAL, ["dev0010@"]),
        git_each(mirrors, "log", "--all", "-i", "--author=dev0010@", "--format=%ct"),
    )
    case(
        "get_contributor_repos 5 authors",
        lambda: history.contributor_repos(INTERNAL, ["dev0002@", "dev0010@", "dev0100@", "dev1000@", "dev2000@"]),
        None,
    )
    case(
        "diff_search 100 repos 1y TODO (count 20)",
        lambda: history.diff_search(INTERNAL, "TODO", hundred, after="1 year ago"),
        git_each(hundred_mirrors, "log", "--all", "-GTODO", "-p", "--since=1 year ago", "-n", "20"),
        runs=7,
    )
    case(
        "diff_search 100 repos 1y rare regex",
        lambda: history.diff_search(INTERNAL, r"value_\d+ = parser_99\d{4}\b", hundred, after="1 year ago"),
        git_each(
            hundred_mirrors,
            "log",
            "--all",
            r"-Gvalue_[0-9]+ = parser_99[0-9]{4}\b",
            "-p",
            "--since=1 year ago",
            "-n",
            "20",
        ),
        runs=3,
    )
    case(
        "commit_search contentTerms 100 repos 1y",
        lambda: history.commit_search(INTERNAL, hundred, content_terms=["TODO: revisit"], after="1 year ago"),
        git_each(hundred_mirrors, "log", "--all", "-STODO: revisit", "--since=1 year ago", "-n", "50", "--format=%H"),
        runs=5,
    )
    long_mirror = [repos.get(INTERNAL, "bench/long").mirror_path]
    case(
        "long history: message rare",
        lambda: history.commit_search(INTERNAL, ["bench/long"], message_terms=["quokka"]),
        git_each(long_mirror, "log", "--all", "-i", "--grep=quokka", "-n", "50", "--format=%H"),
    )
    case(
        "long history: author",
        lambda: history.commit_search(INTERNAL, ["bench/long"], authors=["dev0500@"]),
        git_each(long_mirror, "log", "--all", "-i", "--author=dev0500@", "-n", "50", "--format=%H"),
    )
    case(
        "long history: revisions=main + message",
        lambda: history.commit_search(INTERNAL, ["bench/long"], message_terms=["narwhal"], revisions=["main"]),
        None,
    )
    return cases


def incremental(runtime: Runtime, count: int) -> dict[str, Any]:
    """1,000 new commits: (a) in one repository, (b) 100 each in 10 repositories; fetch, then time indexing."""
    history = runtime.get(HistoryService)
    repos = runtime.get(RepoService)
    results: dict[str, Any] = {}
    for label, targets, per_repo in (
        ("1 repo x 1000", [f"r{count // 2:04d}"], 1000),
        ("10 repos x 100", [f"r{count // 2 + 1 + i:04d}" for i in range(10)], 100),
    ):
        seed = int(time.time())
        mirrors = []
        for target in targets:
            src = ROOT / "src" / f"{target}.git"
            fast_import(
                src,
                fast_import_stream(random.Random(seed), per_repo, NOW - 3600, NOW, parent="refs/heads/main^0"),
                init=False,
            )
            repo = repos.get(INTERNAL, f"bench/{target}")
            git(repo.mirror_path, "fetch", "-q", str(src), "+refs/heads/*:refs/heads/*")
            mirrors.append(repo)
        start = time.perf_counter()
        new = sum(history.index_repo(repo).new_commits for repo in mirrors)
        seconds = time.perf_counter() - start
        base_start = time.perf_counter()
        for repo in mirrors:
            git(repo.mirror_path, "log", "--name-only", "--format=%H%n%an%n%ae%n%B", f"-n{per_repo}", "main")
        base = time.perf_counter() - base_start
        results[label] = {
            "new_commits": new,
            "seconds": round(seconds, 3),
            "git_log_seconds": round(base, 3),
            "ratio_vs_git_log": round(seconds / base, 1),
        }
    return results


if __name__ == "__main__":
    sys.exit(main())
