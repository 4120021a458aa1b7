"""Soak: N MCP clients calling a random mix of tools for --seconds against a real `codewell serve`, with a kill -9
of one of its job worker processes in the middle (issue #33, "Done when").

Set-up: a few git repositories cut from the venv's packages (click, attrs, markupsafe) and the standard library's
json, two commits each, in a fresh data dir (SQLite) served by `codewell serve` with its default job worker child
processes (`--job-processes`: one per core). The repositories are synced and indexed (search shard, history,
codenav symbols, nls chunks) before the soak starts.

Load: --clients concurrent clients, each on its own HTTP/1.1 keep-alive connection (mcp_bench's RawClient) to
`/.api/mcp/all`, calling `tools/call` of a random tool with arguments that have real answers (symbols, paths,
commits and questions taken from the sources): keyword_search, read_file, list_files, list_repos, list_refs,
go_to_definition, find_references, nls_search, commit_search, diff_search, compare_revisions,
get_contributor_repos and the evaluator (each one the server lists). A warm-up (--warmup seconds) comes first.

Kill: in the middle of the soak a new commit (--push edit: a function added to three files; --push vendor: a
vendored copy of jinja2, which grows the corpus by about half) is pushed to the first repository and
its sync requested, so that its index jobs run in the worker children; the worker running one of them is sent
SIGKILL (any worker, if none is seen running a job in time). Then: is the worker replaced (the server starts
another), and is the killed job taken over (its lease expires) before the soak ends?

Recorded: every error with its time and tool (transport, HTTP status, JSON-RPC error, the result's isError).
Errors within --window seconds after the kill about the killed job's repository (or all repositories) are
"explained" by the kill; any other error is "unexplained". RSS of the server, of its serving children (search
pool) and of its job workers every --sample seconds.

Printed: calls, calls/s and p50/p99 per tool, errors (explained / unexplained), RSS at the start (after the
warm-up) / max / end, the kill and its aftermath, the process tree after SIGTERM; a JSON summary goes to --out.
Baseline, in the same run: an authenticated GET /healthz p50 sampled by one extra client during the soak (what
any request costs on this machine under this load). Exit status 1 when there are unexplained errors or the
serving RSS (server + its non-worker children) at the end exceeds --rss-limit (1.10) x its start.

    .venv/bin/python bench/soak_bench.py [--seconds 600] [--clients 16] [--repos 4] [--out FILE]
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import contextlib
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2

from benchkit import open_runtime
from codewell.accounts.service import AccountService
from codewell.accounts.tokens import TokenService
from codewell.core.actors import INTERNAL
from codewell.core.processes import terminate_with_parent
from codewell.repos.service import RepoService
from mcp_bench import RawClient, free_port

HERE = Path(__file__).parent
RESULTS = HERE / ".results"
SITE = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
STDLIB = Path(json.__file__).parent.parent
# name, the folders copied from (site-packages or the standard library), questions for nls_search
CORPUS: list[tuple[str, list[Path], list[str]]] = [
    (
        "soak/click",
        [SITE / "click"],
        ["how are command line options parsed", "where is the help text formatted", "how are prompts shown"],
    ),
    ("soak/json", [STDLIB / "json"], ["how are JSON strings decoded", "how does the encoder escape unicode"]),
    (
        "soak/attrs",
        [SITE / "attr", SITE / "attrs"],
        ["how are slotted classes created", "how are attribute validators run"],
    ),
    ("soak/markupsafe", [SITE / "markupsafe"], ["how is HTML escaped", "how are markup strings formatted"]),
]
VENDORED = SITE / "jinja2"  # the mid-soak commit: enough to keep the index jobs busy a while
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Soak Bench",
    "GIT_AUTHOR_EMAIL": "soak@example.com",
    "GIT_COMMITTER_NAME": "Soak Bench",
    "GIT_COMMITTER_EMAIL": "soak@example.com",
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
}
HEADERS = {"authorization": "", "accept": "application/json, text/event-stream"}
INDEX_KINDS = ("repos.sync", "search.index", "history.index", "codenav.symbols", "nls.chunks")
CALL_TIMEOUT = 120.0


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True, text=True)
    return done.stdout.strip()


@dataclass
class Source:
    """One repository as the bench knows it: its work tree, commits, files and defined symbols."""

    name: str
    path: Path
    questions: list[str]
    commits: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)
    # (path, symbol) of top-level functions and classes used more than once in the repository
    symbols: list[tuple[str, str]] = field(default_factory=list)
    repo_id: int = 0


def build_source(root: Path, name: str, folders: list[Path], questions: list[str]) -> Source:
    """A git repository of `folders`: a first commit with most files, a second one with the rest."""
    path = root / name.rsplit("/", maxsplit=1)[-1]
    for folder in folders:
        shutil.copytree(folder, path / folder.name, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyc"))
    files = sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())
    later = files[::7]
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A", "--", *[f for f in files if f not in later])
    git(path, "commit", "-q", "-m", f"import {name}")
    first = git(path, "rev-parse", "HEAD")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", f"complete {name}")
    source = Source(name, path, questions, [first, git(path, "rev-parse", "HEAD")], files)
    source.dirs = sorted({str(Path(f).parent) for f in files} - {"."})
    text = {f: (path / f).read_text(errors="replace") for f in files if f.endswith(".py")}
    words = Counter(w for body in text.values() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", body))
    for file, body in text.items():
        try:
            tree = ast.parse(body)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef) and len(node.name) > 3 and words[node.name] > 1:
                source.symbols.append((file, node.name))
    return source


def prepare(data: Path, sources: list[Source]) -> str:
    """The data dir: a site admin with a token, the repositories registered (not cloned: the server syncs them)."""
    runtime = open_runtime(data)
    try:
        user = runtime.get(AccountService).create_user(INTERNAL, "soak", site_admin=True)
        token, _ = runtime.get(TokenService).create_token(INTERNAL, user.id, "soak", ("user:all",))
        for source in sources:
            source.repo_id = runtime.get(RepoService).add_repo(INTERNAL, str(source.path), name=source.name).id
    finally:
        runtime.close()
    return token


# --- the process tree ----------------------------------------------------------------------------------------


def proc_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process."""
    table: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if state != "Z":  # a zombie is gone but for its exit status
            table[int(entry.name)] = (int(ppid), cmdline)
    return table


def descendants(root: int, table: dict[int, tuple[int, str]]) -> list[int]:
    found, frontier = [], [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, _cmd) in table.items():
            if ppid == parent:
                found.append(pid)
                frontier.append(pid)
    return found


def workers_of(server: int, table: dict[int, tuple[int, str]]) -> list[int]:
    """The server's `codewell worker` children."""
    return sorted(pid for pid, (ppid, cmd) in table.items() if ppid == server and " worker " in f" {cmd} ")


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    """A process's resident memory (KiB): `VmRSS` in all, `RssAnon` (heap: Python objects, C libraries'
    allocations) or `RssFile` (pages of mapped files it has touched: shards, symbol and nls indexes, libraries;
    the kernel takes them back under pressure)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def memory(server: int) -> dict[str, Any]:
    """RSS (KiB) of the server alone, of its serving side (server + every child outside the job workers'
    subtrees: the search pool and its helpers) and of the job workers (with their own children)."""
    table = proc_table()
    workers = workers_of(server, table)
    worker_tree = set(workers)
    for pid in workers:
        worker_tree.update(descendants(pid, table))
    serving = [server, *(p for p in descendants(server, table) if p not in worker_tree)]
    return {
        "server": rss_kib(server),
        "server_anon": rss_kib(server, "RssAnon"),
        "server_file": rss_kib(server, "RssFile"),
        "serving": sum(rss_kib(p) for p in serving),
        "serving_anon": sum(rss_kib(p, "RssAnon") for p in serving),
        "workers": sum(rss_kib(p) for p in worker_tree),
        "worker_pids": workers,
        "serving_processes": len(serving),
    }


# --- the jobs, as `codewell jobs list` shows them (the bench never opens the server's database itself) ----------


def jobs_list(data: Path, *options: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "codewell", "jobs", "list", "--json", "--limit", "1000", *options],
        env={**os.environ, "CODEWELL_DATA_DIR": str(data), "CODEWELL_LOG_LEVEL": "error"},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def index_work_left(data: Path) -> list[str]:
    """The index jobs running or queued (periodic jobs are not index jobs)."""
    jobs = jobs_list(data, "--state", "running") + jobs_list(data, "--state", "queued")
    return [f"{j['kind']} {j['resource']} {j['state']}" for j in jobs if j["kind"] in INDEX_KINDS]


def owner_pid(job: dict[str, Any]) -> int:
    """The process holding a job's lease (owners are host:pid:role:suffix)."""
    parts = (job.get("lease_owner") or "").split(":")
    return int(parts[1]) if len(parts) >= 3 and parts[1].isdigit() else 0


def cpu_ticks(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])


# --- the calls -----------------------------------------------------------------------------------------------


class Mix:
    """Tool calls with real answers, drawn at random from the sources."""

    def __init__(self, sources: list[Source], tools: set[str]) -> None:
        self.sources = sources
        self.makers = {name: maker for name, maker in self._makers().items() if name in tools}

    def _makers(self) -> dict[str, Any]:
        return {
            "keyword_search": self.keyword_search,
            "read_file": self.read_file,
            "list_files": self.list_files,
            "list_repos": lambda rng: ({"query": rng.choice(["soak", "click", "json", ""])}, None),
            "list_refs": lambda rng: ({"repo": (s := rng.choice(self.sources)).name}, s.name),
            "go_to_definition": self.go_to_definition,
            "find_references": self.find_references,
            "nls_search": self.nls_search,
            "commit_search": self.commit_search,
            "diff_search": self.diff_search,
            "compare_revisions": self.compare_revisions,
            "get_contributor_repos": lambda rng: ({"authors": ["soak@example.com"]}, None),
            "evaluator": self.evaluator,
        }

    def draw(self, rng: random.Random) -> tuple[str, dict[str, Any], str | None]:
        """(tool, arguments, the repository it is about or None for all)."""
        tool = rng.choice(sorted(self.makers))
        args, repo = self.makers[tool](rng)
        return tool, args, repo

    def _symbol(self, rng: random.Random) -> tuple[Source, str, str]:
        source = rng.choice([s for s in self.sources if s.symbols])
        path, symbol = rng.choice(source.symbols)
        return source, path, symbol

    def keyword_search(self, rng: random.Random) -> tuple[dict[str, Any], str | None]:
        source, _path, symbol = self._symbol(rng)
        if rng.random() < 0.5:
            return {"query": f"repo:^{re.escape(source.name)}$ {symbol}"}, source.name
        return {"query": f"{symbol} count:20"}, None

    def read_file(self, rng: random.Random) -> tuple[dict[str, Any], str | None]:
        source = rng.choice(self.sources)
        return {"repo": source.name, "path": rng.choice(source.files)}, source.name

    def list_files(self, rng: random.Random) -> tuple[dict[str, Any], str | None]:
        source = rng.choice(self.sources)
        args: dict[str, Any] = {"repo": source.name}
        if source.dirs and rng.random() < 0.5:
            args["path"] = rng.choice(source.dirs)
        return args, source.name

    def go_to_definition(self, rng: random.Random) -> tuple[dict[str, Any], str | None]:
        source, path, symbol = self._symbol(rng)
        return {"repo": source.name, "path": path, "symbol": symbol}, source.name

    def find_references(self, rng: random.Random) -> tuple[dict[str, Any], str | None]:
        source, path, symbol = self._symbol(rng)
        return {"repo": source.name, "path": path, "symbol": symbol, "limit": 20}, source.name

    def nls_search(self, rng: random.Random) -> tuple[dict[str, Any], str | None]:
        source = rng.choice(self.sources)
        if rng.random() < 0.5:
            return {"query": f"repo:{source.name} {rng.choice(source.questions)}"}, source.name
        return {"query": rng.choice(source.questions)}, None

    def commit_search(self, rng: random.Random) -> tuple[dict[str, Any], str | None]:
        source = rng.choice(self.sources)
        return {"repos": [source.name], "messageTerms": [rng.choice(["import", "complete"])]}, source.name

    def diff_search(self, rng: random.Random) -> tuple[dict[str, Any], str | None]:
        source, _path, symbol = self._symbol(rng)
        return {"repos": [source.name], "pattern": symbol, "count": 5}, source.name

    def compare_revisions(self, rng: random.Random) -> tuple[dict[str, Any], str | None]:
        source = rng.choice(self.sources)
        return {"repo": source.name, "base": source.commits[0], "head": source.commits[1]}, source.name

    def evaluator(self, rng: random.Random) -> tuple[dict[str, Any], str | None]:
        source, _path, symbol = self._symbol(rng)
        script = f"local files = search('repo:^{re.escape(source.name)}$ {symbol} count:20') return #files"
        return {"script": script}, source.name


@dataclass
class Call:
    at: float  # seconds since the soak's start (negative: warm-up)
    tool: str
    repo: str | None
    seconds: float
    error: str | None  # None when the call succeeded


def classify(status: int, body: bytes) -> str | None:
    """None for a good answer, else what went wrong: HTTP status, JSON-RPC error or the result's isError."""
    if status != 200:
        return f"http {status}: {body[:200].decode(errors='replace')}"
    for line in body.decode(errors="replace").splitlines():
        if line.startswith("data:"):
            message = json.loads(line[5:])
            if "error" in message:
                return f"jsonrpc {message['error'].get('code')}: {str(message['error'].get('message'))[:200]}"
            result = message.get("result") or {}
            if result.get("isError"):
                text = " ".join(c.get("text", "") for c in result.get("content", []))
                return f"isError: {text[:300]}"
            return None
    return f"no JSON-RPC message in the answer: {body[:200].decode(errors='replace')}"


async def call_once(client: RawClient, n: int, tool: str, args: dict[str, Any]) -> str | None:
    body = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": tool, "arguments": args}}
    try:
        return classify(*await asyncio.wait_for(client.post(body), CALL_TIMEOUT))
    except (OSError, asyncio.IncompleteReadError, ValueError, TimeoutError) as exc:
        await client.close()
        return f"transport {type(exc).__name__}: {exc}"[:300]


def list_tools(url: str, token: str) -> set[str]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {**HEADERS, "authorization": f"token {token}", "content-type": "application/json"}
    response = httpx2.post(url, json=body, headers=headers, timeout=60)
    response.raise_for_status()
    for line in response.text.splitlines():
        if line.startswith("data:"):
            return {tool["name"] for tool in json.loads(line[5:])["result"]["tools"]}
    raise RuntimeError(f"tools/list answered no tools: {response.text[:300]}")


# --- the server ----------------------------------------------------------------------------------------------


# `--tracemalloc SECONDS`: a daemon thread in the server starts tracemalloc when the bench says the warm-up is over
# (a file `<out>.go` appears; tracing start-up and indexing too made them take many minutes), takes its first
# snapshot SECONDS later, and then every SECONDS writes what grew since that first snapshot (by line, top 40) to a
# file. What is traced is what was allocated after
# tracing began: what grows during the soak. tracemalloc costs the server CPU and memory of its own: an opt-in
# diagnosis of what grows, not a soak figure.
_TRACED_SERVE = """
import os, runpy, sys, threading, time, tracemalloc
out, every = sys.argv[1], float(sys.argv[2])
sys.argv = ["codewell", *sys.argv[3:]]

def dump():
    while not os.path.exists(out + ".go"):
        time.sleep(1.0)
    tracemalloc.start(4)
    started = time.monotonic()
    time.sleep(every)
    ignored = (tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen importlib.*"))
    first = tracemalloc.take_snapshot().filter_traces(ignored)
    while True:
        time.sleep(every)
        snapshot = tracemalloc.take_snapshot().filter_traces(ignored)
        traced, peak = tracemalloc.get_traced_memory()
        with open(out, "a") as f:
            f.write(f"== {time.monotonic() - started:.0f} s traced: {traced >> 20} MiB (peak {peak >> 20} MiB)\\n")
            for stat in snapshot.compare_to(first, "lineno")[:40]:
                f.write(f"{stat}\\n")
            f.write("-- by traceback, top 5\\n")
            for stat in snapshot.compare_to(first, "traceback")[:5]:
                f.write(f"{stat}\\n" + "".join(f"    {line}\\n" for line in stat.traceback.format()))

threading.Thread(target=dump, daemon=True, name="tracemalloc-dump").start()
runpy.run_module("codewell", run_name="__main__", alter_sys=True)
"""


class Server:
    def __init__(self, tmp: Path, data: Path, token: str, tracemalloc_every: float = 0.0) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.token = token
        self.data = data
        env = {**os.environ, "CODEWELL_DATA_DIR": str(data), "CODEWELL_LOG_LEVEL": "warning"}
        self.log_path = tmp / "serve.log"
        self.log = self.log_path.open("wb")
        self.tracemalloc_path = RESULTS / "soak_tracemalloc.txt"
        launcher = [sys.executable, "-m", "codewell"]
        if tracemalloc_every > 0:
            RESULTS.mkdir(exist_ok=True)
            self.tracemalloc_path.write_text("")
            Path(f"{self.tracemalloc_path}.go").unlink(missing_ok=True)
            launcher = [sys.executable, "-c", _TRACED_SERVE, str(self.tracemalloc_path), str(tracemalloc_every)]
        self.process = subprocess.Popen(
            [*launcher, "serve", "--port", str(self.port)],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            preexec_fn=terminate_with_parent,  # noqa: PLW1509 (prctl only, see its docstring)
        )
        self.http = httpx2.Client(base_url=self.base, headers={"authorization": f"token {token}"}, timeout=120)

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_healthy(self, limit: float = 180.0) -> None:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited with {self.process.returncode}: {self.tail()}")
            try:
                if self.http.get("/healthz", timeout=2).status_code == 200:
                    return
            except httpx2.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the server did not answer /healthz in {limit} s: {self.tail()}")

    def request_sync(self, name: str) -> None:
        response = self.http.post(f"/.api/repos/{name}/-/sync", params={"wait": "false"})
        if response.status_code != 202:
            raise RuntimeError(f"sync of {name}: {response.status_code} {response.text[:300]}")

    def wait_indexed(self, names: list[str], limit: float) -> float:
        """Until every repository is indexed and no index job is left (codenav, nls, history included)."""
        started = time.monotonic()
        quiet = 0
        while time.monotonic() - started < limit:
            statuses = self.http.get("/.api/search/status").json()["repositories"]
            states = {s["repository"]: s["state"] for s in statuses}
            failed = [n for n in names if states.get(n) == "failed"]
            if failed:
                raise RuntimeError(f"indexing failed: {failed}: {statuses}")
            # `codewell jobs list` costs a process start: asked only once the shards are there.
            left = index_work_left(self.data) if all(states.get(n) == "indexed" for n in names) else ["shards"]
            done = not left
            quiet = quiet + 1 if done else 0
            if int(time.monotonic() - started) % 15 == 0:
                print(f"  indexing: {time.monotonic() - started:4.0f} s {states}; jobs left: {left}", flush=True)
            if quiet >= 2:
                return time.monotonic() - started
            time.sleep(2.0)
        raise RuntimeError(f"not indexed after {limit} s: {states}")

    def healthz(self) -> float:
        started = time.perf_counter()
        self.http.get("/healthz").raise_for_status()
        return time.perf_counter() - started

    def stop(self, limit: float = 60.0) -> dict[str, Any]:
        """SIGTERM, then what is left of the process tree."""
        tree = descendants(self.pid, proc_table())
        self.process.send_signal(signal.SIGTERM)
        started = time.monotonic()
        try:
            code: int | None = self.process.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            code = None
            self.process.kill()
            self.process.wait(10)
        seconds = time.monotonic() - started
        time.sleep(1.0)
        table = proc_table()
        left = [pid for pid in tree if pid in table]
        for pid in left:  # the bench leaves nothing behind, and says what it had to end
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.http.close()
        self.log.close()
        return {"exit_code": code, "seconds": round(seconds, 1), "left_running": [table[p][1][:120] for p in left]}

    def tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]


# --- the soak ------------------------------------------------------------------------------------------------


@dataclass
class Kill:
    """What the kill did and what followed."""

    at: float = 0.0  # soak time of the SIGKILL
    pid: int = 0
    job: dict[str, Any] | None = None
    workers_before: list[int] = field(default_factory=list)
    replaced_by: int | None = None
    replaced_after_s: float | None = None
    job_after: dict[str, Any] = field(default_factory=dict)
    job_done_after_s: float | None = None
    triggered_at: float = 0.0
    commit: str = ""
    log: list[str] = field(default_factory=list)


def push_commit(source: Source, push: str = "edit") -> str:
    """A new commit on the source. `edit` (the default): an ordinary change, a function added to three of its
    Python files, whose sync and index jobs the workers run. `vendor`: a vendored copy of jinja2 beside its files,
    whose index jobs take longer, but which grows the soak's corpus by about half mid-run, so that the RSS
    comparison then measures the new content as much as the server."""
    if push == "vendor":
        shutil.copytree(VENDORED, source.path / "vendor" / VENDORED.name, ignore=shutil.ignore_patterns("__pycache__"))
    else:
        for k, path in enumerate(sorted(source.path.rglob("*.py"))[:3]):
            with path.open("a") as out:
                out.write(
                    f'\n\ndef soak_added_{k}(value):\n    """Added by the soak\'s mid-run commit."""\n'
                    f"    return value + {k}\n"
                )
    git(source.path, "add", "-A")
    git(source.path, "commit", "-q", "-m", f"soak: mid-run commit ({push})")
    return git(source.path, "rev-parse", "HEAD")


def do_kill(
    server: Server, source: Source, kill: Kill, clock: Any, stop: threading.Event, lead: float, push: str = "edit"
) -> None:
    """In a thread: push a commit, request its sync, SIGKILL the worker child that runs one of its jobs (or any
    worker after `lead` seconds), then watch for the worker's replacement and the job's recovery until `stop`."""
    kill.triggered_at = clock()
    kill.commit = push_commit(source, push)
    server.request_sync(source.name)
    # The worker that starts working (CPU time rising) on what the sync caused gets the SIGKILL.
    deadline = time.monotonic() + lead
    workers = workers_of(server.pid, proc_table())
    kill.workers_before = workers
    if not workers:
        kill.log.append("no worker child to kill")
        return
    before = {pid: cpu_ticks(pid) for pid in workers}
    victim = 0
    while not victim and time.monotonic() < deadline and not stop.is_set():
        time.sleep(0.2)
        now = {pid: cpu_ticks(pid) for pid in workers}
        busy = sorted((now[pid] - before[pid], pid) for pid in workers if now[pid] - before[pid] >= 5)
        victim = busy[-1][1] if busy else 0
        before = now
    if not victim:
        victim = workers[0]
        kill.log.append(f"no worker seen busy within {lead} s of the sync request: killing an idle one")
    kill.pid = victim
    os.kill(victim, signal.SIGKILL)
    kill.at = clock()
    # Its lease stays with the dead process: the job it was running is the one leased to its pid.
    held = [j for j in jobs_list(server.data, "--state", "running") if owner_pid(j) == victim]
    kill.job = held[0] if held else None
    if len(held) > 1:
        kill.log.append(f"the killed worker held {len(held)} jobs: {[(j['id'], j['kind']) for j in held]}")
    # The replacement: a new `codewell worker` child of the server.
    while not stop.is_set() and kill.replaced_by is None:
        fresh = [p for p in workers_of(server.pid, proc_table()) if p not in workers]
        if fresh:
            kill.replaced_by, kill.replaced_after_s = fresh[0], round(clock() - kill.at, 1)
        else:
            time.sleep(0.25)
    # The killed job: taken over by another process once its lease runs out, or not.
    while kill.job is not None:
        found = [j for j in jobs_list(server.data, "--resource", kill.job["resource"]) if j["id"] == kill.job["id"]]
        kill.job_after = found[0] if found else {"state": "gone"}
        if kill.job_after["state"] in ("succeeded", "failed", "cancelled", "gone"):
            kill.job_done_after_s = round(clock() - kill.at, 1)
            break
        if stop.wait(5.0):
            break


async def soak(server: Server, mix: Mix, sources: list[Source], args: argparse.Namespace) -> dict[str, Any]:
    url = f"{server.base}/.api/mcp/all"
    t0 = time.perf_counter() + args.warmup  # soak time 0 = the end of the warm-up
    end = t0 + args.seconds

    def clock() -> float:
        return time.perf_counter() - t0

    calls: list[Call] = []
    samples: list[dict[str, Any]] = []
    healthz: list[float] = []
    kill = Kill()
    stop = threading.Event()

    async def client(index: int) -> None:
        rng = random.Random(index)
        raw = RawClient(url, server.token)
        n = 0
        while time.perf_counter() < end:
            tool, arguments, repo = mix.draw(rng)
            started = time.perf_counter()
            error = await call_once(raw, n, tool, arguments)
            calls.append(Call(started - t0, tool, repo, time.perf_counter() - started, error))
            if error is not None and len([c for c in calls if c.error]) <= 20:
                print(f"  error at {started - t0:7.1f} s {tool} {json.dumps(arguments)[:120]}: {error[:200]}")
            n += 1
        await raw.close()

    async def sampler() -> None:
        while time.perf_counter() < end:
            sample = await asyncio.to_thread(memory, server.pid)
            samples.append({"t": round(clock(), 1), **sample})
            await asyncio.sleep(args.sample)
        samples.append({"t": round(clock(), 1), **await asyncio.to_thread(memory, server.pid)})

    async def floor() -> None:
        while time.perf_counter() < end:
            if clock() >= 0:
                try:
                    healthz.append(await asyncio.to_thread(server.healthz))
                except httpx2.HTTPError as exc:
                    print(f"  GET /healthz at {clock():.1f} s failed: {exc}")
            await asyncio.sleep(1.0)

    async def killer() -> None:
        # The commit goes in so that its jobs run in the middle of the soak.
        await asyncio.sleep(max(0.0, t0 + args.seconds * args.kill_at - time.perf_counter()))
        lead = max(5.0, args.seconds * 0.2)
        await asyncio.to_thread(do_kill, server, sources[0], kill, clock, stop, lead, args.push)

    async def tracer() -> None:
        if args.tracemalloc > 0:  # the server's tracemalloc thread starts tracing at the end of the warm-up
            await asyncio.sleep(max(0.0, t0 - time.perf_counter()))
            Path(f"{server.tracemalloc_path}.go").touch()

    async def stopper() -> None:
        await asyncio.sleep(max(0.0, end - time.perf_counter()))
        stop.set()

    await asyncio.gather(stopper(), tracer(), sampler(), floor(), killer(), *(client(i) for i in range(args.clients)))
    return {"calls": calls, "samples": samples, "healthz": healthz, "kill": kill}


async def warm_until_settled(server: Server, mix: Mix, args: argparse.Namespace) -> dict[str, Any]:
    """The soak's clients and mix, run until the serving RSS settles: no sample of the last --settle-window
    seconds above its first by more than --settle (a share), after at least --settle-window seconds and at most
    --warmup-max. The server's caches (search shards and symbol tables mapped and opened, highlighted files,
    compiled queries) fill during the first minutes of calls; the soak's start sample comes after them, so that
    its end-over-start ratio speaks of what grows with time, not of what a first use of every tool loads."""
    url = f"{server.base}/.api/mcp/all"
    started = time.perf_counter()
    done = asyncio.Event()
    samples: list[tuple[float, int]] = []
    counts = Counter[str]()

    async def client(index: int) -> None:
        rng = random.Random(10_000 + index)
        raw = RawClient(url, server.token)
        n = 0
        while not done.is_set():
            tool, arguments, _ = mix.draw(rng)
            error = await call_once(raw, n, tool, arguments)
            counts["calls"] += 1
            counts["errors"] += error is not None
            n += 1
        await raw.close()

    async def watcher() -> tuple[float, bool]:
        while True:
            await asyncio.sleep(args.sample)
            now = time.perf_counter() - started
            samples.append((now, (await asyncio.to_thread(memory, server.pid))["serving"]))
            window = [rss for at, rss in samples if at >= now - args.settle_window]
            settled = now >= args.settle_window and max(window) <= window[0] * (1 + args.settle)
            if settled or now >= args.warmup_max:
                done.set()
                return round(now, 1), settled

    (seconds, settled), *_ = await asyncio.gather(watcher(), *(client(i) for i in range(args.clients)))
    return {
        "seconds": seconds,
        "settled": settled,
        "calls": counts["calls"],
        "errors": counts["errors"],
        "serving_first_kib": samples[0][1] if samples else 0,
        "serving_last_kib": samples[-1][1] if samples else 0,
    }


def settle(server: Server, mix: Mix, args: argparse.Namespace) -> dict[str, Any] | None:
    """`warm_until_settled` unless --settle is 0, and what it found, printed."""
    if args.settle <= 0:
        return None
    settling = asyncio.run(warm_until_settled(server, mix, args))
    print(
        f"caches warm: serving RSS {'settled' if settling['settled'] else 'NOT settled'} after "
        f"{settling['seconds']:.0f} s of calls ({settling['calls']} calls, {settling['errors']} errors): "
        f"{settling['serving_first_kib'] // 1024} -> {settling['serving_last_kib'] // 1024} MiB"
    )
    return settling


def pct(values: list[float]) -> dict[str, float]:
    ordered = sorted(values) or [0.0]
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 1),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 1),
    }


def explained(call: Call, kill: Kill, window: float) -> bool:
    """An error the kill explains: within `window` seconds after it, about the killed job's repository (or
    about every repository)."""
    if call.error is None or not kill.at or not kill.at <= call.at + call.seconds <= kill.at + window:
        return False
    return kill.job is not None and (call.repo is None or call.repo == kill.job.get("repo_name"))


def summarize(run: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    calls: list[Call] = [c for c in run["calls"] if c.at >= 0]
    warm = len(run["calls"]) - len(calls)
    kill: Kill = run["kill"]
    per_tool: dict[str, Any] = {}
    for tool in sorted({c.tool for c in calls}):
        mine = [c for c in calls if c.tool == tool]
        per_tool[tool] = {
            "calls": len(mine),
            "calls_per_s": round(len(mine) / args.seconds, 2),
            **pct([c.seconds for c in mine]),
            "errors": sum(1 for c in mine if c.error),
        }
    errors = [c for c in calls if c.error]
    warm_errors = [c for c in run["calls"] if c.at < 0 and c.error]
    by_kill = [c for c in errors if explained(c, kill, args.window)]
    others = [c for c in [*warm_errors, *errors] if c not in by_kill]
    samples = run["samples"]
    measured = [s for s in samples if s["t"] >= 0] or samples
    serving = [s["serving"] for s in measured]
    return {
        "clients": args.clients,
        "seconds": args.seconds,
        "warmup_seconds": args.warmup,
        "warmup_calls": warm,
        "calls": len(calls),
        "calls_per_s": round(len(calls) / args.seconds, 1),
        **pct([c.seconds for c in calls]),
        "healthz_baseline": {"n": len(run["healthz"]), **pct(run["healthz"])},
        "tools": per_tool,
        "errors": {
            "total": len(errors) + len(warm_errors),
            "explained_by_kill": len(by_kill),
            "unexplained": len(others),
            "kinds": dict(Counter(c.error.split(":")[0] for c in [*warm_errors, *errors] if c.error)),
            "list": [
                {"t": round(c.at, 2), "tool": c.tool, "repo": c.repo, "explained": c in by_kill, "error": c.error}
                for c in [*warm_errors, *errors]
            ][:500],
        },
        "rss_kib": {
            "serving_start": serving[0],
            "serving_max": max(serving),
            "serving_end": serving[-1],
            "serving_end_over_start": round(serving[-1] / max(serving[0], 1), 3),
            "server_start": measured[0]["server"],
            "server_max": max(s["server"] for s in measured),
            "server_end": measured[-1]["server"],
            "server_anon_start": measured[0]["server_anon"],
            "server_anon_end": measured[-1]["server_anon"],
            "server_file_start": measured[0]["server_file"],
            "server_file_end": measured[-1]["server_file"],
            "serving_anon_start": measured[0]["serving_anon"],
            "serving_anon_end": measured[-1]["serving_anon"],
            "workers_start": measured[0]["workers"],
            "workers_max": max(s["workers"] for s in measured),
            "workers_end": measured[-1]["workers"],
            "samples": [
                {k: s[k] for k in ("t", "server", "server_anon", "server_file", "serving", "workers", "worker_pids")}
                for s in samples
            ],
        },
        "kill": {
            "triggered_at_s": round(kill.triggered_at, 1),
            "at_s": round(kill.at, 1),
            "pid": kill.pid,
            "workers_before": kill.workers_before,
            "job": kill.job,
            "replaced_by": kill.replaced_by,
            "replaced_after_s": kill.replaced_after_s,
            "job_after": kill.job_after,
            "job_done_after_s": kill.job_done_after_s,
            "window_s": args.window,
            "notes": kill.log,
        },
    }


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=600.0, help="length of the soak after the warm-up")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--repos", type=int, default=len(CORPUS), choices=range(1, len(CORPUS) + 1))
    parser.add_argument(
        "--settle",
        type=float,
        default=0.02,
        help="before the soak, call the tools until the serving RSS grew at most this share over --settle-window "
        "seconds (caches warm); 0: no such phase",
    )
    parser.add_argument("--settle-window", type=float, default=90.0, help="seconds the RSS must hold still")
    parser.add_argument("--warmup-max", type=float, default=600.0, help="seconds the settling may take at most")
    parser.add_argument(
        "--warmup", type=float, default=30.0, help="seconds of load (after settling) before the RSS start sample"
    )
    parser.add_argument(
        "--kill-at", type=float, default=0.5, help="when the kill's commit goes in (share of --seconds)"
    )
    parser.add_argument(
        "--push",
        choices=("edit", "vendor"),
        default="edit",
        help="the kill's commit: three files edited, or a vendored jinja2 (grows the corpus by about half)",
    )
    parser.add_argument("--window", type=float, default=30.0, help="seconds after the kill its errors are explained")
    parser.add_argument("--sample", type=float, default=5.0, help="seconds between RSS samples")
    parser.add_argument("--index-limit", type=float, default=900.0, help="seconds allowed for the first indexing")
    parser.add_argument(
        "--rss-limit", type=float, default=1.10, help="fail when the serving RSS ends above this x its start"
    )
    parser.add_argument("--tools", default="", help="comma-separated tools to call (default: every one listed)")
    parser.add_argument("--out", type=Path, default=RESULTS / "soak_bench.json", help="where to write the JSON")
    parser.add_argument(
        "--tracemalloc",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="run the server under tracemalloc and write what grew to bench/.results/soak_tracemalloc.txt every "
        "SECONDS (a diagnosis: it slows the server)",
    )
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    started = time.monotonic()
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="cw-soak-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "src").mkdir()
        sources = [build_source(tmp / "src", name, folders, qs) for name, folders, qs in CORPUS[: args.repos]]
        data = tmp / "data"
        token = prepare(data, sources)
        server = Server(tmp, data, token, args.tracemalloc)
        try:
            server.wait_healthy()
            for source in sources:
                server.request_sync(source.name)
            indexed_s = server.wait_indexed([s.name for s in sources], args.index_limit)
            tools = list_tools(f"{server.base}/.api/mcp/all", token)
            if args.tools:
                tools &= set(args.tools.split(","))
            mix = Mix(sources, tools)
            print(
                f"{len(sources)} repositories ({sum(len(s.files) for s in sources)} files) indexed in "
                f"{indexed_s:.0f} s; {len(memory(server.pid)['worker_pids'])} job worker processes; tools in the "
                f"mix: {', '.join(sorted(mix.makers))}; soak of {args.seconds:.0f} s with {args.clients} clients "
                f"after {args.warmup:.0f} s of warm-up (load average {load_start[0]:.1f})"
            )
            settling = settle(server, mix, args)
            run = asyncio.run(soak(server, mix, sources, args))
            if run["kill"].job is not None:
                run["kill"].job["repo_name"] = sources[0].name
            summary = summarize(run, args)
            summary["settling"] = settling
        except BaseException:
            print(f"the server's log ends with:\n{server.tail()}")
            raise
        finally:
            stopped = server.stop()
            log_tail = server.tail()
            args.out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(server.log_path, args.out.with_suffix(".serve.log"))
    summary["repositories"] = {s.name: {"files": len(s.files), "symbols": len(s.symbols)} for s in sources}
    summary["stop"] = stopped
    summary["load_average"] = {"start": round(load_start[0], 2), "end": round(os.getloadavg()[0], 2)}
    summary["wall_s"] = round(time.monotonic() - started, 1)
    rss = summary["rss_kib"]
    summary["fail"] = {
        "unexplained_errors": summary["errors"]["unexplained"] > 0,
        "rss_grew_over_limit": rss["serving_end"] > args.rss_limit * rss["serving_start"],
    }
    if any(summary["fail"].values()):
        summary["server_log_tail"] = log_tail
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2, default=str))
    report(summary)
    print(f"wrote {args.out}")
    if any(summary["fail"].values()):
        sys.exit(1)


def report(s: dict[str, Any]) -> None:
    mib = 1024
    print(
        f"soak: {s['clients']} clients, {s['seconds']:.0f} s: {s['calls']} calls, {s['calls_per_s']} calls/s, "
        f"p50 {s['p50_ms']} ms, p99 {s['p99_ms']} ms (baseline GET /healthz p50 {s['healthz_baseline']['p50_ms']} "
        f"ms, p99 {s['healthz_baseline']['p99_ms']} ms)"
    )
    for tool, t in s["tools"].items():
        print(
            f"  {tool:22} {t['calls']:7} calls {t['calls_per_s']:7.2f}/s  p50 {t['p50_ms']:8.1f} ms  "
            f"p99 {t['p99_ms']:8.1f} ms  errors {t['errors']}"
        )
    e = s["errors"]
    print(
        f"errors: {e['total']} ({e['explained_by_kill']} explained by the kill, {e['unexplained']} unexplained) "
        f"{e['kinds']}"
    )
    r = s["rss_kib"]
    print(
        f"RSS serving (server + search pool): start {r['serving_start'] // mib} MiB, max {r['serving_max'] // mib} "
        f"MiB, end {r['serving_end'] // mib} MiB (x{r['serving_end_over_start']}); server alone "
        f"{r['server_start'] // mib}/{r['server_max'] // mib}/{r['server_end'] // mib} MiB; job workers "
        f"{r['workers_start'] // mib}/{r['workers_max'] // mib}/{r['workers_end'] // mib} MiB; server heap (RssAnon) "
        f"{r['server_anon_start'] // mib} -> {r['server_anon_end'] // mib} MiB, mapped files (RssFile) "
        f"{r['server_file_start'] // mib} -> {r['server_file_end'] // mib} MiB; serving heap "
        f"{r['serving_anon_start'] // mib} -> {r['serving_anon_end'] // mib} MiB"
    )
    k = s["kill"]
    job = k["job"]
    what = f"job {job['id']} {job['kind']} {job['resource']}" if job else "no job"
    replaced = f"yes, by {k['replaced_by']} after {k['replaced_after_s']} s" if k["replaced_by"] else "NO"
    print(
        f"kill: commit at {k['triggered_at_s']} s, SIGKILL of worker {k['pid']} at {k['at_s']} s running {what}; "
        f"replaced: {replaced}"
    )
    if job:
        after = k["job_after"]
        done = (
            f"finished ({after.get('state')}) {k['job_done_after_s']} s after the kill"
            if k["job_done_after_s"]
            else (
                f"still {after.get('state')} at the end (lease until {after.get('lease_until')}, "
                f"owner {after.get('lease_owner')})"
            )
        )
        print(f"  the killed job: {done}")
    for note in k["notes"]:
        print(f"  {note}")
    stop = s["stop"]
    print(
        f"SIGTERM: exit {stop['exit_code']} after {stop['seconds']} s; "
        f"left running: {stop['left_running'] or 'nothing'}"
    )
    print(f"load average: start {s['load_average']['start']}, end {s['load_average']['end']}")


if __name__ == "__main__":
    main()
