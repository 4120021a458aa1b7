"""Scale benchmark (#28): N small repositories cut from the Linux tree, served by real codewell processes.

Corpus: `bench/corpus.py --many N` (linux-many/NNNNN: ~20 consecutive files each, one commit on `main`, with the
same files as their work trees for ripgrep). Processes on loopback, over a fresh data dir (--data):
  all-in-one   one `codewell serve` on SQLite (the default)
  --postgres   one PostgreSQL database (dropped and created: --pg-database) shared by `--web W` processes
               `codewell serve --no-jobs` and `--workers K` processes `codewell worker` (with --workers 0: W
               all-in-one `codewell serve` processes)
Measured:
  registration + indexing: the `repositories` site config gets one `local` source listing the N repositories
    (what an operator writes at that scale); from that write until `GET /.api/search/status` says every
    repository is indexed and the process tree went idle (codenav and nls build after search's shard):
    repos/s, wall, CPU seconds of every server process and its children (/proc), how busy the 2 cores were,
    peak RSS (sum over the tree and the largest process)
  queries over MCP (`/.api/mcp`, the admin token printed at first start), each run right after ripgrep
    (`rg --no-unicode -n -i -F` over the same N work trees) in the same run, p50 of --runs: a rare literal, the
    first page of a common literal (against ripgrep's 500th line, what `rg | head -n 500` waits for) and
    `count:all` of the common literal (--count-runs); the matches must agree with ripgrep's (both printed)
  list_repos over MCP, RSS of the web process(es) after the queries, `du` of the data dir, and whether any
  process is left after SIGTERM
Writes bench/.results/scale_bench.json (--out).
Run: python bench/scale_bench.py [--repos 10000] [--postgres URL --web 2 --workers 2] [--runs 5]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx2
import psycopg
from psycopg import sql

import corpus
from codewell.config import SiteConfig
from codewell.config.store import SiteConfigStore
from codewell.core.processes import terminate_with_parent

RESULTS = Path(__file__).parent / ".results"
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
PREFIX = "many"
RARE = "ftrace_graph_ret_addr"
COMMON = "mutex_lock"
RG_FLAGS = ["--no-unicode", "-n", "--null", "--no-ignore", "--hidden", "-g", "!.git", "--max-filesize", "1M"]
TICK = os.sysconf("SC_CLK_TCK")
STALL_SECONDS = 900
PAGE = os.sysconf("SC_PAGE_SIZE")


def find_rg() -> str | None:
    """The venv's ripgrep (as the other benches use), else the one on PATH (Debian's `ripgrep`)."""
    beside = Path(sys.executable).with_name("rg")
    return str(beside) if beside.exists() else shutil.which("rg")


# ---------------------------------------------------------------- processes (/proc, no psutil in the venv)


@dataclass(frozen=True, slots=True)
class ProcInfo:
    ppid: int
    cpu_ticks: int  # utime + stime + cutime + cstime: its own CPU and that of the children it reaped
    rss_bytes: int
    start: int  # start time in ticks since boot: tells a reused pid apart
    state: str  # R, S, D, Z (zombie), ...


def proc_table() -> dict[int, ProcInfo]:
    table: dict[int, ProcInfo] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        cpu = sum(int(fields[i]) for i in (11, 12, 13, 14))
        table[int(entry)] = ProcInfo(int(fields[1]), cpu, int(fields[21]) * PAGE, int(fields[19]), fields[0])
    return table


def tree(roots: list[int], table: dict[int, ProcInfo]) -> set[int]:
    """`roots` and every live descendant."""
    children: dict[int, list[int]] = {}
    for pid, info in table.items():
        children.setdefault(info.ppid, []).append(pid)
    found: set[int] = set()
    stack = [pid for pid in roots if pid in table]
    while stack:
        pid = stack.pop()
        if pid not in found:
            found.add(pid)
            stack.extend(children.get(pid, []))
    return found


def tree_cpu(roots: list[int]) -> float:
    """CPU seconds of the processes and all their descendants, live or reaped (a reaped child's time is in
    its parent's cutime/cstime)."""
    table = proc_table()
    return sum(table[pid].cpu_ticks for pid in tree(roots, table)) / TICK


def status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


class Monitor:
    """Samples the process trees once a second: peak summed RSS and peak RSS of one process; and the CPU of
    the PostgreSQL backends serving `database` (not our descendants: the postmaster forks them)."""

    def __init__(self, roots: list[int], database: str | None) -> None:
        self.roots = roots
        self.peak_tree = 0
        self.peak_process = 0
        self.backend = f" {database} " if database else None
        self._backends: dict[tuple[int, int], tuple[int, int]] = {}  # (pid, start) -> (ticks at first sight, last)
        self._first = True
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.sample()

    def sample(self) -> None:
        table = proc_table()
        rss = [table[pid].rss_bytes for pid in tree(self.roots, table)]
        self.peak_tree = max(self.peak_tree, sum(rss))
        self.peak_process = max(self.peak_process, max(rss, default=0))
        if self.backend:
            for pid, info in table.items():
                # `postgres: [CLUSTER: ]USER DATABASE HOST(PORT) STATE`
                name = cmdline(pid)
                if name.startswith("postgres: ") and self.backend in name:
                    key = (pid, info.start)
                    base = self._backends.get(key, (info.cpu_ticks if self._first else 0, 0))[0]
                    self._backends[key] = (base, info.cpu_ticks)
        self._first = False

    @property
    def backend_cpu(self) -> float:
        """CPU seconds the database's backends used while sampled (an exiting backend's last second is lost)."""
        return sum(last - base for base, last in self._backends.values()) / TICK

    def __enter__(self) -> Monitor:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


def wait_idle(roots: list[int], limit: float, quiet: float = 3.0) -> float:
    """Wait until the trees used < 5% of one core for `quiet` seconds in a row; return when that quiet began."""
    deadline = time.monotonic() + limit
    since = time.time()
    calm = 0.0
    before = tree_cpu(roots)
    while time.monotonic() < deadline and calm < quiet:
        time.sleep(1.0)
        now = tree_cpu(roots)
        if now - before < 0.05:
            calm += 1.0
        else:
            calm, since = 0.0, time.time()
        before = now
    if calm < quiet:
        print(f"warning: the server processes never went idle within {limit:.0f} s")
    return since


@dataclass
class Server:
    role: str  # serve | web | worker
    popen: subprocess.Popen[bytes]
    log: Path
    port: int | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class Cluster:
    data: Path
    env: dict[str, str]
    servers: list[Server] = field(default_factory=list)
    database: str | None = None  # the PostgreSQL database's name, None on SQLite

    @property
    def pids(self) -> list[int]:
        return [s.popen.pid for s in self.servers]

    @property
    def web(self) -> list[Server]:
        return [s for s in self.servers if s.port is not None]

    def start(self, role: str, args: list[str], port: int | None = None) -> Server:
        logs = self.data.parent / "scale-logs"
        logs.mkdir(exist_ok=True)
        log = logs / f"{role}{len(self.servers)}.log"
        with log.open("wb") as out:
            popen = subprocess.Popen(
                [sys.executable, "-m", "codewell", *args],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=terminate_with_parent,  # noqa: PLW1509 (prctl only, see its docstring)
            )
        server = Server(role, popen, log, port)
        self.servers.append(server)
        if port is not None:
            wait_healthy(server)
        return server

    def stop(self) -> dict[str, Any]:
        """SIGTERM every process we started, wait, then report any process left over (and kill it).

        Left over: a descendant seen before the signal (same pid and start time), or any process whose
        environment names this data dir, still alive 10 s after the processes we started exited. Zombies
        (exited, not yet reaped by whoever inherited them: PID 1 here reaps lazily) are reported apart."""
        table = proc_table()
        snapshot = {pid: (table[pid].start, cmdline(pid)) for pid in tree(self.pids, table)}
        for server in self.servers:
            if server.popen.poll() is None:
                server.popen.send_signal(signal.SIGTERM)
        exits: dict[str, int | None] = {}
        started = time.perf_counter()
        for n, server in enumerate(self.servers):
            try:
                exits[f"{server.role}{n}"] = server.popen.wait(timeout=60)
            except subprocess.TimeoutExpired:
                exits[f"{server.role}{n}"] = None
                server.popen.kill()
                server.popen.wait()
        stopped_s = time.perf_counter() - started
        deadline = time.monotonic() + 10
        while True:
            left, zombies = self._left(snapshot)
            if not (left or zombies) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        for pid in left:  # ours: started by the processes this bench started
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return {
            "exit_codes": exits,
            "seconds_to_exit": round(stopped_s, 1),
            "leftover_processes": [{"pid": pid, "cmdline": snapshot.get(pid, ("", cmdline(pid)))[1]} for pid in left],
            "zombies": [{"pid": pid, "cmdline": snapshot.get(pid, ("", "?"))[1]} for pid in zombies],
        }

    def _left(self, snapshot: dict[int, tuple[int, str]]) -> tuple[list[int], list[int]]:
        """(live processes left over, zombies left over)."""
        table = proc_table()
        marker = f"CODEWELL_DATA_DIR={self.data}".encode()
        left = {pid for pid, (start, _) in snapshot.items() if pid in table and table[pid].start == start}
        for pid in table:
            with contextlib.suppress(OSError):
                if pid != os.getpid() and marker in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                    left.add(pid)
        zombies = {pid for pid in left if table[pid].state == "Z"}
        return sorted(left - zombies), sorted(zombies)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_healthy(server: Server, limit: float = 300.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if server.popen.poll() is not None:
            sys.exit(f"{server.role} exited with {server.popen.returncode}; see {server.log}:\n{tail(server.log)}")
        try:
            if httpx2.get(server.base + "/healthz", timeout=2).status_code == 200:
                return
        except httpx2.HTTPError:
            pass
        time.sleep(0.2)
    sys.exit(f"{server.role} did not answer /healthz within {limit:.0f} s; see {server.log}")


def tail(path: Path, lines: int = 20) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def admin_token(server: Server) -> str:
    """The admin token printed at first start: by this server, or by whichever process of the cluster started on
    the same new database at the same moment and made the admin first (a worker may win that race)."""
    # The first-start block may reach the log a moment after /healthz first answers: read it for a while.
    deadline = time.monotonic() + 30
    while True:
        logs = [server.log, *sorted(p for p in server.log.parent.glob("*.log") if p != server.log)]
        pattern = r"access token: (\S+)"
        found = next((m for log in logs if (m := re.search(pattern, log.read_text(errors="replace")))), None)
        if found:
            return found.group(1)
        if time.monotonic() > deadline:
            sys.exit(f"no access token in {server.log} (the data dir must be fresh):\n{tail(server.log)}")
        time.sleep(0.2)


def check_flags(env: dict[str, str]) -> None:
    """The multi-process mode needs `serve --no-jobs` and `worker`: fail clearly when this code has neither."""
    serve = subprocess.run(
        [sys.executable, "-m", "codewell", "serve", "--help"], env=env, capture_output=True, check=False
    )
    if b"--no-jobs" not in serve.stdout:
        sys.exit("`codewell serve` has no --no-jobs flag in this checkout: the multi-process mode needs it")
    worker = subprocess.run(
        [sys.executable, "-m", "codewell", "worker", "--help"], env=env, capture_output=True, check=False
    )
    if worker.returncode != 0:
        sys.exit("`codewell worker` does not exist in this checkout: the multi-process mode needs it")


def fresh_postgres(url: str, name: str) -> str:
    """Drop and create database `name` on the server of `url`; return the URL of the new database."""
    parts = urlsplit(url)
    admin = urlunsplit(("postgresql", parts.netloc, parts.path or "/postgres", parts.query, ""))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, ""))


def start_cluster(args: argparse.Namespace, data: Path) -> Cluster:
    env = {**os.environ, "CODEWELL_DATA_DIR": str(data), "CODEWELL_LOG_LEVEL": "warning", "PYTHONUNBUFFERED": "1"}
    if args.postgres:
        env["CODEWELL_DATABASE_URL"] = fresh_postgres(args.postgres, args.pg_database)
    cluster = Cluster(data, env, database=args.pg_database if args.postgres else None)
    if args.workers:
        check_flags(env)
    # The first web process migrates and creates the admin (its token is printed once); the others follow.
    for n in range(args.web):
        flags = ["--no-jobs"] if args.workers else []
        flags += ["--no-migrate"] if n else []
        port = free_port()
        cluster.start("web" if args.workers else "serve", ["serve", "--port", str(port), *flags], port)
    for _ in range(args.workers):
        cluster.start("worker", ["worker"])
    return cluster


# ---------------------------------------------------------------- registration and indexing


def include_globs(n: int, width: int = 5) -> list[str]:
    """fnmatch patterns naming exactly the directories 0..n-1 (zero-padded to `width`): 200 -> 000??, 001??."""
    if n >= 10**width:
        return []
    digits = f"{n:0{width}d}"
    patterns = []
    for i, digit in enumerate(digits):
        if digit != "0":
            top = int(digit) - 1
            patterns.append(digits[:i] + (f"[0-{top}]" if top else "0") + "?" * (width - i - 1))
    return patterns


def register(data: Path, root: Path, n: int) -> float:
    """Write the `repositories` source into the site config the servers watch; return when (epoch s)."""
    store = SiteConfigStore.open(data / "site-config.json", create=False)
    config = store.current.model_dump(by_alias=True)
    source = {"kind": "local", "path": str(root), "prefix": PREFIX, "include": include_globs(n)}
    # The corpus never changes: no periodic re-fetch of 10,000 mirrors while the indexing is measured.
    config["repositories"] = [{**source, "syncIntervalSeconds": 86400}]
    written = time.time()
    store.write(SiteConfig.model_validate(config))
    return written


def wait_indexed(cluster: Cluster, token: str, n: int, t0: float, limit: float) -> dict[str, Any]:
    """Poll the index status until every repository is indexed (or failed), spacing the polls so that they
    cost the server at most ~10% of the wall time; then wait until the process tree is idle."""
    client = httpx2.Client(headers={"authorization": f"token {token}"}, timeout=600)
    polls, indexed, states, latest = 0, 0, Counter[str](), t0
    deadline = time.monotonic() + limit
    progress = (-1, time.monotonic())  # (indexed, when that count was first seen)
    while time.monotonic() < deadline:
        started = time.perf_counter()
        response = client.get(cluster.web[0].base + "/.api/search/status")
        took = time.perf_counter() - started
        response.raise_for_status()
        repos = response.json()["repositories"]
        polls += 1
        states = Counter(r["state"] for r in repos)
        indexed = states["indexed"]
        stamps = [dt.datetime.fromisoformat(r["indexedAt"]).timestamp() for r in repos if r["indexedAt"]]
        latest = max(stamps, default=t0)
        elapsed = time.time() - t0
        print(
            f"  {elapsed:7.0f} s  registered {len(repos):5}  indexed {indexed:5}  failed {states['failed']}"
            f"  ({indexed / max(elapsed, 1e-9):.2f} repos/s; status poll {took * 1000:.0f} ms)"
        )
        if len(repos) >= n and indexed + states["failed"] >= n:
            break
        if indexed != progress[0]:
            progress = (indexed, time.monotonic())
        elif time.monotonic() - progress[1] > STALL_SECONDS:
            # A web replica does not see a worker's failures (kept in that worker's memory): stop waiting.
            print(f"warning: no repository indexed for {STALL_SECONDS} s; measuring what is indexed")
            break
        time.sleep(max(5.0, 10 * took))
    client.close()
    settled = wait_idle(cluster.pids, limit=600.0)
    return {
        "indexed": indexed,
        "states": dict(states),
        "status_polls": polls,
        "search_indexed_s": round(latest - t0, 1),
        "settled_s": round(max(settled, latest) - t0, 1),
    }


def index_phase(cluster: Cluster, token: str, root: Path, n: int, limit: float) -> dict[str, Any]:
    wait_idle(cluster.pids, limit=120.0)
    cpu0 = tree_cpu(cluster.pids)
    with Monitor(cluster.pids, cluster.database) as monitor:
        t0 = register(cluster.data, root, n)
        done = wait_indexed(cluster, token, n, t0, limit)
    cpu = tree_cpu(cluster.pids) - cpu0
    wall = done["settled_s"]
    result = {
        **done,
        "repos_per_s": round(done["indexed"] / max(wall, 1e-9), 2),
        "cpu_s": round(cpu, 1),
        "cores_busy": round(cpu / max(wall, 1e-9) / (os.cpu_count() or 1), 2),
        "peak_rss_tree_mb": round(monitor.peak_tree / 2**20),
        "peak_rss_process_mb": round(monitor.peak_process / 2**20),
    }
    if cluster.database:
        result["postgres_backends_cpu_s"] = round(monitor.backend_cpu, 1)
    print(
        f"registered + indexed {done['indexed']} of {n} repositories in {wall:.1f} s "
        f"(search shards done at {done['search_indexed_s']:.1f} s): {result['repos_per_s']} repos/s; "
        f"CPU {cpu:.0f} s of all server processes ({result['cores_busy']:.0%} of {os.cpu_count()} cores); "
        f"peak RSS {result['peak_rss_tree_mb']} MB summed, {result['peak_rss_process_mb']} MB largest process"
        + (f"; PostgreSQL backends {result['postgres_backends_cpu_s']} CPU s" if cluster.database else "")
    )
    return result


# ---------------------------------------------------------------- queries


class Mcp:
    """JSON-RPC tools/call over HTTP, round-robin over the web processes."""

    def __init__(self, bases: list[str], token: str) -> None:
        self.bases = bases
        self.client = httpx2.Client(headers={**HEADERS, "authorization": f"token {token}"}, timeout=900)
        self.calls = 0

    def call(self, tool: str, arguments: dict[str, Any], web: int | None = None) -> tuple[str, float]:
        """(answer text, seconds). Raises on an HTTP error or an isError result."""
        self.calls += 1
        base = self.bases[self.calls % len(self.bases) if web is None else web]
        body = {
            "jsonrpc": "2.0",
            "id": self.calls,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
        started = time.perf_counter()
        response = self.client.post(base + "/.api/mcp", json=body)
        elapsed = time.perf_counter() - started
        response.raise_for_status()
        if response.headers.get("content-type", "").startswith("application/json"):
            message = response.json()
        else:
            # SSE: the body is UTF-8 whatever the content type says (no charset: a client may guess latin-1).
            lines = response.content.decode("utf-8").splitlines()
            message = next(json.loads(line[5:]) for line in lines if line.startswith("data:"))
        result = message["result"]
        # The tools answer structured content {"text": ...}; the text content holds the same as JSON.
        structured = result.get("structuredContent") or {}
        text = structured.get("text") or "".join(c.get("text", "") for c in result["content"])
        if result.get("isError"):
            raise RuntimeError(f"{tool} {arguments}: {text[:300]}")
        return text, elapsed


def answer_lines(text: str) -> set[str]:
    """`repo/path:line` of every `N: text` line under a `# repo – path` header."""
    found: set[str] = set()
    current = ""
    for line in text.splitlines():
        if line.startswith("# ") and " – " in line:
            repo, path = line[2:].split(" – ", 1)
            current = f"{repo}/{path}"
        elif current and (match := re.match(r"(\d+): ", line)):
            found.add(f"{current}:{match.group(1)}")
    return found


def answer_total(text: str) -> int | None:
    """The `of N` of a count: answer's note (every collected match), None when absent."""
    found = re.search(r"howing matches \d+-\d+ of (\d+)", text)
    if found:
        return int(found.group(1))
    return 0 if text.startswith("No results for") else None


class Ripgrep:
    def __init__(self, rg: str, root: Path, n: int) -> None:
        self.rg, self.root = rg, root
        self.dirs = [f"{k:05d}" for k in range(n)]

    def lines(self, literal: str) -> tuple[set[str], float]:
        """Every matching `repo/path:line` (case-insensitive, like ours by default) and ripgrep's seconds."""
        started = time.perf_counter()
        out = subprocess.run(
            [self.rg, *RG_FLAGS, "-i", "-F", "-e", literal, *self.dirs], cwd=self.root, capture_output=True, check=False
        ).stdout
        elapsed = time.perf_counter() - started
        found: set[str] = set()
        for line in out.split(b"\n"):
            if line:
                path, rest = line.split(b"\0", 1)
                found.add(f"{PREFIX}/{path.decode('utf-8', 'replace')}:{int(rest.split(b':', 1)[0])}")
        return found, elapsed

    def first_lines(self, literal: str, lines: int = 500) -> float:
        """Seconds until ripgrep has printed `lines` matching lines (what `rg ... | head -n 500` waits for)."""
        started = time.perf_counter()
        cmd = [self.rg, *RG_FLAGS, "-i", "-F", "-e", literal, *self.dirs]
        with subprocess.Popen(cmd, cwd=self.root, stdout=subprocess.PIPE) as proc:
            assert proc.stdout is not None
            for _ in range(lines):
                if not proc.stdout.readline():
                    break
            elapsed = time.perf_counter() - started
            proc.kill()
        return elapsed


def ms(seconds: list[float]) -> float:
    return round(statistics.median(seconds) * 1000, 1)


def timed_query(
    mcp: Mcp, name: str, query: str, runs: int, baseline: Callable[[], float] | None, measures: str
) -> tuple[dict[str, Any], str]:
    """First call on each web process (cold), then `runs` calls each right after a ripgrep run: p50s."""
    first = [mcp.call("keyword_search", {"query": query}, web=w)[1] for w in range(len(mcp.bases))]
    ours: list[float] = []
    theirs: list[float] = []
    text = ""
    for _ in range(runs):
        if baseline is not None:
            theirs.append(baseline())
        text, seconds = mcp.call("keyword_search", {"query": query})
        ours.append(seconds)
    row: dict[str, Any] = {"query": query, "p50_ms": ms(ours), "first_call_ms": [round(s * 1000) for s in first]}
    if theirs:
        row["rg_p50_ms"] = ms(theirs)
        row["rg_over_ours"] = round(row["rg_p50_ms"] / max(row["p50_ms"], 1e-3), 2)
        row["rg_measures"] = measures
    ratio = f"  rg {row['rg_p50_ms']:9.1f} ms  rg/ours x{row['rg_over_ours']}" if theirs else ""
    print(f"{name:22} ours p50 {row['p50_ms']:9.1f} ms (first calls {row['first_call_ms']} ms){ratio}")
    return row, text


def query_phase(mcp: Mcp, rg: Ripgrep | None, args: argparse.Namespace) -> dict[str, Any]:
    rare_word, common, runs, count_runs = args.rare, args.common, args.runs, args.count_runs
    every = "rg over every file"

    def rg_all(literal: str) -> Callable[[], float] | None:
        return None if rg is None else lambda: rg.lines(literal)[1]

    head = None if rg is None else lambda: rg.first_lines(common)
    rare, _ = timed_query(mcp, "rare literal", rare_word, runs, rg_all(rare_word), every)
    page, page_text = timed_query(mcp, "common first page", common, runs, head, "time to rg's 500th line")
    count_all = f"count:all timeout:60s {common}"
    counted, count_text = timed_query(mcp, "common count:all", count_all, count_runs, rg_all(common), every)
    rare_text, _ = mcp.call("keyword_search", {"query": f"count:all {rare_word}"})
    if rg is not None:
        rare_rg, _ = rg.lines(rare_word)
        common_rg, _ = rg.lines(common)
        ours_rare = answer_lines(rare_text)
        rare["check"] = {
            "ours_total": answer_total(rare_text),
            "ours_lines": len(ours_rare),
            "rg_lines": len(rare_rg),
            "identical": ours_rare == rare_rg,
        }
        shown = answer_lines(page_text)
        page["check"] = {"lines_shown": len(shown), "not_in_rg": len(shown - common_rg)}
        total = answer_total(count_text)
        counted["check"] = {
            "ours_total": total,
            "rg_lines": len(common_rg),
            "agree": total == len(common_rg),
            "page_lines_not_in_rg": len(answer_lines(count_text) - common_rg),
            "timed_out": "timed out" in count_text,
        }
        for name, row in (("rare literal", rare), ("common first page", page), ("common count:all", counted)):
            print(f"{name:22} check {row['check']}")
    return {"rare_literal": rare, "common_first_page": page, "common_count_all": counted}


def list_repos_phase(mcp: Mcp, runs: int = 20) -> dict[str, Any]:
    mcp.call("list_repos", {"query": ""})
    samples = [mcp.call("list_repos", {"query": ""})[1] for _ in range(runs)]
    filtered = [mcp.call("list_repos", {"query": f"{PREFIX}/0001"})[1] for _ in range(runs)]
    row = {"p50_ms": ms(samples), "filtered_p50_ms": ms(filtered), "runs": runs}
    print(f"list_repos             p50 {row['p50_ms']} ms (query '{PREFIX}/0001': {row['filtered_p50_ms']} ms)")
    return row


# ---------------------------------------------------------------- sizes


def du_mb(path: Path) -> dict[str, int]:
    """Disk usage (du -sk) of `path` and of each of its entries, in MB."""
    out = subprocess.run(
        ["du", "-sk", str(path), *map(str, path.iterdir())], capture_output=True, text=True, check=False
    ).stdout
    sizes = {}
    for line in out.splitlines():
        kib, name = line.split("\t", 1)
        sizes["total" if Path(name) == path else Path(name).name] = round(int(kib) / 1024)
    return sizes


def unshared_mb(path: Path, corpus_root: Path) -> int:
    """Disk usage of `path` without the blocks it shares with the corpus through hard links (a local clone links
    the source's loose objects: a code host's clone is a pack of its own, counted whole)."""
    out = subprocess.run(["du", "-sk", str(corpus_root), str(path)], capture_output=True, text=True, check=False).stdout
    for line in out.splitlines():
        kib, name = line.split("\t", 1)
        if Path(name) == path:
            return round(int(kib) / 1024)
    return -1


def source_bytes(root: Path, n: int) -> int:
    """Bytes of the files (not the .git) of the first `n` repositories: what the data dir holds the index of."""
    total = 0
    for k in range(n):
        for directory, dirs, files in os.walk(root / f"{k:05d}"):
            dirs[:] = [d for d in dirs if d != ".git"]
            total += sum(os.lstat(os.path.join(directory, f)).st_size for f in files)
    return total


def web_rss(cluster: Cluster) -> list[dict[str, int]]:
    table = proc_table()
    rows = []
    for server in cluster.web:
        pid = server.popen.pid
        rows.append(
            {
                "rss_mb": round(status_kib(pid, "VmRSS") / 1024),
                "anon_mb": round(status_kib(pid, "RssAnon") / 1024),
                "with_children_mb": round(sum(table[p].rss_bytes for p in tree([pid], table)) / 2**20),
            }
        )
    return rows


# ---------------------------------------------------------------- main


def git_head() -> str:
    found = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True, check=False
    )
    return found.stdout.strip()


def git_status() -> str:
    found = subprocess.run(
        ["git", "status", "--porcelain"], cwd=Path(__file__).parent, capture_output=True, text=True, check=False
    )
    return found.stdout.strip()


def run(args: argparse.Namespace, rg_path: str | None) -> dict[str, Any]:
    root = corpus.linux_many(args.repos)
    stamp = json.loads((corpus.BENCH_DIR / corpus.MANY_STAMP).read_text())
    shutil.rmtree(args.data, ignore_errors=True)
    shutil.rmtree(args.data.parent / "scale-logs", ignore_errors=True)
    args.data.mkdir(parents=True)
    mode = f"postgres web={args.web} workers={args.workers}" if args.postgres else "all-in-one sqlite"
    result: dict[str, Any] = {
        "mode": mode,
        "repos": args.repos,
        "commit": git_head(),
        "uncommitted_changes": bool(git_status()),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "corpus": {**stamp, "source_mb_of_these_repos": round(source_bytes(root, args.repos) / 1e6)},
        "ripgrep": rg_path or "absent",
    }
    cluster = start_cluster(args, args.data)
    try:
        token = admin_token(cluster.servers[0])
        result["index"] = index_phase(cluster, token, root, args.repos, args.index_timeout)
        mcp = Mcp([s.base for s in cluster.web], token)
        rg = Ripgrep(rg_path, root, args.repos) if rg_path else None
        result["queries"] = query_phase(mcp, rg, args)
        result["list_repos"] = list_repos_phase(mcp)
        result["web_rss_after_queries"] = web_rss(cluster)
        print(f"web process RSS after the queries: {result['web_rss_after_queries']}")
    finally:
        result["shutdown"] = cluster.stop()
    result["data_dir_mb"] = du_mb(args.data)
    result["data_dir_unshared_mb"] = unshared_mb(args.data, root)
    print(
        f"data dir: {result['data_dir_mb']} MB ({result['data_dir_unshared_mb']} MB not hard-linked to the corpus) "
        f"for {result['corpus']['source_mb_of_these_repos']} MB of sources"
    )
    down = result["shutdown"]
    print(
        f"after SIGTERM: exit codes {down['exit_codes']} in {down['seconds_to_exit']} s; "
        f"leftover processes: {down['leftover_processes'] or 'none'}; zombies: {down['zombies'] or 'none'}"
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repos", type=int, default=10000, help="repositories to register (corpus built as needed)")
    parser.add_argument("--data", type=Path, default=corpus.BENCH_DIR / "scale-data", help="fresh data dir")
    parser.add_argument("--postgres", metavar="URL", help="PostgreSQL server URL (postgresql+psycopg://...)")
    parser.add_argument("--pg-database", default="bench_scale", help="database dropped and created on it")
    parser.add_argument("--web", type=int, default=1, help="web processes (more than 1 needs --postgres)")
    parser.add_argument("--workers", type=int, default=0, help="`codewell worker` processes (web then --no-jobs)")
    parser.add_argument("--rare", default=RARE, help="the rare literal")
    parser.add_argument("--common", default=COMMON, help="the common literal")
    parser.add_argument("--runs", type=int, default=5, help="timed runs of the selective queries")
    parser.add_argument("--count-runs", type=int, default=3, help="timed runs of count:all")
    parser.add_argument("--index-timeout", type=float, default=4 * 3600, help="seconds to wait for indexing")
    parser.add_argument("--out", type=Path, default=RESULTS / "scale_bench.json")
    args = parser.parse_args()
    if (args.web > 1 or args.workers) and not args.postgres:
        parser.error("--web > 1 and --workers need --postgres (several processes on one SQLite file are not a setup)")
    rg_path = find_rg()
    if rg_path is None:
        print("ripgrep is absent (apt-get install ripgrep): no ripgrep baseline and no result check in this run")
    result = run(args, rg_path)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
