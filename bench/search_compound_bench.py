"""Search over many small repositories at the service API: one shard per repository vs compound shards (#28).

Corpus: the first --repos repositories of `bench/corpus.py --many N` (linux-many/NNNNN, ~20 files each).
Registers and mirrors them into a fresh data dir (--data; kept between runs: registration is skipped when the
repositories are there), indexes them (compound code: `index_many` in batches, then `merge_shards` until done;
code without it: `index` per repository), then runs, --runs times each, right after ripgrep over the same work
trees: a rare literal, the first page of a common literal, `count:all` of the common literal; p50 of each, and
of the search plus the text page keyword_search renders from it (MCP's answer within its character budget).
Also: indexing wall and CPU seconds, peak RSS of this process, `du` of the search data.
Run the committed code with `PYTHONPATH=<worktree>/src` to compare. Writes bench/.results/search_compound.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from codewell.core.actors import INTERNAL
from codewell.core.settings import Settings
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from codewell.search import service as search_module
from codewell.search.render import render_results
from codewell.search.service import SearchService

RG = str(Path(sys.executable).with_name("rg"))
CORPUS = Path(os.environ.get("CODEWELL_BENCH_DIR", "/var/tmp/codewell-bench")) / "linux-many"
RARE = "ftrace_graph_ret_addr"
COMMON = "mutex_lock"


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def du_mb(path: Path) -> float:
    out = subprocess.run(["du", "-sb", str(path)], check=True, capture_output=True, text=True).stdout
    return round(int(out.split()[0]) / 1e6, 1)


def timed(fn: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    out = fn()
    return (time.perf_counter() - started) * 1000, out


def main() -> None:  # noqa: PLR0915 - one linear script
    parser = argparse.ArgumentParser()
    parser.add_argument("--repos", type=int, default=2000)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--count-runs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--label", default="")
    parser.add_argument("--register-only", action="store_true", help="Register and mirror, then stop.")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / ".results" / "search_compound.json")
    args = parser.parse_args()
    trees = [CORPUS / f"{k:05}" for k in range(args.repos)]
    args.data.mkdir(parents=True, exist_ok=True)
    settings = Settings.from_env({}, data_dir=args.data, database_url=f"sqlite:///{args.data}/codewell.db")
    runtime = Runtime.open(settings)
    runtime.db.upgrade()
    repos = runtime.get(RepoService)
    service = runtime.get(SearchService)
    report: dict[str, Any] = {"label": args.label, "repos": args.repos, "compound": hasattr(service, "index_many")}

    started = time.perf_counter()
    known = {r.name for r in repos.readable(INTERNAL)}
    for k, tree in enumerate(trees):
        name = f"many/{k:05}"
        if name not in known:
            repos.add_repo(INTERNAL, str(tree), name=name)
            assert repos.sync_repo(INTERNAL, name).ok
    report["register_seconds"] = round(time.perf_counter() - started, 1)
    if args.register_only:
        print(json.dumps(report))
        return
    todo = repos.readable(INTERNAL)

    cpu0, wall0 = time.process_time(), time.perf_counter()
    if hasattr(service, "index_many"):
        for lo in range(0, len(todo), args.batch):
            service.index_many(todo[lo : lo + args.batch])
        report["index_seconds"] = round(time.perf_counter() - wall0, 1)
        report["index_cpu_seconds"] = round(time.process_time() - cpu0, 1)
        merge0 = time.perf_counter()
        merges = 1
        while service.merge_shards():
            merges += 1
        report["merge_seconds"] = round(time.perf_counter() - merge0, 1)
        report["merge_calls"] = merges
    else:
        for repo in todo:
            service.index(repo)
        report["index_seconds"] = round(time.perf_counter() - wall0, 1)
        report["index_cpu_seconds"] = round(time.process_time() - cpu0, 1)
    report["repos_per_second_search_part"] = round(len(todo) / max(report["index_seconds"], 1e-9), 1)
    shards_dir = args.data / "search" / "shards"
    report["shards"] = len([p for p in shards_dir.iterdir() if p.is_dir()])
    report["search_du_mb"] = du_mb(args.data / "search")
    report["data_du_mb"] = du_mb(args.data)

    # Warm: open every shard once (a server has them open).
    service.search(INTERNAL, "warmup_nothing_matches")
    dirs = [str(t) for t in trees]

    def rg(pattern: str, head: int | None = None) -> tuple[float, int]:
        started = time.perf_counter()
        proc = subprocess.Popen(
            [RG, "--no-unicode", "-n", "-i", "-F", "--no-messages", pattern, *dirs], stdout=subprocess.PIPE
        )
        assert proc.stdout is not None
        lines = 0
        for _line in proc.stdout:
            lines += 1
            if head is not None and lines >= head:
                proc.kill()
                break
        proc.wait()
        return (time.perf_counter() - started) * 1000, lines

    queries = [
        ("rare", RARE, None, args.runs),
        ("first_page", COMMON, 500, args.runs),
        ("count_all", f"{COMMON} count:all", None, args.count_runs),
    ]
    for label, query, head, runs in queries:
        ours, theirs, counts, rendered = [], [], [], []
        chars = 0
        for _ in range(runs):
            rg_ms, rg_lines = rg(query.split()[0], head)
            ms, found = timed(lambda q=query: service.search(INTERNAL, q))
            # What keyword_search adds over MCP: the page within its character budget (the rest is a cursor).
            render_ms, page = timed(lambda f=found, q=query: render_results(f, q))
            ours.append(ms)
            theirs.append(rg_ms)
            rendered.append(ms + render_ms)
            chars = len(page.text)
            counts.append((found.match_count, rg_lines))
            del found, page
        report[label] = {
            "p50_ms": round(statistics.median(ours), 1),
            "rg_p50_ms": round(statistics.median(theirs), 1),
            "ratio_vs_rg": round(statistics.median(theirs) / max(statistics.median(ours), 1e-9), 2),
            "with_page_p50_ms": round(statistics.median(rendered), 1),
            "page_chars": chars,
            "matches_vs_rg": counts[-1],
            "runs_ms": [round(x, 1) for x in ours],
        }
    report["rss_mb"] = round(rss_mb(), 1)
    report["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    report["load_average"] = Path("/proc/loadavg").read_text().split()[:3]
    report["merge_constants"] = {
        "COMPOUND_TARGET_BYTES": getattr(search_module, "COMPOUND_TARGET_BYTES", None),
        "MERGE_SMALL_BYTES": getattr(search_module, "MERGE_SMALL_BYTES", None),
    }
    service.close()
    runtime.close()
    print(json.dumps(report, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    previous = json.loads(args.out.read_text()) if args.out.exists() else []
    args.out.write_text(json.dumps([*previous, report], indent=2))


if __name__ == "__main__":
    main()
