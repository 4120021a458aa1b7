"""Code navigation and nls on the Linux corpus: index build cost against search's, and query latency (#16, #17).

The Linux tree (`bench/corpus.py`) is registered in a data dir with the real services, then, for the same
commit and one after the other:

- search: `SearchService.index` alone (no index listener is wired yet, so codenav and nls do not run);
- codenav: `CodeNavService.index_revision` (the symbol index), reported as % of the search build;
- nls: `NlsService.index_revision` (the BM25 chunk index; reads the symbol index built just before).

Each build: wall seconds and CPU seconds of all processes (this one and its pools; more robust than wall time
on a shared machine). Then, with the capabilities wired:

- go_to_definition at the service API for ~200 usages sampled from the symbol index (an identifier occurrence
  that is not a definition, of a name something in the tree defines), and find_references (default limit) for
  ~200 sampled top-level definitions: p50/p95;
- the same calls through the MCP tool pipeline in-process (`ToolCaller.call`: argument validation, handler,
  rendering, envelope; no HTTP), interleaved with the service calls: the overhead is the p50 of the per-call
  differences;
- nls_search p50/p95 over 50 natural-language questions about the kernel.

Targets (issues #16, #17): codenav indexing ≤ +60 % of search's, nls ≤ +40 %; go_to_definition p50 ≤ 20 ms,
find_references p50 ≤ 50 ms, MCP overhead ≤ 3 ms, nls_search p50 ≤ 30 ms.

    .venv/bin/python bench/corpus.py
    .venv/bin/python bench/codenav_linux.py [--data DIR] [--reuse] [--samples 200] [--workers 2] [--seed 16]
    .venv/bin/python bench/codenav_linux.py --repo SUBSET --data DIR --build-only --builds search,codenav

Each build also prints the peak resident set so far of this process and of the largest pool worker (the
symbol build writes its rows batch by batch; it reads the files from the search shard's memory-mapped content,
whose pages count in its resident set: about the shard's size, shared page cache rather than heap).

`--reuse` keeps the data dir (default /var/tmp/codewell-bench/linux-data) and its indexes from a previous run
and only measures the queries (the build figures of that run are kept in the JSON). Writes
bench/.results/codenav_linux.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import shutil
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchkit import open_runtime
from codewell.accounts.service import AccountService
from codewell.capabilities import wire
from codewell.codenav.native import unpack_positions
from codewell.codenav.service import CodeNavService
from codewell.core.actors import INTERNAL, Actor
from codewell.core.errors import CodewellError
from codewell.core.tools import Endpoint
from codewell.mcp.registry import ToolRegistry
from codewell.mcp.server import ToolCaller
from codewell.nls.service import NlsService
from codewell.repos.service import RepoService, register_local_repo
from codewell.runtime import Runtime
from codewell.search.service import SearchService

RESULTS = Path(__file__).parent / ".results"
OUT = RESULTS / "codenav_linux.json"
BENCH_DIR = Path(os.environ.get("CODEWELL_BENCH_DIR", "/var/tmp/codewell-bench"))
REPO = "bench/linux"
# Kinds a caller navigates to from a use, and asks the references of.
NAV_KINDS = ("function", "macro", "struct", "type alias", "enum", "constant", "variable")

QUESTIONS = [
    "where is the readahead window of the page cache computed",
    "how does the scheduler pick the next task to run",
    "where are TCP retransmission timers armed",
    "how is a new process forked and its memory copied",
    "where does ext4 allocate blocks for a file",
    "how are dirty pages written back to disk",
    "where is the out of memory killer choosing a victim",
    "how does the kernel handle a page fault",
    "where are interrupts disabled and restored",
    "how are RCU grace periods detected",
    "where is the spinlock slow path implemented",
    "how does the slab allocator free an object",
    "where are USB devices enumerated",
    "how are PCI BARs assigned resources",
    "where does the network stack receive a packet from the driver",
    "how is a socket bound to a port",
    "where are file descriptors allocated",
    "how does mmap create a new virtual memory area",
    "where are signals delivered to user space",
    "how is the system call table dispatched on x86",
    "where is the kernel command line parsed",
    "how are kernel modules loaded and relocated",
    "where is the inode cache evicted",
    "how does the block layer merge requests",
    "where are cgroup memory limits enforced",
    "how does futex wait and wake work",
    "where is the watchdog detecting soft lockups",
    "how is the random number generator seeded",
    "where are netfilter hooks called",
    "how does the VFS resolve a path name",
    "where are timers expired and run",
    "how does the NVMe driver submit a command",
    "where is the CPU frequency governor deciding the frequency",
    "how are huge pages split",
    "where is the device tree parsed",
    "how does kexec load a new kernel",
    "where is the journal committed in jbd2",
    "how does the kernel verify module signatures",
    "where are workqueue items executed",
    "how are ACPI tables parsed at boot",
    "where is the ARP cache updated",
    "how does btrfs compute checksums of data blocks",
    "where are perf events counted on overflow",
    "how are DMA mappings created for a device",
    "where does printk write messages to the console",
    "how does the loop device map a file",
    "where is swap space allocated for a page",
    "how are eBPF programs verified",
    "where are io_uring submissions processed",
    "how is the wifi station associated with an access point",
]


def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (pool workers count once shut down)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def pct(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p95_ms": round(ordered[max(0, int(len(ordered) * 0.95) - 1)] * 1000, 2),
        "max_ms": round(ordered[-1] * 1000, 2),
    }


def peak_rss_megabytes() -> tuple[float, float]:
    """Peak resident set of this process and of the largest finished child so far (Linux: ru_maxrss in KB)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_maxrss / 1024, kids.ru_maxrss / 1024


def timed_build(label: str, build: Callable[[], object]) -> dict[str, float]:
    cpu, wall = cpu_seconds(), time.perf_counter()
    build()
    wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    parent, child = peak_rss_megabytes()
    print(
        f"{label:8} build: {wall:8.1f} s wall, {cpu:8.1f} s CPU (all processes); peak RSS so far: "
        f"{parent:.0f} MB this process, {child:.0f} MB largest worker",
        flush=True,
    )
    return {
        "seconds": round(wall, 1),
        "cpu_seconds": round(cpu, 1),
        "peak_rss_mb_so_far": round(parent),
        "peak_worker_rss_mb_so_far": round(child),
    }


def build_all(runtime: Runtime, source: Path, workers: int, which: set[str]) -> dict[str, Any]:
    repo = register_local_repo(runtime, source, REPO)
    commit = runtime.get(RepoService).resolve(INTERNAL, REPO).commit
    search, nav, nls = runtime.get(SearchService), runtime.get(CodeNavService), runtime.get(NlsService)
    builds: dict[str, Any] = {"commit": commit, "workers": workers}
    builds["search"] = timed_build("search", lambda: search.index(repo, workers=workers, force=True))
    search.close()

    def codenav() -> None:
        nav.index_revision(repo, commit).close()
        nav.close()  # reaps the pool, so its workers' CPU time is counted

    builds["codenav"] = timed_build("codenav", codenav)
    if "nls" in which:
        builds["nls"] = timed_build("nls", lambda: nls.index_revision(repo, commit))
    for name in ("codenav", "nls"):
        if name not in builds:
            continue
        for key in ("seconds", "cpu_seconds"):
            ratio = builds[name][key] / max(builds["search"][key], 0.001)
            builds[name][f"{key}_vs_search_pct"] = round(100 * ratio, 1)
    sizes = {
        "search": _size(runtime.settings.data_dir / "search"),
        "codenav": _size(nav.index_file(repo, commit)),
        "nls": _size(nls.folder(repo, commit)) if "nls" in builds else 0,
    }
    builds["index_megabytes"] = {k: round(v / 1e6, 1) for k, v in sizes.items()}
    return builds


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _spots(positions: str | bytes) -> list[tuple[int, int, str]]:
    """An occurrences row's positions: packed (index format 4 on) or `line:col:role;...` text (format 3)."""
    if isinstance(positions, bytes):
        return unpack_positions(positions)
    return [(int(a), int(b), c) for a, b, c in (p.split(":") for p in positions.split(";") if p)]


def sample_usages(index_file: Path, wanted: int, rng: random.Random) -> list[tuple[str, str]]:
    """(path, name) of identifier uses (not definitions) in C files, of names defined somewhere in the tree.

    A random definition's name, then a random C file among those using it (the occurrences table has no rowid to
    draw a row from since index format 4; names defined more often are drawn more often, as before).
    """
    db = sqlite3.connect(f"file:{index_file}?mode=ro", uri=True)
    try:
        (top,) = db.execute("SELECT max(rowid) FROM symbols").fetchone()
        out: list[tuple[str, str]] = []
        seen: set[tuple[str, str]] = set()
        for _ in range(wanted * 1000):  # bounded: a corpus with too few C files gives fewer samples
            if len(out) >= wanted:
                break
            row = db.execute("SELECT name FROM symbols WHERE rowid = ?", (rng.randint(1, top),)).fetchone()
            if row is None:
                continue
            (name,) = row
            kinds = {k for (k,) in db.execute("SELECT kind FROM symbols WHERE name = ? LIMIT 50", (name,))}
            if not kinds & set(NAV_KINDS):
                continue
            uses = sorted(
                path
                for path, positions in db.execute(
                    "SELECT f.path, o.positions FROM occurrences o JOIN files f ON f.id = o.file_id "
                    "WHERE o.name = ? AND f.queries = 'c'",
                    (name,),
                )
                if any(role != "d" for _, _, role in _spots(positions))
            )
            if not uses:
                continue
            path = rng.choice(uses)
            if (path, name) in seen:
                continue
            seen.add((path, name))
            out.append((path, name))
        return out
    finally:
        db.close()


def sample_definitions(index_file: Path, wanted: int, rng: random.Random) -> list[tuple[str, str]]:
    """(path, name) of top-level definitions in C files (what find_references is asked from)."""
    db = sqlite3.connect(f"file:{index_file}?mode=ro", uri=True)
    try:
        (top,) = db.execute("SELECT max(rowid) FROM symbols").fetchone()
        out: list[tuple[str, str]] = []
        seen: set[tuple[str, str]] = set()
        kinds = ",".join(f"'{k}'" for k in NAV_KINDS)
        for _ in range(wanted * 1000):
            if len(out) >= wanted:
                break
            row = db.execute(
                "SELECT s.name, f.path FROM symbols s JOIN files f ON f.id = s.file_id "
                f"WHERE s.rowid = ? AND f.queries = 'c' AND s.container = '' AND s.kind IN ({kinds})",
                (rng.randint(1, top),),
            ).fetchone()
            if row is None or (row[1], row[0]) in seen:
                continue
            seen.add((row[1], row[0]))
            out.append((row[1], row[0]))
        return out
    finally:
        db.close()


def interleaved(
    samples: list[tuple[str, str]],
    direct: Callable[[str, str], object],
    tool: Callable[[str, str], object],
    repeat: int,
) -> dict[str, Any]:
    """Each sample once untimed, then `repeat` times through the service and through the MCP pipeline,
    alternating which goes first; a sample's latency is the median of its runs (the machine is shared: single
    runs mostly measure the other load), the overhead the median over samples of the two medians' difference.
    """
    d_times: list[float] = []
    t_times: list[float] = []
    failures = 0
    for path, name in samples:
        try:
            direct(path, name)  # untimed: whichever call came first would otherwise pay for the cold reads
        except CodewellError:
            failures += 1  # only the service raises; the tool answers with an isError result
        runs: dict[int, list[float]] = {0: [], 1: []}
        for r in range(repeat):
            for which in (0, 1) if r % 2 else (1, 0):
                fn = direct if which == 0 else tool
                start = time.perf_counter()
                with contextlib.suppress(CodewellError):
                    fn(path, name)
                runs[which].append(time.perf_counter() - start)
        d_times.append(statistics.median(runs[0]))
        t_times.append(statistics.median(runs[1]))
    diffs = [t - d for d, t in zip(d_times, t_times, strict=True)]
    return {
        "service": pct(d_times),
        "mcp": pct(t_times),
        "mcp_overhead_p50_ms": round(statistics.median(diffs) * 1000, 2),
        "errors": failures,
        "repeat": repeat,
    }


def measure_queries(runtime: Runtime, samples: int, seed: int, parts: set[str], repeat: int) -> dict[str, Any]:
    wire(runtime)
    repos, nav, nls = runtime.get(RepoService), runtime.get(CodeNavService), runtime.get(NlsService)
    accounts = runtime.get(AccountService)
    user = accounts.find_by_username("bench") or accounts.create_user(INTERNAL, "bench")
    actor: Actor = accounts.actor_for(user, via="access_token")
    commit = repos.resolve(actor, REPO).commit
    index_file = nav.index_file(repos.get(actor, REPO), commit)
    rng = random.Random(seed)
    usages = sample_usages(index_file, samples, rng)
    definitions = sample_definitions(index_file, samples, rng)
    caller = ToolCaller(runtime, ToolRegistry.create(runtime))

    def tool(name: str) -> Callable[[str, str], object]:
        def call(path: str, symbol: str) -> object:
            wire_result, error, _ = caller.call(
                Endpoint.ALL, actor, name, {"repo": REPO, "path": path, "symbol": symbol}
            )
            return wire_result, error

        return call

    def gtd(path: str, symbol: str) -> object:
        return nav.go_to_definition(actor, REPO, path, symbol)

    def refs(path: str, symbol: str) -> object:
        return nav.find_references(actor, REPO, path, symbol)

    results: dict[str, Any] = {}
    if "nav" in parts:
        for fn in (gtd, tool("go_to_definition")):  # warm-up: index opened, caches primed
            with contextlib.suppress(CodewellError):
                fn(*usages[0])
        results["go_to_definition"] = interleaved(usages, gtd, tool("go_to_definition"), repeat)
        results["find_references"] = interleaved(definitions, refs, tool("find_references"), repeat)
    if "nls" not in parts:
        return results
    nls.search(actor, QUESTIONS[0])  # loads the index (cached afterwards)
    times: list[float] = []
    empty = fallback = 0
    for question in QUESTIONS:
        start = time.perf_counter()
        found = nls.search(actor, question)
        times.append(time.perf_counter() - start)
        empty += not found.hits
        fallback += any("keyword search used" in note for note in found.notes)
    results["nls_search"] = {
        **pct(times),
        "questions": len(QUESTIONS),
        "without_hits": empty,
        "keyword_fallbacks": fallback,
    }
    return results


def table(results: dict[str, Any]) -> str:
    rows: list[tuple[str, str, str]] = []
    b = results.get("builds")
    if b:
        rows.append(("search index build", f"{b['search']['seconds']} s ({b['search']['cpu_seconds']} s CPU)", "-"))
        for name, target in (("codenav", "≤ 60 %"), ("nls", "≤ 40 %")):
            if name not in b:
                continue
            x = b[name]
            rows.append(
                (
                    f"{name} index build",
                    f"{x['seconds']} s = {x['seconds_vs_search_pct']} % ({x['cpu_seconds']} s CPU = "
                    f"{x['cpu_seconds_vs_search_pct']} %)",
                    target,
                )
            )
    q = results.get("queries")
    if q:
        for name, target in (("go_to_definition", "≤ 20 ms"), ("find_references", "≤ 50 ms")):
            if name not in q:
                continue
            s, m = q[name]["service"], q[name]["mcp"]
            rows.append((f"{name} p50 / p95 (service)", f"{s['p50_ms']} / {s['p95_ms']} ms (n={s['n']})", target))
            rows.append((f"{name} p50 / p95 (MCP)", f"{m['p50_ms']} / {m['p95_ms']} ms", "-"))
            rows.append((f"{name} MCP overhead p50", f"{q[name]['mcp_overhead_p50_ms']} ms", "≤ 3 ms"))
        n = q.get("nls_search")
        if n:
            rows.append(("nls_search p50 / p95", f"{n['p50_ms']} / {n['p95_ms']} ms (n={n['n']})", "≤ 30 ms"))
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{a:{width}}  {b_:50}  {c}" for a, b_, c in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, default=BENCH_DIR / "linux")
    parser.add_argument("--data", type=Path, default=BENCH_DIR / "linux-data")
    parser.add_argument("--reuse", action="store_true", help="keep the data dir and its indexes; time queries only")
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="search indexing processes")
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per sample and path (median kept)")
    parser.add_argument("--queries", default="nav,nls", help="what to time: nav (codenav calls), nls")
    parser.add_argument("--out", type=Path, default=OUT, help="JSON results file")
    parser.add_argument("--builds", default="search,codenav,nls", help="search,codenav (always) and nls (optional)")
    args = parser.parse_args()
    out: Path = args.out
    if not (args.repo / ".git").is_dir():
        sys.exit(f"{args.repo} is missing: run .venv/bin/python bench/corpus.py first")
    previous: dict[str, Any] = json.loads(out.read_text()) if args.reuse and out.exists() else {}
    if not args.reuse:
        shutil.rmtree(args.data, ignore_errors=True)
    args.data.mkdir(parents=True, exist_ok=True)
    runtime = open_runtime(args.data)
    results: dict[str, Any] = {"corpus": str(args.repo), "builds": previous.get("builds")}
    try:
        if not args.reuse:
            results["builds"] = build_all(runtime, args.repo, args.workers, set(args.builds.split(",")))
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(results, indent=2) + "\n")
        if not args.build_only:
            parts = set(args.queries.split(","))
            results["queries"] = {
                **previous.get("queries", {}),
                **measure_queries(runtime, args.samples, args.seed, parts, args.repeat),
            }
    finally:
        runtime.get(CodeNavService).close()
        runtime.get(SearchService).close()
        runtime.close()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(table(results))


if __name__ == "__main__":
    main()
