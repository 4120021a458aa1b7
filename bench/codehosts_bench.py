"""Code hosts benchmark: one GitHub connection with 10,000 repositories and 5,000 users with linked accounts.

The loopback host (tests/fakes/codehosts.py, GitHub REST v3 shapes, pagination, ETags) runs in a child
process so that it does not share this process's GIL. Half of the repositories are private with 10
collaborators each (every user is a collaborator of ~10). Measured (discovery + permission sync; no git
cloning of 10k repositories):
  discovery        list 100 pages of /orgs/{org}/repos and register 10,000 repositories
  repo-centric     collaborators of each private repository (5,000 requests), written to repo_permissions
  user-centric     /user/repos of each linked user with their own token (5,000 users), written likewise
  list_repos / readable (the visibility step of keyword_search) as a linked user, before and after the
  permission table holds ~100,000 rows.
Run: python bench/codehosts_bench.py [--repos 10000] [--users 5000] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from starlette.requests import Request
from starlette.responses import Response
from tests.fakes.codehosts import FakeCodeHost, FakeRepo, HostUser, paginate

from codewell.accounts.service import AccountService
from codewell.auth.identities import ExternalAccount, IdentityService
from codewell.auth.service import ClientInfo
from codewell.codehosts.service import CodeHostService
from codewell.config.schema import SiteConfig
from codewell.core.actors import INTERNAL, Actor
from codewell.core.processes import terminate_with_parent
from codewell.core.settings import Settings
from codewell.repos.service import RepoService
from codewell.runtime import Runtime

RESULTS = Path(__file__).parent / ".results"
MEMBERS_PER_REPO = 10


class BenchHost(FakeCodeHost):
    """The fake with a member index, so that /user/repos costs O(repos of the user), like the real host."""

    def __init__(self, repos: int, users: int) -> None:
        super().__init__()
        self.by_member: dict[str, list[FakeRepo]] = {}
        self.public_json: list[dict[str, Any]] | None = None
        self.all_json: list[dict[str, Any]] = []
        self.add(HostUser(1, "svc"))
        self.admins.add("svc")
        self.tokens["svc-token"] = "svc"
        self.pats.add("svc-token")
        for j in range(users):
            self.add(HostUser(10_000 + j, f"u{j}"))
            self.tokens[f"tok-u{j}"] = f"u{j}"
        for i in range(repos):
            private = i % 2 == 0
            members = {f"u{(i * 7 + k * 13) % users}": 30 for k in range(MEMBERS_PER_REPO)} if private else {}
            repo = self.add_repo(FakeRepo(i + 1, f"org/r{i:05d}", "private" if private else "public", members))
            for login in members:
                self.by_member.setdefault(login, []).append(repo)

    def gh_org_repos(self, request: Request, user: HostUser) -> Response:
        # Precomputed: the generic fake builds every repository's JSON per request (O(repos) per user).
        if self.public_json is None:
            self.public_json = [self._gh_repo(r) for r in self.repos.values() if r.visibility == "public"]
            self.all_json = [self._gh_repo(r) for r in self.repos.values()]
        if user.login in self.admins:
            return paginate(request, self.all_json, host="github")
        own = [self._gh_repo(r) for r in self.by_member.get(user.login, [])]
        return paginate(request, self.public_json + own, host="github")

    def gh_user_repos(self, request: Request, user: HostUser) -> Response:
        return paginate(request, [self._gh_repo(r) for r in self.by_member.get(user.login, [])], host="github")


def serve(repos: int, users: int) -> None:
    with BenchHost(repos, users) as host:
        print(host.url, flush=True)
        sys.stdin.read()  # until the parent closes the pipe


def ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50_ms": round(statistics.median(ordered) * 1000, 2), "max_ms": round(ordered[-1] * 1000, 2)}


def latency(runtime: Runtime, actor: Actor, runs: int = 20) -> dict[str, Any]:
    repos = runtime.get(RepoService)
    listed, readable = [], []
    for _ in range(runs):
        start = time.perf_counter()
        repos.list_repos(actor, "r0", 50)
        listed.append(time.perf_counter() - start)
        start = time.perf_counter()
        count = len(repos.readable(actor))
        readable.append(time.perf_counter() - start)
    return {"list_repos": ms(listed), "readable": ms(readable), "readable_count": count}


def latency_ab(data: Path, rounds: int = 5) -> dict[str, Any]:
    """list_repos/readable as user u0 on a finished run's database (with ~100k synced permission rows) and on a
    copy without the synced rows, interleaved round by round so that machine load hits both alike."""
    bare = Path(tempfile.mkdtemp(prefix="codehosts-ab-"))
    shutil.copyfile(data / "codewell.db", bare / "codewell.db")
    with sqlite3.connect(bare / "codewell.db") as db:
        rows = db.execute("SELECT count(*) FROM repo_permissions").fetchone()[0]
        db.execute("DELETE FROM repo_permissions WHERE source LIKE 'codehost:%'")
    runtimes = {}
    for label, where in (("with_synced_permissions", data), ("without", bare)):
        runtime = Runtime.open(Settings.from_env({}, data_dir=where, database_url=f"sqlite:///{where}/codewell.db"))
        user = runtime.get(AccountService).get_by_username("u0")
        runtimes[label] = (runtime, runtime.get(AccountService).actor_for(user, via="session"))
    samples: dict[str, list[dict[str, Any]]] = {label: [] for label in runtimes}
    for _ in range(rounds):
        for label, (runtime, actor) in runtimes.items():
            samples[label].append(latency(runtime, actor, runs=4))
    result: dict[str, Any] = {"permission_rows": rows}
    for label, runs in samples.items():
        result[label] = {
            "list_repos_p50_ms": round(statistics.median(r["list_repos"]["p50_ms"] for r in runs), 2),
            "readable_p50_ms": round(statistics.median(r["readable"]["p50_ms"] for r in runs), 2),
            "readable_count": runs[-1]["readable_count"],
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repos", type=int, default=10_000)
    parser.add_argument("--users", type=int, default=5_000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--latency-ab", type=Path, help="data dir of a finished run: A/B latency only")
    args = parser.parse_args()
    if args.serve:
        serve(args.repos, args.users)
        return
    if args.latency_ab:
        print(json.dumps(latency_ab(args.latency_ab), indent=2))
        return
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--repos", str(args.repos), "--users", str(args.users)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=terminate_with_parent,  # noqa: PLW1509 (prctl only, see its docstring)
    )
    assert child.stdout is not None
    url = child.stdout.readline().strip()
    try:
        results = run(url, args)
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "codehosts.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


def run(url: str, args: argparse.Namespace) -> dict[str, Any]:
    data = Path(tempfile.mkdtemp(prefix="codehosts-bench-"))
    runtime = Runtime.open(Settings.from_env({}, data_dir=data, database_url=f"sqlite:///{data}/codewell.db"))
    runtime.db.upgrade()
    os.environ["CODEWELL_BENCH_CODEHOST_TOKEN"] = "svc-token"
    connection = {
        "id": "bench",
        "kind": "github",
        "url": url,
        "tokenEnv": "CODEWELL_BENCH_CODEHOST_TOKEN",
        "orgs": ["org"],
        "authorization": True,
    }
    runtime.site_config.write(SiteConfig.model_validate({"codeHostConnections": [connection]}))
    service = runtime.get(CodeHostService)
    service.concurrency = args.concurrency
    accounts, identities = runtime.get(AccountService), runtime.get(IdentityService)
    start = time.perf_counter()
    users = []
    for j in range(args.users):
        user = accounts.create_user(INTERNAL, f"u{j}")
        account = ExternalAccount(
            "github", url, "client", str(10_000 + j), f"u{j}", token={"access_token": f"tok-u{j}"}
        )
        identities.link(user, account, ClientInfo())
        users.append(user)
    setup_seconds = time.perf_counter() - start
    probe = accounts.actor_for(users[0], via="session")
    conn = runtime.config.code_host_connections[0]

    start = time.perf_counter()
    report = service.discover(conn)
    discovery = time.perf_counter() - start
    before = latency(runtime, probe)
    start = time.perf_counter()
    repos_synced = service.sync_repos_permissions(conn)
    repo_centric = time.perf_counter() - start
    start = time.perf_counter()
    users_synced = service.sync_users_permissions(conn)
    user_centric = time.perf_counter() - start
    after = latency(runtime, probe)
    start = time.perf_counter()
    service.discover(conn)
    rediscovery = time.perf_counter() - start
    total = discovery + repo_centric + user_centric
    return {
        "repos": args.repos,
        "users": args.users,
        "concurrency": args.concurrency,
        "setup_users_and_links_s": round(setup_seconds, 1),
        "discovery_s": round(discovery, 1),
        "found": report.found,
        "repo_centric_s": round(repo_centric, 1),
        "repos_synced": repos_synced,
        "user_centric_s": round(user_centric, 1),
        "users_synced": users_synced,
        "total_sync_s": round(total, 1),
        "within_5_minutes": total <= 300,
        "rediscovery_with_etags_s": round(rediscovery, 1),
        "latency_before_permissions": before,
        "latency_after_permissions": after,
    }


if __name__ == "__main__":
    main()
