"""Search benchmark: build a shard of the Linux corpus, then compare every query with ripgrep in the same run.

Checks that results equal `rg --no-unicode -n` as sets of path:line, and reports latency ratios, build time,
index overhead and peak build RSS. When Debian's codesearch (`cindex`, `csearch`) is installed, its index is
built beside the shard (<shard>.csearchindex; timed with the build) and csearch runs the queries whose syntax
both accept in the same run, its figures printed beside ripgrep's; without it those columns are skipped.
Writes bench/.results/search.json.
Run: python bench/search_bench.py [--repo /var/tmp/codewell-bench/linux] [--rebuild] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from codewell.search import native
from codewell.search.index.shard import Shard
from codewell.search.indexer import branch_commits, build_from_mirror
from codewell.search.parallel import search_many, search_part, search_shard_parallel
from codewell.search.query.parser import parse_query
from codewell.search.searcher import gc_paused

RG = str(Path(sys.executable).with_name("rg"))
CINDEX, CSEARCH = shutil.which("cindex"), shutil.which("csearch")
OUT = Path(__file__).with_name(".results")
POOL: ProcessPoolExecutor | None = None

# (name, our query, ripgrep arguments, all results?) — ours is case-insensitive by default like `rg -i`.
QUERIES: list[tuple[str, str, list[str], bool]] = [
    ("absent literal", "count:all xyzzy_not_there_42", ["-i", "-F", "xyzzy_not_there_42"], True),
    ("rare literal", "count:all ftrace_graph_ret_addr", ["-i", "-F", "ftrace_graph_ret_addr"], True),
    ("mutex_lock all", "count:all mutex_lock", ["-i", "-F", "mutex_lock"], True),
    ("return 0 all", 'count:all "return 0"', ["-i", "-F", "return 0"], True),
    ("linus torvalds", 'count:all "linus torvalds"', ["-i", "-F", "linus torvalds"], True),
    ("alternation", "count:all /spin_lock_irq(save|restore)/ case:yes", ["spin_lock_irq(save|restore)"], True),
    ("init regex", r"count:all /[a-z]+_init_[a-z]+\(/ case:yes", [r"[a-z]+_init_[a-z]+\("], True),
    ("dma coherent", r"count:all /\bdma_\w+_coherent\b/ case:yes", [r"\bdma_\w+_coherent\b"], True),
    ("hex no literal", r"count:all /\b0x[0-9a-fA-F]{12,}\b/ case:yes", [r"\b0x[0-9a-fA-F]{12,}\b"], True),
    ("file filtered", r"count:all mutex_lock file:^fs/ext4/", ["-i", "-F", "mutex_lock", "fs/ext4"], True),
    # Filters that are not one directory: ripgrep walks the whole tree to apply its glob or type.
    ("ext filtered", r"count:all spin_lock_irqsave file:\.h$", ["-i", "-F", "-g", "*.h", "spin_lock_irqsave"], True),
    ("lang filtered", "count:all mutex_lock lang:rust", ["-i", "-F", "-t", "rust", "mutex_lock"], True),
]
# codesearch's arguments for the same queries (Go's RE2 syntax; -f is a regex on the file's absolute path, which
# "{root}" stands for). Its -i folds Unicode, cindex skips files with very long lines or much invalid UTF-8 and
# keeps files over 1 MB (ripgrep here and the shard leave them out), so its lines are compared with ripgrep's
# and reported, not required to be equal.
CSEARCH_ARGS: dict[str, list[str]] = {
    "absent literal": ["-i", "xyzzy_not_there_42"],
    "rare literal": ["-i", "ftrace_graph_ret_addr"],
    "mutex_lock all": ["-i", "mutex_lock"],
    "return 0 all": ["-i", "return 0"],
    "linus torvalds": ["-i", "linus torvalds"],
    "alternation": ["spin_lock_irq(save|restore)"],
    "init regex": [r"[a-z]+_init_[a-z]+\("],
    "dma coherent": [r"\bdma_\w+_coherent\b"],
    "hex no literal": [r"\b0x[0-9a-fA-F]{12,}\b"],
    "file filtered": ["-f", "^{root}/fs/ext4/", "-i", "mutex_lock"],
    "ext filtered": ["-f", r"\.h$", "-i", "spin_lock_irqsave"],
    "lang filtered": ["-f", r"\.rs$", "-i", "mutex_lock"],
}
FIRST_PAGE = ["mutex_lock", "return 0", "printk", "static int"]
# Selective queries are also timed in blocks (see steady_state).
SELECTIVE = {"absent literal", "rare literal", "linus torvalds", "file filtered", "ext filtered", "lang filtered"}


def rg_lines(root: Path, args: list[str]) -> tuple[set[str], float]:
    search_args = [a for a in args if not a.startswith("fs/")]
    paths = [a for a in args if a.startswith("fs/")] or ["."]
    cmd = [RG, "--no-unicode", "-n", "--no-ignore", "--hidden", "-g", "!.git", "--max-filesize", "1M", "-e"]
    cmd = [*cmd[:-1], *search_args[:-1], "-e", search_args[-1], *paths]
    started = time.perf_counter()
    out = subprocess.run(cmd, cwd=root, capture_output=True, check=False).stdout
    elapsed = time.perf_counter() - started
    found: set[str] = set()
    for line in out.split(b"\n"):
        if not line:
            continue
        path, lineno, _ = line.split(b":", 2)
        found.add(f"{path.decode('utf-8', 'replace').removeprefix('./')}:{int(lineno)}")
    return found, elapsed


def codesearch_index(shard: Path) -> Path:
    return Path(f"{shard}.csearchindex")


def cindex_build(repo: Path, index: Path) -> dict[str, object]:
    """Build codesearch's index of `repo` at `index` (from scratch); its wall and CPU seconds and size."""
    index.unlink(missing_ok=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    env = {**os.environ, "CSEARCHINDEX": str(index)}
    assert CINDEX is not None
    subprocess.run([CINDEX, "-reset", str(repo)], env=env, capture_output=True, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    size = index.stat().st_size
    print(f"cindex build: {wall:.1f} s, CPU {cpu:.1f} s, index {size / 1e6:.0f} MB")
    return {"cindex_seconds": round(wall, 1), "cindex_cpu_seconds": round(cpu, 1), "cindex_mb": round(size / 1e6)}


def cs_lines(repo: Path, index: Path, args: list[str]) -> tuple[set[str], float]:
    """csearch's matching lines as path:line (relative to `repo`) and its wall seconds."""
    assert CSEARCH is not None
    root = str(repo.resolve())
    cmd = [CSEARCH, "-n", *(a.replace("{root}", re.escape(root)) for a in args)]
    started = time.perf_counter()
    out = subprocess.run(cmd, env={**os.environ, "CSEARCHINDEX": str(index)}, capture_output=True, check=False).stdout
    elapsed = time.perf_counter() - started
    found: set[str] = set()
    prefix = root.encode() + b"/"
    for line in out.split(b"\n"):
        if not line:
            continue
        path, lineno, _ = line.split(b":", 2)
        found.add(f"{path.removeprefix(prefix).decode('utf-8', 'replace')}:{int(lineno)}")
    return found, elapsed


def rg_first_page(root: Path, literal: str, lines: int = 500) -> float:
    """Seconds until ripgrep has printed `lines` matching lines (what `rg ... | head -n 500` waits for)."""
    cmd = [RG, "--no-unicode", "-n", "--no-ignore", "--hidden", "-g", "!.git", "--max-filesize", "1M", "-i", "-F"]
    started = time.perf_counter()
    with subprocess.Popen([*cmd, "-e", literal, "."], cwd=root, stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        for _ in range(lines):
            if not proc.stdout.readline():
                break
        elapsed = time.perf_counter() - started
        proc.kill()
    return elapsed


def ours(shard: Shard, query: str) -> tuple[set[str], float, int, float]:
    """Our path:line set, wall seconds, match count and CPU seconds (this process and the pool's)."""
    q = parse_query(query)
    cpu = own_cpu()
    started = time.perf_counter()
    # As SearchService.search runs it: no cyclic collection while the answer is built.
    with gc_paused():
        limit = None if q.count_all else 500
        result = search_shard_parallel(
            shard, q, branch=None, limit=limit, deadline=time.monotonic() + 60, pool=POOL, parts=2
        )
    elapsed = time.perf_counter() - started
    cpu = own_cpu() - cpu
    found: set[str] = set()
    for hit in result.hits:
        base = int(shard.line_base[hit.doc])
        path = shard.paths[hit.doc]
        found.update(f"{path}:{line - base + 1}" for line in hit.lines)
    return found, elapsed, result.match_count, cpu


def steady_state(
    repo: Path, shard: Shard, queries: list[tuple[str, str, list[str], bool]], runs: int
) -> list[dict[str, object]]:
    """Each engine's runs back to back (after one warm-up), as a busy server answers a stream of queries.

    The main table runs each of ours right after one of ripgrep's, whose threads evict this process's
    caches: a conservative figure for sub-millisecond queries. Here ours runs warm; ripgrep is a new
    process every time either way.
    """
    rows: list[dict[str, object]] = []
    for name, query, rg_args, _all in queries:
        rg_lines(repo, rg_args)
        rg_ms = statistics.median(rg_lines(repo, rg_args)[1] for _ in range(max(runs, 9))) * 1000
        ours(shard, query)
        our_ms = statistics.median(ours(shard, query)[1] for _ in range(max(runs, 9) * 10)) * 1000
        rows.append(
            {"name": name, "rg_ms": round(rg_ms, 2), "ours_ms": round(our_ms, 3), "speedup": round(rg_ms / our_ms)}
        )
        print(f"steady state {name:16} rg {rg_ms:7.2f} ms  ours {our_ms:7.3f} ms  x{rg_ms / our_ms:7.1f}")
    return rows


def first_pages(repo: Path, shard: Shard, runs: int) -> list[dict[str, object]]:
    """First page (500 lines) of each FIRST_PAGE literal: our p50, and ripgrep's time to its 500th line."""
    pages: list[dict[str, object]] = []
    for query in FIRST_PAGE:
        times, rg_times = [], []
        for _ in range(runs):
            rg_times.append(rg_first_page(repo, query))
            times.append(ours(shard, f'"{query}"')[1])
        ours_ms, rg_ms = statistics.median(times) * 1000, statistics.median(rg_times) * 1000
        pages.append({"query": query, "p50_ms": round(ours_ms, 2), "rg_head_500_ms": round(rg_ms, 2)})
        print(f"first page {query!r}: p50 {ours_ms:.2f} ms; rg | head -n 500 {rg_ms:.1f} ms (x{rg_ms / ours_ms:.1f})")
    return pages


def build(repo: Path, target: Path) -> dict[str, object]:
    """Build the shard of `repo`'s main branch; return build time, CPU time and peak RSS."""
    report: dict[str, object] = {}
    commits = branch_commits(repo / ".git" if (repo / ".git").exists() else repo, "main", ())
    started = time.perf_counter()
    build_from_mirror(target, repo / ".git", commits, {"repo": "linux", "default_branch": "main"}, workers=2)
    build_s = time.perf_counter() - started
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
    report["build_cpu_seconds"] = round(cpu, 1)
    print(f"build CPU (all processes): {cpu:.1f} s, i.e. >= {cpu / 2:.1f} s wall on 2 idle cores")
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, children) / 1024
    report["build_seconds"] = round(build_s, 1)
    report["peak_build_rss_mb"] = round(peak)
    print(f"build: {build_s:.1f} s, peak RSS {peak:.0f} MB")
    return report


def split_main(root: Path, shards_dir: Path, runs: int, rebuild: bool) -> None:
    """Multi-repository run: one shard per top-level directory, queries fanned out over all of them."""

    started = time.perf_counter()
    shards = []
    for repo in sorted(p for p in root.iterdir() if (p / ".git").exists()):
        target = shards_dir / repo.name
        if rebuild or not (target / "meta.json").exists():
            commits = branch_commits(repo / ".git", "main", ())
            build_from_mirror(target, repo / ".git", commits, {"repo": repo.name, "default_branch": "main"}, workers=2)
        shards.append((repo.name, Shard.open(target)))
    print(f"{len(shards)} shards ready in {time.perf_counter() - started:.1f} s")
    pool = ProcessPoolExecutor(1, mp_context=get_context("spawn"), initializer=_use_native, initargs=(native.ENABLED,))
    rows = []
    for name, query, rg_args, _all in QUERIES:
        if any(a.startswith("fs/") for a in rg_args):
            continue
        q = parse_query(query)
        rg_times, our_times = [], []
        rg_set: set[str] = set()
        our_set: set[str] = set()
        for _ in range(runs):
            rg_set, t = rg_lines(root, rg_args)
            rg_times.append(t)
            t0 = time.perf_counter()
            results = search_many([(s, None) for _, s in shards], q, deadline=time.monotonic() + 60, pool=pool, parts=2)
            our_times.append(time.perf_counter() - t0)
            our_set = {
                f"{repo}/{shard.paths[h.doc]}:{line - int(shard.line_base[h.doc]) + 1}"
                for (repo, shard), r in zip(shards, results, strict=True)
                for h in r.hits
                for line in h.lines
            }
        rg_ms, our_ms = statistics.median(rg_times) * 1000, statistics.median(our_times) * 1000
        same = rg_set == our_set
        rows.append({"name": name, "rg_ms": round(rg_ms, 1), "ours_ms": round(our_ms, 1), "identical": same})
        print(
            f"{name:16} rg {rg_ms:8.1f} ms  ours {our_ms:8.1f} ms  x{rg_ms / max(our_ms, 0.01):7.1f}  "
            f"lines {len(rg_set):7}  {'identical' if same else 'DIFFERENT'}"
        )
    pool.shutdown()
    OUT.mkdir(exist_ok=True)
    (OUT / "search-split.json").write_text(json.dumps(rows, indent=2))


def children_cpu() -> float:
    """CPU seconds of this process's finished children (each ripgrep or csearch run, once it exited)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def own_cpu() -> float:
    """CPU seconds of this process and of POOL's live workers (/proc, in clock ticks: 10 ms steps)."""
    total = time.process_time()
    tick = os.sysconf("SC_CLK_TCK")
    for pid in list(getattr(POOL, "_processes", None) or {}):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def compare(repo: Path, shard: Shard, index: Path | None, runs: int, only: list[str] | None) -> list[dict[str, object]]:
    """Each query `runs` times by ripgrep, csearch (when its `index` is given) and ours, interleaved.

    Besides wall times, each engine's CPU seconds (all its threads and processes): on a loaded machine wall
    times of short bursts stretch with the run queue, CPU seconds much less.
    """
    rows = []
    for name, query, rg_args, _all in QUERIES:
        if only and name not in only:
            continue
        cs_args = CSEARCH_ARGS.get(name) if index is not None else None
        rg_times, our_times, cs_times = [], [], []
        rg_cpu, our_cpu, cs_cpu = [], [], []
        rg_set: set[str] = set()
        our_set: set[str] = set()
        cs_set: set[str] = set()
        for _ in range(runs):
            before = children_cpu()
            rg_set, t = rg_lines(repo, rg_args)
            rg_times.append(t)
            rg_cpu.append(children_cpu() - before)
            if cs_args is not None and index is not None:
                before = children_cpu()
                cs_set, t = cs_lines(repo, index, cs_args)
                cs_times.append(t)
                cs_cpu.append(children_cpu() - before)
            our_set, t2, _count, cpu = ours(shard, query)
            our_times.append(t2)
            our_cpu.append(cpu)
        rg_ms, our_ms = statistics.median(rg_times) * 1000, statistics.median(our_times) * 1000
        rg_cpu_ms, our_cpu_ms = statistics.median(rg_cpu) * 1000, statistics.median(our_cpu) * 1000
        same = rg_set == our_set
        row: dict[str, object] = {
            "name": name,
            "rg_ms": round(rg_ms, 1),
            "ours_ms": round(our_ms, 1),
            "speedup": round(rg_ms / max(our_ms, 0.01), 1),
            "rg_cpu_ms": round(rg_cpu_ms),
            "ours_cpu_ms": round(our_cpu_ms),
            "lines": len(rg_set),
            "identical": same,
            "only_rg": sorted(rg_set - our_set)[:5],
            "only_ours": sorted(our_set - rg_set)[:5],
        }
        codesearch_note = ""
        if cs_times:
            cs_ms, cs_cpu_ms = statistics.median(cs_times) * 1000, statistics.median(cs_cpu) * 1000
            row.update(
                csearch_ms=round(cs_ms, 1),
                speedup_vs_csearch=round(cs_ms / max(our_ms, 0.01), 1),
                csearch_cpu_ms=round(cs_cpu_ms),
                csearch_lines=len(cs_set),
                csearch_identical_to_rg=cs_set == rg_set,
            )
            codesearch_note = (
                f"  csearch {cs_ms:8.1f} ms x{cs_ms / max(our_ms, 0.001):6.1f} ({len(cs_set)} lines, "
                f"CPU {cs_cpu_ms:.0f} ms)"
            )
        rows.append(row)
        print(
            f"{name:16} rg {rg_ms:8.1f} ms  ours {our_ms:8.3f} ms  x{rg_ms / max(our_ms, 0.001):7.1f}  "
            f"lines {len(rg_set):7}  {'identical' if same else 'DIFFERENT'}  "
            f"CPU rg {rg_cpu_ms:.0f} ms ours {our_cpu_ms:.0f} ms{codesearch_note}"
        )
    return rows


def _use_native(enabled: bool) -> None:
    """Pool workers follow the parent's --no-native."""
    native.ENABLED = enabled


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", default="/var/tmp/codewell-bench/linux")
    parser.add_argument("--shard", default="/var/tmp/codewell-bench/search-shard")
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--build-only", action="store_true", help="Only (re)build and report build figures.")
    parser.add_argument("--split", help="Multi-repository run over this directory of repositories instead.")
    parser.add_argument("--only", action="append", help="Run only the named queries (repeatable).")
    parser.add_argument(
        "--no-native", action="store_true", help="Switch the native kernels off (search/_scan.c), for A/B runs."
    )
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    native.ENABLED = not args.no_native
    if args.split:
        split_main(Path(args.split), Path(args.shard + "-split"), args.runs, args.rebuild)
        return
    repo, target = Path(args.repo), Path(args.shard)
    # Load from other work inflates both engines' times; recorded so figures can be read in context.
    report: dict[str, object] = {"load_avg_start": [round(x, 2) for x in os.getloadavg()], "native": native.ENABLED}
    if args.rebuild or not (target / "meta.json").exists():
        report.update(build(repo, target))
    index = codesearch_index(target)
    codesearch = CINDEX is not None and CSEARCH is not None
    if not codesearch:
        print("codesearch (cindex/csearch) is not installed: its columns are skipped")
    elif args.rebuild or not index.exists():
        report.update(cindex_build(repo, index))
    if args.build_only:
        print(json.dumps(report))
        return
    global POOL  # noqa: PLW0603 - one pool for the whole run, used by ours()
    POOL = ProcessPoolExecutor(1, mp_context=get_context("spawn"), initializer=_use_native, initargs=(native.ENABLED,))
    shard = Shard.open(target)
    # A server's pool is started and has the shard open before queries come: so is this one before timing.
    POOL.submit(
        search_part, str(target), parse_query("count:all warmup"), None, None, time.monotonic() + 60, 0, 1
    ).result()
    content = (target / "content.bin").stat().st_size
    overhead = sum(f.stat().st_size for f in target.iterdir() if f.name != "content.bin")
    report["content_mb"] = round(content / 1e6)
    report["index_overhead_pct"] = round(100 * overhead / content, 1)
    print(f"content {content / 1e6:.0f} MB, overhead {overhead / 1e6:.0f} MB ({100 * overhead / content:.1f} %)")
    rows = compare(repo, shard, index if codesearch else None, args.runs, args.only)
    report["queries"] = rows
    selective = [q for q in QUERIES if q[0] in SELECTIVE and (not args.only or q[0] in args.only)]
    report["steady_state"] = steady_state(repo, shard, selective, args.runs)
    report["first_page"] = first_pages(repo, shard, max(args.runs, 5))
    anon = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("RssAnon"))
    report["rss_anon_mb_after_queries"] = round(int(anon.split()[1]) / 1024)
    report["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    OUT.mkdir(exist_ok=True)
    (OUT / "search.json").write_text(json.dumps(report, indent=2))
    print(json.dumps({k: v for k, v in report.items() if k not in ("queries", "first_page", "steady_state")}))
    if os.environ.get("SEARCH_BENCH_CLEANUP"):
        shutil.rmtree(target, ignore_errors=True)
        index.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
