"""The whole cluster on loopback: PostgreSQL, 2 web replicas, 1 worker and 3 searcher replicas over 300 repositories,
against one `codewell serve` (SQLite) over the same repositories as the single-process truth.

- 50 queries of every kind (literals, regexes, filters, `type:symbol`, `count:all`, natural language) answer
  the same through either web replica as the single process does;
- a searcher killed with SIGKILL: the next answers are partial and name exactly the repositories it owned,
  then complete again once they have moved to the others; brought back with an empty disk, it rebuilds its
  share and serves nothing stale;
- a fourth searcher joins while queries run: no answer misses a result while repositories move;
- `codewell searcher drain` moves a replica's share away and says when it holds nothing;
- a private repository is seen only by the user granted it, through any web replica, right after another
  user's query; the internal credential opens no public route, and the internal API refuses anyone else.

It always runs on PostgreSQL (a cluster's database; 127.0.0.1:5432), in a database of its own.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from codewell.capabilities import wire
from codewell.config.schema import SiteConfig
from codewell.config.store import SiteConfigStore
from codewell.core.actors import INTERNAL
from codewell.core.settings import Settings
from codewell.jobs.placement import owner
from codewell.jobs.service import JobService
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from codewell.search.cluster import internal_token
from tests.factories import auth_headers, make_token, make_user
from tests.functional.jobs.test_processes import descendants, free_port
from tests.gitfixtures import make_repo

CODEWELL = [sys.executable, "-m", "codewell"]
POSTGRES = os.environ.get("CODEWELL_CLUSTER_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
REPOS = 300
PREFIX = "org"
MARKER = "cwmarker"
WORDS = [
    "alpha_router", "beta_cache", "gamma_queue", "delta_parser", "epsilon_codec", "zeta_token", "eta_session",
    "theta_buffer", "iota_socket", "kappa_schema", "lambda_worker", "mu_ledger", "nu_mirror", "xi_lexer",
    "omicron_shard", "pi_packet", "rho_scheduler", "sigma_vector", "tau_index", "upsilon_gate",
]  # fmt: skip
PROSE = ["refresh", "expired", "tokens", "retry", "backoff", "socket", "timeout", "cache", "eviction", "merge"]


def repo_name(i: int) -> str:
    return f"{PREFIX}/r{i:03d}"


def write_corpus(root: Path) -> None:
    """300 small repositories of Python, Go and Markdown, each with a few of the shared identifiers."""
    for i in range(REPOS):
        rng = random.Random(i)
        words = rng.sample(WORDS, 4)
        prose = rng.sample(PROSE, 4)
        python = "\n".join(
            [f'"""Module {i}: {" ".join(prose)}."""', "", f"class {words[0].title().replace('_', '')}:"]
            + [f"    def {w}(self, value):\n        return value + {k}  # {MARKER}\n" for k, w in enumerate(words)]
            + [f"def {words[1]}_helper(x):\n    return x * {i}\n"]
        )
        go = (
            f"package r{i}\n\n// {words[2]} handles {prose[0]} and {prose[1]}.\n"
            f"func {words[2].title()}() int {{\n\treturn {i}\n}}\n"
        )
        readme = f"# r{i:03d}\n\nThis repository {prose[2]}s {words[3]} with {prose[3]} ({MARKER}).\n"
        make_repo(root / f"r{i:03d}", {"src/module.py": python, "pkg/main.go": go, "README.md": readme})


QUERIES = [
    *(f"{w} count:all" for w in WORDS[:12]),
    *(f"{w}_helper count:all" for w in WORDS[12:16]),
    f"{MARKER} count:all",
    f"{MARKER} lang:go count:all",
    f"{MARKER} file:README count:all",
    "/def [a-z]+_(cache|queue)\\(/ count:all",
    "/return x \\* 1[0-9]$/ count:all",
    f"repo:^{PREFIX}/r00 {MARKER} count:all",
    f"repo:^{PREFIX}/r1[0-4] -file:\\.py$ {MARKER} count:all",
    f"-repo:^{PREFIX}/r[0-1] tau_index count:all",
    "case:yes AlphaRouter count:all",
    "type:symbol sigma_vector",
    "type:symbol kappa_schema_helper",
    "type:symbol lambda",
    "type:file module",
    "Gamma_queue count:all",
    "sym:beta_cache",
    "alpha_router or pi_packet count:all",
    "nothing_matches_this_word_xyz",
    "delta_parser",  # the default page (limit hit): same count, every line a real match
    "omicron_shard",
    "/class [A-Z][a-z]+Router/ count:all",
    "sigma_vector lang:python count:all",
    "zeta_token -file:README count:all",
    f"repo:{PREFIX}/r04 upsilon_gate count:all",
    "type:path module",
]
QUESTIONS = [
    "where are expired tokens refreshed",
    "retry with backoff after a socket timeout",
    "cache eviction",
    "how does the merge work",
    "alpha router",
    "sigma vector helper",
    f"repo:{PREFIX}/r007 session",
    "which module handles packets",
    "tau index",
    "rho scheduler worker queue",
    "parser codec",
    "buffer token",
]
assert len(QUERIES) + len(QUESTIONS) >= 50


@dataclass
class Cluster:
    tmp: Path
    env: dict[str, str]
    processes: dict[str, subprocess.Popen[str]] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)

    def start(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        with (self.tmp / f"{name}.log").open("a") as log:
            self.processes[name] = subprocess.Popen(
                [*CODEWELL, *args], env={**self.env, **(env or {})}, stdout=log, stderr=subprocess.STDOUT, text=True
            )

    def searcher(self, name: str, *, wipe: bool = False) -> None:
        data = self.tmp / name
        if wipe and data.exists():
            subprocess.run(["rm", "-rf", str(data)], check=True)
        port = self.ports.setdefault(name, free_port())
        self.start(
            name,
            ["searcher", "--port", str(port), "--name", name, "--advertise", f"http://127.0.0.1:{port}"],
            {"CODEWELL_DATA_DIR": str(data)},
        )

    def web(self, name: str) -> None:
        self.ports[name] = free_port()
        self.start(name, ["serve", "--no-jobs", "--no-migrate", "--port", str(self.ports[name])], {
            "CODEWELL_DATA_DIR": str(self.tmp / name)
        })  # fmt: skip

    def url(self, name: str, path: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}{path}"

    def log(self, name: str) -> str:
        path = self.tmp / f"{name}.log"
        return path.read_text() if path.exists() else ""

    def logs(self) -> str:
        return "\n".join(f"--- {name}\n{self.log(name)[-2500:]}" for name in self.processes)

    def wait_ready(self, name: str, path: str = "/readyz") -> None:
        # Seven interpreters import the app at once on two cores: at load 8-12 (tests beside it) a web replica took
        # over 120 s to listen, with nothing in its log yet.
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            assert self.processes[name].poll() is None, self.log(name)
            try:
                if httpx.get(self.url(name, path), timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"{name} did not become ready:\n{self.log(name)}")

    def kill(self, name: str) -> None:
        process = self.processes[name]
        process.send_signal(signal.SIGKILL)
        process.wait(10)

    def stop_all(self) -> dict[str, int]:
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        codes = {}
        for name, process in self.processes.items():
            try:
                codes[name] = process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                codes[name] = -9
        return codes


@pytest.fixture
def cluster_database() -> Iterator[str]:
    """A fresh database of its own on the PostgreSQL server, dropped after."""
    base = make_url(POSTGRES)
    name = f"{base.database}_cw_cluster_{uuid.uuid4().hex[:8]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@contextmanager
def running(cluster: Cluster) -> Iterator[Cluster]:
    try:
        yield cluster
    finally:
        for process in cluster.processes.values():
            if process.poll() is None:
                for child in descendants(process.pid):
                    with suppress(ProcessLookupError):
                        os.kill(child, signal.SIGKILL)
                process.kill()
                process.wait(10)


def register(config_path: Path, corpus: Path, private: Path) -> None:
    store = SiteConfigStore.open(config_path, create=False)
    config = store.current.model_dump(by_alias=True)
    config["repositories"] = [
        {"kind": "local", "path": str(corpus), "prefix": PREFIX, "private": False, "syncIntervalSeconds": 86400},
        {"kind": "local", "path": str(private), "prefix": "secret", "private": True, "syncIntervalSeconds": 86400},
    ]
    store.write(SiteConfig.model_validate(config))


def normalized(body: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in body.items() if key not in ("durationMs",)}


def first_difference(got: dict[str, Any], want: dict[str, Any]) -> str:
    """Where two answers part (the assertion's message: a diff of 300 files is unreadable)."""
    for key in sorted(set(got) | set(want)):
        if key != "files" and got.get(key) != want.get(key):
            return f"{key}: {got.get(key)!r} != {want.get(key)!r}"
    for k, (a, b) in enumerate(zip(got.get("files", []), want.get("files", []), strict=False)):
        if a != b:
            return f"file {k}: {a!r} != {b!r}"
    return f"{len(got.get('files', []))} files != {len(want.get('files', []))} files"


def wait_for(condition: Callable[[], bool], what: str, cluster: Cluster, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}\n{cluster.logs()}")


def idle(runtime: Runtime) -> bool:
    """No job of a repository is queued or running (periodic rows aside)."""
    with runtime.db.engine.connect() as connection:
        return not connection.execute(
            text("SELECT 1 FROM jobs WHERE state IN ('queued', 'running') AND resource LIKE 'repo:%' LIMIT 1")
        ).first()


# Seven processes building 300 repositories twice over (the cluster and the single process) on CI's two cores.
@pytest.mark.slow(minutes=10)
@pytest.mark.timeout(1200)
def test_the_cluster_answers_like_one_process_and_survives_its_replicas(tmp_path: Path, cluster_database: str) -> None:
    corpus, private = tmp_path / "corpus", tmp_path / "private"
    write_corpus(corpus)
    make_repo(private / "vault", {"notes.md": f"the {MARKER} of the vault: zeta_token rotation\n"})
    shared = tmp_path / "shared"

    # The single process: `codewell serve` on SQLite, its own data dir, every kind in its own threads.
    single_settings = Settings.from_env({}, data_dir=tmp_path / "single")
    single_rt = Runtime.open(single_settings, create_config=True)
    single_rt.db.upgrade()
    # The cluster's database, migrated once (`codewell db upgrade` in a deployment).
    settings = Settings.from_env({"CODEWELL_SHARED_DIR": str(shared), "CODEWELL_SEARCHERS": "database"},
                                 data_dir=tmp_path / "admin", database_url=cluster_database)  # fmt: skip
    rt = Runtime.open(settings, create_config=True)
    rt.db.upgrade()
    wire(rt)
    wire(single_rt)
    env = {
        **os.environ,
        "CODEWELL_DATABASE_URL": cluster_database,
        "CODEWELL_SHARED_DIR": str(shared),
        "CODEWELL_SEARCHERS": "database",
        "CODEWELL_LOG_LEVEL": "info",
    }
    env.pop("CODEWELL_DATA_DIR", None)
    cluster = Cluster(tmp_path, env)
    single = Cluster(tmp_path, {**os.environ, "CODEWELL_DATA_DIR": str(single_settings.data_dir)})
    with running(cluster), running(single):
        single.ports["single"] = free_port()
        single.start("single", ["serve", "--port", str(single.ports["single"]), "--job-processes", "0"])
        for name in ("s1", "s2", "s3"):
            cluster.searcher(name)
        cluster.web("web1")
        cluster.web("web2")
        cluster.start("worker", ["worker", "--concurrency", "3", "--grace", "5"], {
            "CODEWELL_DATA_DIR": str(tmp_path / "worker")
        })  # fmt: skip
        for name in ("web1", "web2"):
            cluster.wait_ready(name)
        single.wait_ready("single")
        for name in ("s1", "s2", "s3"):
            cluster.wait_ready(name, "/.internal/healthz")

        admin = make_user(rt, "root", site_admin=True)
        alice, bob = make_user(rt, "alice"), make_user(rt, "bob")
        headers = auth_headers(make_token(rt, admin))
        single_headers = auth_headers(make_token(single_rt, make_user(single_rt, "root", site_admin=True)))
        register(shared / "site-config.json", corpus, private)
        register(single_settings.data_dir / "site-config.json", corpus, private)

        def count(client: str, deployment: Cluster, hdrs: dict[str, str], query: str) -> int:
            response = httpx.get(deployment.url(client, "/.api/search"), params={"q": query}, headers=hdrs, timeout=60)
            assert response.status_code == 200, response.text
            return int(response.json()["matchCount"])

        wait_for(lambda: len(rt.get(RepoService).readable_ids(INTERNAL)) == REPOS + 1, "registration", cluster)
        wait_for(lambda: idle(rt) and idle(single_rt), "indexing in both deployments", cluster, timeout=600)
        expected_marker = count("single", single, single_headers, f"{MARKER} file:README count:all")
        assert expected_marker == REPOS  # every README (the vault has none)
        wait_for(
            lambda: count("web1", cluster, headers, f"{MARKER} file:README count:all") == expected_marker,
            "the cluster to hold every repository",
            cluster,
        )

        def ask(client: str, deployment: Cluster, hdrs: dict[str, str], path: str, query: str) -> dict[str, Any]:
            response = httpx.get(deployment.url(client, path), params={"q": query}, headers=hdrs, timeout=60)
            assert response.status_code == 200, (query, response.text)
            return normalized(response.json())

        truth = {q: ask("single", single, single_headers, "/.api/search", q) for q in QUERIES}
        truth_nls = {q: ask("single", single, single_headers, "/.api/nls/search", q) for q in QUESTIONS}
        empties = [q for q, body in truth.items() if not body["files"]]
        assert len(empties) <= 2, empties  # real answers to compare, not empties

        def check_equal(client: str) -> None:
            for q in QUERIES:
                got, want = ask(client, cluster, headers, "/.api/search", q), truth[q]
                if want["limitHit"]:
                    # The default page: the same number of lines, each one a line the full answer has.
                    assert got["limitHit"], q
                    assert got["matchCount"] == want["matchCount"], q
                    full = ask("single", single, single_headers, "/.api/search", q + " count:all")
                    lines = {
                        (f["repository"], f["path"], m["lineNumber"]) for f in full["files"] for m in f["lineMatches"]
                    }
                    assert all(
                        (f["repository"], f["path"], m["lineNumber"]) in lines
                        for f in got["files"]
                        for m in f["lineMatches"]
                    ), q
                else:
                    assert got == want, (q, first_difference(got, want))
            for q in QUESTIONS:
                assert ask(client, cluster, headers, "/.api/nls/search", q) == truth_nls[q], q

        check_equal("web1")
        check_equal("web2")

        # Permissions: the private repository is alice's alone, whichever web replica answers, right after bob's.
        rt.get(RepoService).set_repo_users(INTERNAL, "secret/vault", [alice.id])
        alice_h, bob_h = auth_headers(make_token(rt, alice)), auth_headers(make_token(rt, bob))
        for first, second in (("web1", "web2"), ("web2", "web1")):
            seen_bob = ask(first, cluster, bob_h, "/.api/search", f"{MARKER} file:notes count:all")
            seen_alice = ask(second, cluster, alice_h, "/.api/search", f"{MARKER} file:notes count:all")
            assert [f["repository"] for f in seen_bob["files"]] == []
            assert [f["repository"] for f in seen_alice["files"]] == ["secret/vault"]
            again_bob = ask(second, cluster, bob_h, "/.api/search", f"{MARKER} file:notes count:all")
            assert again_bob["files"] == []
            assert again_bob["matchCount"] == 0
        # The internal credential opens no public route; the internal API wants it.
        internal = {"Authorization": f"Bearer {internal_token(rt.secret_key())}"}
        assert httpx.get(cluster.url("web1", "/.api/search"), params={"q": MARKER}, headers=internal).status_code == 401
        refused = httpx.post(cluster.url("s1", "/.internal/search"), json={"query": MARKER}, headers=headers)
        assert refused.status_code == 401

        # Kill a searcher: answers are partial at once and name exactly its repositories.
        names = {r.id: r.name for r in rt.get(RepoService).readable(INTERNAL)}
        lost = sorted(names[rid] for rid in names if owner(f"repo:{rid}", ["s1", "s2", "s3"]) == "s3")
        assert 60 < len(lost) < 140
        cluster.kill("s3")
        partial = ask("web1", cluster, headers, "/.api/search", f"{MARKER} file:README count:all")
        assert partial["unsearched"] == lost
        assert partial["matchCount"] == expected_marker - len([name for name in lost if name.startswith(PREFIX)])
        assert any("searcher s3" in note for note in partial["skipped"])
        # Its repositories move to s1 and s2 (its heartbeat goes stale): complete again.
        wait_for(
            lambda: (
                ask("web2", cluster, headers, "/.api/search", f"{MARKER} file:README count:all")["matchCount"]
                == expected_marker
            ),
            "s3's repositories to move to s1 and s2",
            cluster,
        )
        wait_for(lambda: idle(rt), "the moved repositories' jobs", cluster)
        check_equal("web2")

        # s3 comes back with an empty disk: it rebuilds its share; nothing is missed meanwhile, nothing stale.
        cluster.searcher("s3", wipe=True)
        cluster.wait_ready("s3", "/.internal/healthz")
        # And a fourth joins while queries run: every answer complete throughout.
        cluster.searcher("s4")
        cluster.wait_ready("s4", "/.internal/healthz")
        deadline = time.monotonic() + 300
        settled = 0
        while time.monotonic() < deadline and settled < 3:
            body = ask("web1", cluster, headers, "/.api/search", f"{MARKER} file:README count:all")
            assert body["matchCount"] == expected_marker, body.get("skipped")
            assert "unsearched" not in body, body.get("skipped")
            held = {r.name: _held(cluster, r.name) for r in rt.get(JobService).replicas(fresh=True)}
            settled = settled + 1 if idle(rt) and sum(held.values()) == REPOS + 1 and held.get("s4") else 0
            time.sleep(1.0)
        assert settled >= 3, (held, cluster.logs())
        check_equal("web1")

        # Drain s4: its share moves back to the others; the command says when it holds nothing.
        drained = subprocess.run(
            [*CODEWELL, "searcher", "drain", "s4", "--timeout", "240"],
            env={**env, "CODEWELL_DATA_DIR": str(tmp_path / "admin")},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert drained.returncode == 0, drained.stdout + drained.stderr
        assert "s4: drained" in drained.stdout
        assert _held(cluster, "s4") == 0
        check_equal("web2")

        codes = cluster.stop_all()
        assert all(code == 0 for name, code in codes.items() if name != "s3"), (codes, cluster.logs())
    single_rt.close()
    rt.close()


def _held(cluster: Cluster, name: str) -> int:
    return int(httpx.get(cluster.url(name, "/.internal/healthz"), timeout=5).json()["held"])
