"""Cluster benchmark (#29): searcher replicas over N repositories cut from the Linux tree, on loopback.

Topology: PostgreSQL (a fresh database, --pg-database), one web process (`codewell serve --no-jobs`), one
`codewell worker` and --searchers S `codewell searcher` replicas, each with its own data dir, all sharing one
directory for mirrors (CODEWELL_SHARED_DIR). Corpus: `bench/corpus.py --many N`.
Measured:
  indexing: from the site config write until every repository is indexed and no repository job waits: repos/s
  queries through the web tier's REST route (`/.api/search`), p50 of --runs, each right after ripgrep over the
    same work trees: a rare literal, the first page of a common literal, `count:all` of it; the answers must
    agree with ripgrep's line count
  fan-out overhead: the same queries sent by the web tier to S replicas, against ONE replica holding everything
    asked directly on its internal API (the others drained first), and against the web tier in front of that one
    replica: p50 differences (the target: <= 5 ms)
  takeover: `codewell searcher drain` of S-1 replicas (seconds until the last one holds nothing: its share is
    rebuilt by the one left), then a new replica with an empty disk joining (seconds until it holds its share
    and the others dropped theirs)
  memory: each replica's RSS and own (anonymous) memory against its share of the corpus, and its data dir
--overhead-only: one replica holding everything, and only the fan-out overhead, in --rounds rounds of paired
  samples (the machine is shared): the replica asked directly with the body the web tier sends it (`direct`) and
  with the bare query (`direct_bare`: it then reads the readable ids and ranks itself), then the web tier in
  front of it, one after the other; a round's overhead is the p50 of the (web - direct) differences (--runs pairs
  for every query, count:all included), and the result the median of the rounds'; the 1-minute load average is
  recorded with each round
Writes bench/.results/cluster_bench.json (--out).
Run: python bench/cluster_bench.py [--repos 2000] [--searchers 3] [--runs 15]
     python bench/cluster_bench.py --overhead-only --repos 300 [--rounds 3]
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import hashlib
import hmac
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx2
import numpy as np
import psycopg
from psycopg import sql

import corpus
from codewell.core.processes import terminate_with_parent
from codewell.search.wire import FRAME_VERSION
from scale_bench import (
    COMMON,
    RARE,
    Cluster,
    Ripgrep,
    Server,
    admin_token,
    find_rg,
    free_port,
    fresh_postgres,
    git_head,
    git_status,
    register,
    source_bytes,
    status_kib,
)

RESULTS = Path(__file__).parent / ".results"
_TOKEN_CONTEXT = b"codewell searcher internal credential v1"  # search/cluster.py


def internal_token(shared: Path) -> str:
    secret = bytes.fromhex((shared / "secret.key").read_text().strip())
    return hmac.new(secret, _TOKEN_CONTEXT, hashlib.sha256).hexdigest()


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.root = Path(args.data)
        if self.root.exists():
            shutil.rmtree(self.root)
        self.shared = self.root / "shared"
        self.shared.mkdir(parents=True)
        self.url = fresh_postgres(args.postgres, args.pg_database)
        env = {
            **os.environ,
            "CODEWELL_DATABASE_URL": self.url,
            "CODEWELL_SHARED_DIR": str(self.shared),
            "CODEWELL_SEARCHERS": "database",
            "CODEWELL_LOG_LEVEL": "warning",
            "PYTHONUNBUFFERED": "1",
        }
        self.cluster = Cluster(self.root / "web", {**env, "CODEWELL_DATA_DIR": str(self.root / "web")})
        self.env = env
        self.replicas: dict[str, tuple[int, subprocess.Popen[bytes]]] = {}

    def start_searcher(self, name: str) -> None:
        port = free_port()
        log = (self.root / f"{name}.log").open("wb")
        popen = subprocess.Popen(
            [sys.executable, "-m", "codewell", "searcher", "--port", str(port), "--name", name,
             "--advertise", f"http://127.0.0.1:{port}"],
            env={**self.env, "CODEWELL_DATA_DIR": str(self.root / name)},
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=terminate_with_parent,  # noqa: PLW1509 (prctl only, see its docstring)
        )  # fmt: skip
        self.replicas[name] = (port, popen)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx2.get(f"http://127.0.0.1:{port}/.internal/healthz", timeout=2).status_code == 200:
                    return
            except httpx2.HTTPError:
                pass
            time.sleep(0.2)
        sys.exit(f"searcher {name} did not start; see {self.root / f'{name}.log'}")

    def held(self, name: str) -> int:
        port, _ = self.replicas[name]
        return int(httpx2.get(f"http://127.0.0.1:{port}/.internal/healthz", timeout=10).json()["held"])

    def jobs_waiting(self) -> int:
        with psycopg.connect(self.url.replace("postgresql+psycopg", "postgresql")) as conn:
            # Repository jobs waiting or running, and any job running (a replica's merge or rebalance): the
            # queries are measured on a cluster at rest, not beside its own index builds.
            row = conn.execute(
                "SELECT count(*) FROM jobs WHERE state = 'running' OR (state = 'queued' AND resource LIKE 'repo:%')"
            ).fetchone()
        return int(row[0]) if row else 0

    def wait(self, condition: Callable[[], bool], what: str, limit: float) -> float:
        started = time.monotonic()
        while time.monotonic() - started < limit:
            if condition():
                return time.monotonic() - started
            time.sleep(0.5)
        sys.exit(f"timed out after {limit:.0f} s waiting for {what}")


def p50(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 2)


Queries = dict[str, str]
QUERIES: Queries = {
    "rare literal": RARE,
    "common first page": COMMON,
    "common count:all": f"count:all timeout:60s {COMMON}",
}


def measure(label: str, ask: Callable[[str], float], runs: int) -> dict[str, float]:
    """p50 (ms) of each query after one warm-up call; count:all gets a third of the runs (at least 3)."""
    row = {}
    for name, query in QUERIES.items():
        ask(query)
        row[name] = p50([ask(query) for _ in range(runs if "count:all" not in name else max(3, runs // 3))])
    print(f"{label:38} " + "  ".join(f"{k} {v:8.2f} ms" for k, v in row.items()))
    return row


def query_phase(bench: Bench, search: Callable[[str], tuple[dict[str, Any], float]], root: Path) -> dict[str, Any]:
    """Through the web tier to every replica, and ripgrep over the same work trees in the same run."""
    args, out = bench.args, {}
    rg_path = find_rg()
    if rg_path is not None:
        rg = Ripgrep(rg_path, root, args.repos)
        out["ripgrep_ms"] = {
            "rare literal": p50([rg.lines(RARE)[1] for _ in range(3)]),
            "common first page": p50([rg.first_lines(COMMON) for _ in range(3)]),
            "common count:all": p50([rg.lines(COMMON)[1] for _ in range(3)]),
        }
        truth = len(rg.lines(COMMON)[0])
        counted = search(f"count:all timeout:60s {COMMON}")[0]
        out["agreement"] = {"rg_lines": truth, "ours": counted["matchCount"], "unsearched": counted.get("unsearched")}
        print(f"count:all {COMMON}: ours {counted['matchCount']} lines, ripgrep {truth}")
    out["web_to_all_replicas_ms"] = measure(f"web -> {args.searchers} replicas", lambda q: search(q)[1], args.runs)
    return out


def drain_phase(bench: Bench, names: list[str]) -> dict[str, Any]:
    """Drain every replica but the first: seconds until it alone holds everything (their share rebuilt)."""
    args = bench.args
    started = time.monotonic()
    for name in names[1:]:
        subprocess.run(
            [sys.executable, "-m", "codewell", "searcher", "drain", name, "--no-wait"],
            env={**bench.env, "CODEWELL_DATA_DIR": str(bench.root / "admin")},
            check=True,
            capture_output=True,
        )
    bench.wait(
        lambda: all(bench.held(n) == 0 for n in names[1:]) and bench.held(names[0]) >= args.repos,
        "the drain",
        args.limit,
    )
    seconds = time.monotonic() - started
    bench.wait(lambda: bench.jobs_waiting() == 0, "the merges and indexes after the drain", args.limit)
    moved = args.repos - round(args.repos / args.searchers)
    print(f"drained {args.searchers - 1} replicas: {moved} repositories rebuilt by {names[0]} in {seconds:.0f} s")
    return {"seconds": round(seconds, 1), "repos_moved": moved, "repos_per_s": round(moved / seconds, 2)}


def one_replica_phase(
    bench: Bench, first: str, search: Callable[[str], tuple[dict[str, Any], float]]
) -> dict[str, Any]:
    """One replica holding everything: asked directly on its internal API, and through the web tier."""
    port, _ = bench.replicas[first]
    internal = httpx2.Client(headers={"authorization": f"Bearer {internal_token(bench.shared)}"}, timeout=600)
    actor = {"kind": "user", "user_id": 1, "username": "admin", "site_admin": True, "scopes": ["user:all"]}

    def direct(query: str) -> float:
        started = time.perf_counter()
        response = internal.post(f"http://127.0.0.1:{port}/.internal/search", json={"actor": actor, "query": query})
        response.raise_for_status()
        return time.perf_counter() - started

    one_direct = measure(f"{first} holding all, asked directly", direct, bench.args.runs)
    one_web = measure(f"web -> {first} holding all", lambda q: search(q)[1], bench.args.runs)
    overhead = {k: round(one_web[k] - one_direct[k], 2) for k in QUERIES}
    print(f"fan-out overhead (web -> one replica minus the replica itself): {overhead}")
    return {"one_replica_direct_ms": one_direct, "web_to_one_replica_ms": one_web, "fanout_overhead_ms": overhead}


def readable_bitmap(url: str) -> str:
    """Every repository id as the web tier sends a site admin's readable ids (search/wire.py `encode_ids`)."""
    with psycopg.connect(url.replace("postgresql+psycopg", "postgresql")) as conn:
        ids = np.array([row[0] for row in conn.execute("SELECT id FROM repos")], dtype=np.int64)
    mask = np.zeros(int(ids.max()) + 1, dtype=bool)
    mask[ids] = True
    return base64.b64encode(np.packbits(mask).tobytes()).decode("ascii")


def cpu_ns(pid: int) -> int:
    """CPU time of every thread of a process so far, in ns (schedstat: not the 10 ms ticks of /proc/PID/stat)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
    return total


def overhead_phase(
    bench: Bench, name: str, search: Callable[[str], tuple[dict[str, Any], float]], rounds: int, web_pid: int
) -> dict[str, Any]:
    """The web tier's overhead over its one replica, in interleaved rounds (see the module's docstring)."""
    port, replica = bench.replicas[name]
    internal = httpx2.Client(headers={"authorization": f"Bearer {internal_token(bench.shared)}"}, timeout=600)
    actor = {"kind": "user", "user_id": 1, "username": "admin", "site_admin": True, "scopes": ["user:all"]}
    web_body = {"actor": actor, "rank": False, "readable": readable_bitmap(bench.url), "frame": FRAME_VERSION}

    def direct(extra: dict[str, Any]) -> Callable[[str], float]:
        def ask(query: str) -> float:
            started = time.perf_counter()
            body = {**extra, "actor": actor, "query": query, "timeout": 60.0}
            response = internal.post(f"http://127.0.0.1:{port}/.internal/search", json=body)
            response.raise_for_status()
            return time.perf_counter() - started

        return ask

    out: dict[str, Any] = {"rounds": []}
    asks = {"direct": direct(web_body), "direct_bare": direct({}), "web": lambda q: search(q)[1]}
    for k in range(rounds):
        load = os.getloadavg()[0]
        row: dict[str, Any] = {"load_1m": round(load, 2)}
        for name_q, query in QUERIES.items():
            # Every query gets --runs pairs here: at a few hundred repositories a count:all answers in ~20 ms, and
            # with a third of the pairs (5) a round's median was whichever burst of load elsewhere hit them.
            runs = bench.args.runs
            for ask in asks.values():
                ask(query)  # warm-up
            # Paired: each web answer right after the replica's own, so that a burst of load elsewhere on the
            # machine hits both sides of a pair; the overhead is the p50 of the pairs' differences.
            samples: dict[str, list[float]] = {key: [] for key in asks}
            # CPU per answer of the web process and of the replica (the wall clock mostly measures the machine's
            # other load; CPU time does not): the web tier's own cost per query, and the replica's both ways.
            cpu: dict[str, list[int]] = {key: [0, 0] for key in asks}
            for _ in range(runs):
                for key, ask in asks.items():
                    web_before, replica_before = cpu_ns(web_pid), cpu_ns(replica.pid)
                    samples[key].append(ask(query))
                    cpu[key][0] += cpu_ns(web_pid) - web_before
                    cpu[key][1] += cpu_ns(replica.pid) - replica_before
            diffs = [w - d for w, d in zip(samples["web"], samples["direct"], strict=True)]
            for key, values in samples.items():
                row.setdefault(f"{key}_ms", {})[name_q] = p50(values)
            row.setdefault("overhead_ms", {})[name_q] = p50(diffs)
            row.setdefault("web_process_cpu_ms", {})[name_q] = round(cpu["web"][0] / runs / 1e6, 3)
            row.setdefault("replica_cpu_ms_direct", {})[name_q] = round(cpu["direct"][1] / runs / 1e6, 3)
            row.setdefault("replica_cpu_ms_web", {})[name_q] = round(cpu["web"][1] / runs / 1e6, 3)
        print(
            f"round {k + 1} (load {load:.1f}): "
            + "  ".join(
                f"{q}: direct {row['direct_ms'][q]:.2f} (bare {row['direct_bare_ms'][q]:.2f})"
                f" web {row['web_ms'][q]:.2f} overhead {row['overhead_ms'][q]:.2f} ms"
                f" (web process CPU {row['web_process_cpu_ms'][q]:.2f} ms)"
                for q in QUERIES
            )
        )
        out["rounds"].append(row)
    out["overhead_p50_of_rounds_ms"] = {
        q: round(statistics.median(r["overhead_ms"][q] for r in out["rounds"]), 2) for q in QUERIES
    }
    out["web_process_cpu_ms_median_of_rounds"] = {
        q: round(statistics.median(r["web_process_cpu_ms"][q] for r in out["rounds"]), 3) for q in QUERIES
    }
    out["load_1m"] = [r["load_1m"] for r in out["rounds"]]
    print(f"fan-out overhead, median of {rounds} rounds: {out['overhead_p50_of_rounds_ms']}")
    print(f"web process CPU per query, median of {rounds} rounds: {out['web_process_cpu_ms_median_of_rounds']}")
    return out


def start_web_and_worker(bench: Bench) -> tuple[Server, httpx2.Client]:
    """The web tier (`serve --no-jobs`) with an admin's client, and one `codewell worker`."""
    web_port = free_port()
    web = bench.cluster.start("web", ["serve", "--no-jobs", "--port", str(web_port)], web_port)
    client = httpx2.Client(headers={"authorization": f"token {admin_token(web)}"}, timeout=600)
    bench.cluster.start("worker", ["worker"])
    return web, client


def run_overhead(args: argparse.Namespace) -> dict[str, Any]:
    """One web process, one worker, one replica holding every repository: the overhead phase only."""
    root = corpus.linux_many(args.repos)
    bench = Bench(args)
    web, client = start_web_and_worker(bench)
    bench.start_searcher("s1")

    def search(query: str) -> tuple[dict[str, Any], float]:
        started = time.perf_counter()
        response = client.get(f"{web.base}/.api/search", params={"q": query})
        elapsed = time.perf_counter() - started
        response.raise_for_status()
        return response.json(), elapsed

    register(bench.shared, root, args.repos)
    indexed_s = bench.wait(lambda: bench.held("s1") >= args.repos and bench.jobs_waiting() == 0, "indexing", args.limit)
    print(f"indexed {args.repos} repositories on one replica in {indexed_s:.0f} s")
    counted = search(f"count:all timeout:60s {COMMON}")[0]
    results: dict[str, Any] = {"repos": args.repos, "searchers": 1, "mode": "overhead-only"}
    results["common_count_all_lines"] = counted["matchCount"]
    results.update(overhead_phase(bench, "s1", search, args.rounds, web.popen.pid))
    bench.replicas["s1"][1].terminate()
    results["stop"] = bench.cluster.stop()
    results["stop"]["searcher_exit_codes"] = [bench.replicas["s1"][1].wait(60)]
    drop_postgres(args.postgres, args.pg_database)
    return results


def join_phase(bench: Bench, first: str, joined: str) -> dict[str, Any]:
    """A new replica with an empty disk joins: seconds until it holds its share and the other dropped it."""
    repos = bench.args.repos
    started = time.monotonic()
    bench.start_searcher(joined)
    share = sum(1 for rid in range(1, repos + 1) if _owner(f"repo:{rid}", [first, joined]) == joined)
    bench.wait(
        lambda: bench.held(joined) >= share * 0.98 and bench.held(first) + bench.held(joined) <= repos + 2,
        "the new replica's share",
        bench.args.limit,
    )
    seconds = time.monotonic() - started
    print(f"{joined} took over its share of {share} repositories in {seconds:.0f} s")
    return {"seconds": round(seconds, 1), "share": share, "repos_per_s": round(share / seconds, 2)}


def memory_phase(bench: Bench, names: list[str], source_mb: int) -> list[dict[str, Any]]:
    """Each replica's memory and data dir against its share of the corpus."""
    rows = []
    for name in names:
        pid = bench.replicas[name][1].pid
        held = bench.held(name)
        data = subprocess.run(["du", "-sm", str(bench.root / name)], capture_output=True, text=True, check=False)
        row = {
            "replica": name,
            "held": held,
            "share_source_mb": round(source_mb * held / bench.args.repos),
            "rss_mb": round(status_kib(pid, "VmRSS") / 1024),
            "anon_mb": round(status_kib(pid, "RssAnon") / 1024),
            "data_dir_mb": int(data.stdout.split()[0]) if data.stdout else -1,
        }
        rows.append(row)
        print(
            f"{name}: holds {held} ({row['share_source_mb']} MB of sources): RSS {row['rss_mb']} MB, "
            f"own {row['anon_mb']} MB, data dir {row['data_dir_mb']} MB"
        )
    return rows


def run(args: argparse.Namespace) -> dict[str, Any]:
    root = corpus.linux_many(args.repos)
    bench = Bench(args)
    web, client = start_web_and_worker(bench)
    names = [f"s{k + 1}" for k in range(args.searchers)]
    for name in names:
        bench.start_searcher(name)

    def search(query: str) -> tuple[dict[str, Any], float]:
        started = time.perf_counter()
        response = client.get(f"{web.base}/.api/search", params={"q": query})
        elapsed = time.perf_counter() - started
        response.raise_for_status()
        return response.json(), elapsed

    register(bench.shared, root, args.repos)
    indexed_s = bench.wait(
        lambda: sum(bench.held(n) for n in names) >= args.repos and bench.jobs_waiting() == 0, "indexing", args.limit
    )
    print(f"indexed {args.repos} repositories on {args.searchers} replicas in {indexed_s:.0f} s")
    source_mb = round(source_bytes(root, args.repos) / 2**20)
    results: dict[str, Any] = {
        "repos": args.repos,
        "searchers": args.searchers,
        "source_mb": source_mb,
        "index": {"seconds": round(indexed_s, 1), "repos_per_s": round(args.repos / indexed_s, 2)},
    }
    results.update(query_phase(bench, search, root))
    results["memory_partitioned"] = memory_phase(bench, names, source_mb)
    results["drain"] = drain_phase(bench, names)
    results.update(one_replica_phase(bench, names[0], search))
    results["partitioned_vs_one_direct_ms"] = {
        k: round(results["web_to_all_replicas_ms"][k] - results["one_replica_direct_ms"][k], 2) for k in QUERIES
    }
    joined = f"s{args.searchers + 1}"
    results["join"] = join_phase(bench, names[0], joined)
    results["memory_after_join"] = memory_phase(bench, [names[0], joined], source_mb)
    for _, popen in bench.replicas.values():
        popen.terminate()
    results["stop"] = bench.cluster.stop()
    results["stop"]["searcher_exit_codes"] = [popen.wait(60) for _, popen in bench.replicas.values()]
    drop_postgres(args.postgres, args.pg_database)  # a bench leaves no database behind
    return results


def drop_postgres(url: str, name: str) -> None:
    parts = urlsplit(url)
    admin = urlunsplit(("postgresql", parts.netloc, parts.path or "/postgres", parts.query, ""))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _owner(key: str, replicas: list[str]) -> str:
    """Rendezvous owner (the same hash as jobs/placement.py, restated: the bench must not trust the code it
    measures for what to expect)."""

    def weight(name: str) -> tuple[int, str]:
        digest = hashlib.blake2b(f"{name}\x00{key}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big"), name

    return max(replicas, key=weight)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repos", type=int, default=2000)
    parser.add_argument("--searchers", type=int, default=3)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--limit", type=float, default=3600.0, help="Seconds to wait for each phase.")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--pg-database", default="codewell_cluster_bench")
    parser.add_argument("--data", default="/var/tmp/codewell-bench/cluster")
    parser.add_argument("--out", default=str(RESULTS / "cluster_bench.json"))
    parser.add_argument("--overhead-only", action="store_true", help="one replica: the fan-out overhead only")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of --overhead-only")
    args = parser.parse_args()
    results = run_overhead(args) if args.overhead_only else run(args)
    results["when"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    results["commit"] = git_head()
    results["dirty"] = bool(git_status())
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
