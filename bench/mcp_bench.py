"""MCP benchmark: 32 concurrent clients calling read_file and list_repos over real HTTP against a real
`codewell serve` process, for 30 s.

Reported, in the same run:
  direct      RepoService.read_file / list_repos called in-process (the baseline the MCP layer adds to)
  handler     the same through the tool handler + envelope (ToolCaller.call, no HTTP)
  sequential  one client, one call at a time, over HTTP/MCP: p50/p99; MCP overhead = sequential p50 - direct p50
  floor       GET /healthz sequentially (what any HTTP request costs on this stack)
  load        32 concurrent clients for --seconds: calls/s, p50/p99, errors, server CPU per call summed over every
              web process, the load generator's own CPU per call, each web process's RSS at start/middle/end
The server runs `codewell serve --web-processes N` (--web-processes, default 2: one process per core; one
process is bound by Python's GIL near 1 / its CPU per call). The load generator runs on the same 2 cores as the
server, so throughput figures are a lower bound; `--compare` runs the load phase with 1 process too, in the same
run, for the ratio.
Targets (#30): overhead <= 2 ms p50, >= 600 calls/s at 32 clients on 2 cores, server CPU <= 3 ms per call, no
errors, flat memory.
The load phase uses a lean raw HTTP/1.1 keep-alive client (RawClient) so the generator takes less of the CPU.
Run: python bench/mcp_bench.py [--seconds 30] [--clients 32] [--web-processes 2] [--compare]
     [--out bench/.results/mcp_bench.json] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2

from codewell.accounts.service import AccountService
from codewell.accounts.tokens import TokenService
from codewell.capabilities import CAPABILITIES
from codewell.core.actors import INTERNAL
from codewell.core.processes import terminate_with_parent
from codewell.core.settings import Settings
from codewell.core.tools import Endpoint
from codewell.mcp.registry import ToolRegistry
from codewell.mcp.server import ToolCaller
from codewell.repos.service import RepoService, register_local_repo
from codewell.runtime import Runtime

RESULTS = Path(__file__).parent / ".results"
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def pct(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 3),
    }


def make_source(root: Path, files: int = 200) -> Path:
    """A git repository with `files` Go files of ~120 lines each."""
    repo = root / "src"
    for n in range(files):
        path = repo / f"pkg{n % 10}" / f"file{n}.go"
        path.parent.mkdir(parents=True, exist_ok=True)
        body = "\n".join(f"func f{n}_{i}() int {{ return {i} * {n} }} // line {i}" for i in range(120))
        path.write_text(f"package pkg{n % 10}\n\n{body}\n")
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@x",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@x",
    }
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "bench"]):
        subprocess.run(["git", *args], cwd=repo, check=True, env=env)
    return repo


def prepare(data: Path, port: int, files: int = 200, repos: int = 20) -> tuple[str, list[tuple[str, str]], Runtime]:
    """Data dir with `repos` repositories of the same `files` files, one user and a token; returns (token,
    (repository, file path) pairs, runtime)."""
    settings = Settings.from_env({}, data_dir=data, database_url=f"sqlite:///{data}/codewell.db", port=port)
    runtime = Runtime.open(settings)
    runtime.db.upgrade()
    # The tools come from the declared capabilities (ToolRegistry.create reads runtime.capabilities); their
    # setup is not run here: the in-process baselines need the tools, not the background loops.
    runtime.capabilities = CAPABILITIES
    source = make_source(data.parent, files)
    names = [f"bench/repo{n:02d}" for n in range(repos)]
    for name in names:
        register_local_repo(runtime, source, name)
    user = runtime.get(AccountService).create_user(INTERNAL, "bench", site_admin=True)
    token, _ = runtime.get(TokenService).create_token(INTERNAL, user.id, "bench", ("user:all",))
    paths = [str(p.relative_to(source)) for p in source.rglob("*.go")]
    return token, [(name, path) for name in names for path in paths], runtime


def timed(fn: Callable[[], Any], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def direct_baselines(runtime: Runtime, files: list[tuple[str, str]], repeat: int = 400) -> dict[str, Any]:
    service = runtime.get(RepoService)
    user = runtime.get(AccountService).get_by_username("bench")
    actor = runtime.get(AccountService).actor_for(user, via="access_token")
    rng = random.Random(1)
    caller = ToolCaller(runtime, ToolRegistry.create(runtime))
    read = lambda: service.read_file(actor, *rng.choice(files))  # noqa: E731
    lst = lambda: service.list_repos(actor, "", 50)  # noqa: E731

    def read_tool():
        repo, path = rng.choice(files)
        return caller.call(Endpoint.CORE, actor, "read_file", {"repo": repo, "path": path})

    list_tool = lambda: caller.call(Endpoint.CORE, actor, "list_repos", {"query": ""})  # noqa: E731
    for fn in (read, lst, read_tool, list_tool):
        timed(fn, min(50, repeat))  # warm-up
    return {
        "direct": {"read_file": pct(timed(read, repeat)), "list_repos": pct(timed(lst, repeat))},
        "handler": {"read_file": pct(timed(read_tool, repeat)), "list_repos": pct(timed(list_tool, repeat))},
    }


def call_body(rng: random.Random, files: list[tuple[str, str]], n: int) -> dict[str, Any]:
    if n % 2:
        return {
            "jsonrpc": "2.0",
            "id": n,
            "method": "tools/call",
            "params": {"name": "list_repos", "arguments": {"query": "bench"}},
        }
    repo, path = rng.choice(files)
    args = {"repo": repo, "path": path}
    return {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "read_file", "arguments": args}}


def ok(response: httpx2.Response) -> bool:
    if response.status_code != 200:
        return False
    for line in response.text.splitlines():
        if line.startswith("data:"):
            message = json.loads(line[5:])
            return "result" in message and not message["result"].get("isError")
    return False


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (robust to other load on a shared machine, unlike wall time)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_total(pids: list[int]) -> float:
    """CPU seconds of every server process together."""
    return sum(cpu_seconds(pid) for pid in pids)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def sequential(url: str, token: str, files: list[tuple[str, str]], calls: int, pids: list[int]) -> dict[str, Any]:
    """One client, one request at a time; each MCP call is followed by an authenticated GET /healthz so both
    see the same machine conditions (the floor any authenticated request pays on this stack)."""
    rng = random.Random(2)
    samples: dict[str, list[float]] = {"read_file": [], "list_repos": [], "healthz": []}
    headers = {**HEADERS, "authorization": f"token {token}"}
    mcp_cpu = floor_cpu = 0.0
    async with httpx2.AsyncClient(headers=headers, timeout=30) as client:
        for n in range(calls + 40):
            body = call_body(rng, files, n)
            cpu = cpu_total(pids)
            start = time.perf_counter()
            response = await client.post(url, json=body)
            elapsed = time.perf_counter() - start
            cpu_mid = cpu_total(pids)
            assert ok(response), response.text[:300]
            floor_start = time.perf_counter()
            await client.get(url.replace("/.api/mcp", "/healthz"))
            floor = time.perf_counter() - floor_start
            if n >= 40:
                samples[body["params"]["name"]].append(elapsed)
                samples["healthz"].append(floor)
                mcp_cpu += cpu_mid - cpu
                floor_cpu += cpu_total(pids) - cpu_mid
    return {
        **{name: pct(values) for name, values in samples.items()},
        "server_cpu_ms_per_mcp_call": round(mcp_cpu / calls * 1000, 3),
        "server_cpu_ms_per_healthz": round(floor_cpu / calls * 1000, 3),
    }


class RawClient:
    """A lean HTTP/1.1 keep-alive client on asyncio streams: one connection per simulated client, requests
    pre-encoded, responses read by Content-Length (or chunked). It costs a fraction of httpx's CPU per call,
    so on a shared 2-core machine more of the CPU goes to the server being measured."""

    def __init__(self, url: str, token: str) -> None:
        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path
        self.head = (
            f"POST {self.path} HTTP/1.1\r\nhost: {self.host}:{self.port}\r\n"
            f"accept: {HEADERS['accept']}\r\ncontent-type: application/json\r\n"
            f"authorization: token {token}\r\nuser-agent: mcp-bench\r\n"
        ).encode()
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, payload: dict[str, Any]) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        body = json.dumps(payload).encode()
        self.writer.write(self.head + b"content-length: %d\r\n\r\n" % len(body) + body)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        if "content-length" in fields:
            data = await self.reader.readexactly(int(fields["content-length"]))
        else:  # chunked
            chunks = []
            while size := int((await self.reader.readuntil(b"\r\n")).strip(), 16):
                chunks.append(await self.reader.readexactly(size))
                await self.reader.readexactly(2)
            await self.reader.readexactly(2)
            data = b"".join(chunks)
        if fields.get("connection", "").lower() == "close":
            await self.close()
        return status, data

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def raw_ok(status: int, body: bytes) -> bool:
    if status != 200:
        return False
    for line in body.decode().splitlines():
        if line.startswith("data:"):
            message = json.loads(line[5:])
            return "result" in message and not message["result"].get("isError")
    return False


async def load(
    url: str, token: str, files: list[tuple[str, str]], clients: int, seconds: float, pids: list[int]
) -> dict[str, Any]:
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds
    memory = {pid: [rss_kib(pid)] for pid in pids}

    async def worker(index: int) -> None:
        nonlocal errors
        rng = random.Random(index)
        client = RawClient(url, token)
        n = index
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            try:
                good = raw_ok(*await client.post(call_body(rng, files, n)))
            except (OSError, asyncio.IncompleteReadError, ValueError):
                good = False
                await client.close()
            latencies.append(time.perf_counter() - start)
            errors += 0 if good else 1
            n += 1
        await client.close()

    connections: list[int] = []

    async def sampler() -> None:
        while time.perf_counter() < deadline:
            await asyncio.sleep(seconds / 6)
            for pid, samples in memory.items():
                samples.append(rss_kib(pid))
            if not connections:  # once every client has connected: which process holds how many
                connections.extend(connections_of(pids, urlsplit(url).port or 80))

    started = time.perf_counter()
    cpu_start = {pid: cpu_seconds(pid) for pid in pids}
    tree_start = tree_cpu(pids[0])
    own_start = time.process_time()
    await asyncio.gather(sampler(), *(worker(i) for i in range(clients)))
    elapsed = time.perf_counter() - started
    cpu_each = {pid: cpu_seconds(pid) - cpu_start[pid] for pid in pids}
    server_cpu = sum(cpu_each.values())
    client_cpu = time.process_time() - own_start
    # The rest of the server's tree (job workers, evaluator workers) while the calls ran: ~0 once settled.
    background_cpu = tree_cpu(pids[0]) - tree_start - server_cpu
    return {
        "web_processes": len(pids),
        "clients": clients,
        "seconds": round(elapsed, 1),
        "calls": len(latencies),
        "calls_per_s": round(len(latencies) / elapsed, 1),
        "errors": errors,
        **pct(latencies),
        "server_cpu_ms_per_call": round(server_cpu / max(len(latencies), 1) * 1000, 3),
        "load_generator_cpu_ms_per_call": round(client_cpu / max(len(latencies), 1) * 1000, 3),
        "background_cpu_s": round(max(background_cpu, 0.0), 2),
        # What the server alone could sustain on 2 cores if the load generator did not share them.
        "capacity_calls_per_s_2_cores": round(2 * len(latencies) / max(server_cpu, 1e-9), 1),
        # How the work spread over the processes (SO_REUSEPORT spreads connections, not calls).
        "server_cpu_share": [round(cpu / max(server_cpu, 1e-9), 3) for cpu in cpu_each.values()],
        "connections_per_process": connections,
        "load_average": os.getloadavg(),
        "rss_kib": list(memory.values()),
    }


def connections_of(pids: list[int], port: int) -> list[int]:
    """How many established connections to `port` each of `pids` holds (from /proc: the kernel's view)."""
    local = f"0100007F:{port:04X}"
    established = {
        fields[9]
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]
        if (fields := line.split())[1] == local and fields[3] == "01"
    }
    counts = []
    for pid in pids:
        held = set()
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):  # closed meanwhile
                held.add(os.readlink(fd).removeprefix("socket:[").removesuffix("]"))
        counts.append(len(held & established))
    return counts


def server_tree(pid: int) -> list[int]:
    """`pid` and every live descendant: the web replicas, the job worker children (where the first sync and the
    index builds run) and the evaluator's workers."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):  # exited meanwhile
                children.setdefault(int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]), []).append(
                    int(entry.name)
                )
    found, stack = [], [pid]
    while stack:
        found.append(current := stack.pop())
        stack.extend(children.get(current, []))
    return found


def tree_cpu(root: int) -> float:
    """CPU seconds of the server's process tree now (those that exited meanwhile are not counted)."""
    total = 0.0
    for pid in server_tree(root):
        with contextlib.suppress(OSError):
            total += cpu_seconds(pid)
    return total


def wait_idle(root: int, limit: float = 600.0, quiet: float = 3.0) -> None:
    """Wait until the whole server tree has used < 5 % of a core for `quiet` seconds in a row: the first sync and
    the indexing of the repositories run in the job worker children, not in the web processes, and a load phase
    beside them measured their CPU's absence as idle cores (~35 % of the machine in session 14's runs)."""
    deadline = time.monotonic() + limit
    calm = 0.0
    before = tree_cpu(root)
    while time.monotonic() < deadline and calm < quiet:
        time.sleep(1.0)
        now = tree_cpu(root)
        calm = calm + 1.0 if now - before < 0.05 else 0.0
        before = now
    if calm < quiet:
        print(f"warning: the server never went idle within {limit:.0f} s; figures include background work")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def web_replicas(pid: int) -> list[int]:
    """The web replica processes `serve --web-processes` started (children whose command line says so)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:  # exited meanwhile
            continue
        if parent == pid and b"--web-process-of" in cmdline.split(b"\0"):
            found.append(int(entry.name))
    return sorted(found)


@contextlib.contextmanager
def serving(data: Path, port: int, processes: int, log: Path) -> Iterator[list[int]]:
    """`codewell serve --web-processes processes` on `data`, started and idle; yields the web processes' pids."""
    env = {**os.environ, "CODEWELL_DATA_DIR": str(data), "CODEWELL_LOG_LEVEL": "warning"}
    with log.open("ab") as output:
        server = subprocess.Popen(
            [sys.executable, "-m", "codewell", "serve", "--port", str(port), "--web-processes", str(processes)],
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            preexec_fn=terminate_with_parent,  # noqa: PLW1509 (prctl only, see its docstring)
        )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert server.poll() is None, log.read_text()[-2000:]
            try:
                ready = httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
            except httpx2.HTTPError:
                ready = False
            if ready and len(web_replicas(server.pid)) == processes - 1:
                break
            time.sleep(0.1)
        pids = [server.pid, *web_replicas(server.pid)]
        wait_idle(server.pid)
        yield pids
    finally:
        server.terminate()
        assert server.wait(timeout=60) == 0, log.read_text()[-2000:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument(
        "--web-processes", type=int, default=2, help="`serve --web-processes` (default 2: one per core here)"
    )
    parser.add_argument("--compare", action="store_true", help="also the load phase with 1 web process, same run")
    parser.add_argument("--out", type=Path, default=RESULTS / "mcp_bench.json", help="where to write the JSON")
    parser.add_argument("--smoke", action="store_true", help="smallest run (2 s, 4 clients, few calls): it runs")
    args = parser.parse_args()
    if args.smoke:
        args.seconds, args.clients = 2.0, 4
    # The smoke run indexes 2 small repositories, not 20: its server must settle before it measures anything.
    repeat, calls, files_made, repos = (30, 20, 20, 2) if args.smoke else (400, 400, 200, 20)
    with tempfile.TemporaryDirectory(prefix="cw-mcp-bench-") as tmp:
        data = Path(tmp) / "data"
        port = free_port()
        token, files, runtime = prepare(data, port, files_made, repos)
        baselines = direct_baselines(runtime, files, repeat)
        runtime.close()
        log = Path(tmp) / "serve.log"
        url = f"http://127.0.0.1:{port}/.api/mcp"
        single: dict[str, Any] | None = None
        if args.compare and args.web_processes != 1:
            with serving(data, port, 1, log) as pids:
                single = asyncio.run(load(url, token, files, args.clients, args.seconds, pids))
        with serving(data, port, args.web_processes, log) as pids:
            seq = asyncio.run(sequential(url, token, files, calls, pids))
            loaded = asyncio.run(load(url, token, files, args.clients, args.seconds, pids))
    # What MCP adds over the service call and over what any authenticated request costs (same conditions).
    overhead = {
        tool: round(seq[tool]["p50_ms"] - seq["healthz"]["p50_ms"] - baselines["direct"][tool]["p50_ms"], 3)
        for tool in ("read_file", "list_repos")
    }
    transport = {
        tool: round(seq[tool]["p50_ms"] - baselines["handler"][tool]["p50_ms"], 3)
        for tool in ("read_file", "list_repos")
    }
    result = {
        **baselines,
        "sequential": seq,
        "mcp_overhead_p50_ms": overhead,
        "transport_p50_ms": transport,
        "load": loaded,
        "load_1_web_process": single,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    for tool in ("read_file", "list_repos"):
        d, h, s = baselines["direct"][tool]["p50_ms"], baselines["handler"][tool]["p50_ms"], seq[tool]["p50_ms"]
        p99 = seq[tool]["p99_ms"]
        print(
            f"{tool:10}  direct p50 {d:.3f} ms | handler {h:.3f} ms | over MCP {s:.3f} ms (p99 {p99:.3f})"
            f" | MCP overhead above auth floor + service {overhead[tool]:.3f} ms"
        )
    print(f"authenticated HTTP floor (GET /healthz, interleaved) p50 {seq['healthz']['p50_ms']:.3f} ms")
    cpu_mcp, cpu_floor = seq["server_cpu_ms_per_mcp_call"], seq["server_cpu_ms_per_healthz"]
    direct_mean = (baselines["direct"]["read_file"]["p50_ms"] + baselines["direct"]["list_repos"]["p50_ms"]) / 2
    print(
        f"server CPU per call (sequential): MCP {cpu_mcp:.3f} ms, GET /healthz {cpu_floor:.3f} ms, direct service "
        f"~{direct_mean:.3f} ms -> MCP layer CPU ~{cpu_mcp - cpu_floor - direct_mean:.3f} ms per call"
    )
    for figures in (single, loaded):
        if figures is not None:
            print_load(figures)


def print_load(figures: dict[str, Any]) -> None:
    rss = " | ".join(" ".join(str(kib // 1024) for kib in samples) for samples in figures["rss_kib"])
    print(
        f"load: {figures['web_processes']} web processes, {figures['clients']} clients: {figures['calls_per_s']} "
        f"calls/s, p50 {figures['p50_ms']} ms, p99 {figures['p99_ms']} ms, errors {figures['errors']}; server CPU "
        f"{figures['server_cpu_ms_per_call']} ms/call (all web processes, shares {figures['server_cpu_share']}, "
        f"connections {figures['connections_per_process']}), "
        f"load generator {figures['load_generator_cpu_ms_per_call']} ms CPU/call: "
        f"{figures['capacity_calls_per_s_2_cores']} calls/s if the server had both cores; "
        f"background CPU (job and evaluator workers) {figures['background_cpu_s']} s; "
        f"RSS MiB per process {rss}; load average {' '.join(f'{x:.1f}' for x in figures['load_average'])}"
    )


if __name__ == "__main__":
    main()
