"""Visibility and listings at 10,000 repositories: what every request pays before it shows anything (#28).

Registers `--repos` repository ROWS in bulk (`RepoService.add_repos`, nothing cloned; `--public` of them
public, the rest private), creates a user granted `--grants` private ones through the grants API
(`set_user_repos`) and `--other-users` users granted as many random private ones each (the permission table
then holds ~100,000 rows, as after a code host's permission sync), and times at the service API:
  readable_ids   the set of readable repository ids (search's visibility step) for that user, a site admin
                 and an anonymous visitor
  readable_refs  id, name, default branch of every readable repository (history's scope), for the user
  readable       full Repo objects (the old visibility step), for the user
  list_repos     the first page (50) for the user, without and with a name filter
p50/p95 over `--runs` calls each, interleaved. In the same process, the floor: the same ids through the
database driver alone (no SQLAlchemy, no Python beyond the driver's rows), and a `SELECT 1` round trip.
Before/after: `--ab SRC` with SRC the old commit's src/ (`git worktree add /tmp/base HEAD`): each side
populates its own database, then `--rounds` pairs of child processes measure before, after, before, ...
(the machine is shared: alternating makes load hit both alike); medians over the rounds. SQLite by default;
`--database-url postgresql+psycopg://postgres@127.0.0.1:5432/bench_vis` (databases bench_vis_before and
bench_vis_after, dropped and created again).
Run: python bench/repos_visibility_bench.py [--repos 10000] [--public 1000] [--grants 5000] [--ab /tmp/base/src]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

import codewell
from codewell.accounts.service import AccountService
from codewell.core.actors import ANONYMOUS, INTERNAL, Actor
from codewell.core.settings import Settings
from codewell.repos.service import NewRepo, RepoService
from codewell.runtime import Runtime

RESULTS = Path(__file__).parent / ".results"


def fresh_postgres(url: str) -> None:
    """Drop and create the database `url` names (never one this bench did not name)."""
    parsed = make_url(url)
    server = parsed.set(drivername="postgresql", database="postgres").render_as_string(hide_password=False)
    with psycopg.connect(server, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{parsed.database}"')
        connection.execute(f'CREATE DATABASE "{parsed.database}"')


def open_runtime(data: Path, database_url: str | None, *, fresh: bool) -> Runtime:
    url = database_url or f"sqlite:///{data}/codewell.db"
    if fresh and url.startswith("postgresql"):
        fresh_postgres(url)
    runtime = Runtime.open(Settings.from_env({}, data_dir=data, database_url=url))
    runtime.db.upgrade()
    return runtime


def populate(runtime: Runtime, args: argparse.Namespace) -> tuple[Actor, Actor, dict[str, float]]:
    """The rows: repositories, the probe user with its grants, other users with theirs, a site admin."""
    repos, accounts = runtime.get(RepoService), runtime.get(AccountService)
    names = [f"bench/r{i:05d}" for i in range(args.repos)]
    private = names[args.public :]
    start = time.perf_counter()
    repos.add_repos(
        INTERNAL,
        [
            NewRepo(name, f"https://git.example.invalid/{name}.git", private=i >= args.public)
            for i, name in enumerate(names)
        ],
        source="bench",
    )
    register_s = time.perf_counter() - start
    rng = random.Random(28)
    start = time.perf_counter()
    user = accounts.create_user(INTERNAL, "probe")
    repos.set_user_repos(INTERNAL, user.id, rng.sample(private, min(args.grants, len(private))))
    for j in range(args.other_users):
        other = accounts.create_user(INTERNAL, f"other{j}")
        repos.set_user_repos(INTERNAL, other.id, rng.sample(private, min(args.grants, len(private))))
    grants_s = time.perf_counter() - start
    admin = accounts.create_user(INTERNAL, "admin", site_admin=True)
    timings = {"register_rows_s": round(register_s, 1), "grants_s": round(grants_s, 1)}
    return accounts.actor_for(user, via="session"), accounts.actor_for(admin, via="session"), timings


def driver_floor(runtime: Runtime, user_id: int) -> dict[str, Callable[[], object]]:
    """The same answers through the DB-API driver alone: what the database and the driver cost at least."""
    mark = "?" if runtime.db.engine.dialect.paramstyle == "qmark" else "%s"
    raw = runtime.db.engine.raw_connection()
    user_sql = (
        "SELECT id FROM repos WHERE private = false "
        f"UNION ALL SELECT repo_id FROM repo_permissions WHERE user_id = {mark}"
    )

    def run(sql: str, params: tuple[object, ...] = ()) -> Callable[[], object]:
        def call() -> object:
            cursor = raw.cursor()
            cursor.execute(sql, params)
            rows = cursor.fetchall()
            cursor.close()
            raw.rollback()
            return frozenset(row[0] for row in rows)

        return call

    return {
        "select_1": run("SELECT 1"),
        "ids_user": run(user_sql, (user_id,)),
        "ids_all": run("SELECT id FROM repos"),
        "ids_public": run("SELECT id FROM repos WHERE private = false"),
    }


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50_ms": round(statistics.median(ordered) * 1000, 2), "p95_ms": round(p95 * 1000, 2)}


def measure(calls: dict[str, Callable[[], object]], runs: int) -> dict[str, dict[str, float]]:
    """Each call `runs` times, interleaved (call A, call B, ..., then again) so that load hits all alike."""
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for call in calls.values():
        call()  # warm: compiled statements, connection pool
    for _ in range(runs):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            samples[name].append(time.perf_counter() - start)
    return {name: summary(values) for name, values in samples.items()}


def run_one(args: argparse.Namespace) -> dict[str, Any]:
    """Populate (unless --reuse) and measure in this process, with whatever codewell it imported."""
    data = Path(args.data) if args.data else Path(tempfile.mkdtemp(prefix="repos-visibility-"))
    data.mkdir(parents=True, exist_ok=True)
    runtime = open_runtime(data, args.database_url, fresh=not args.reuse)
    if args.reuse:
        accounts = runtime.get(AccountService)
        user = accounts.actor_for(accounts.get_by_username("probe"), via="session")
        admin = accounts.actor_for(accounts.get_by_username("admin"), via="session")
        setup: dict[str, float] = {}
    else:
        user, admin, setup = populate(runtime, args)
    if args.populate_only:
        runtime.close()
        return {"setup": setup}
    repos = runtime.get(RepoService)
    assert user.user_id is not None
    counts = {
        "user": len(repos.readable_ids(user)),
        "admin": len(repos.readable_ids(admin)),
        "anonymous": len(repos.readable_ids(ANONYMOUS)),
    }
    calls: dict[str, Callable[[], object]] = {
        "readable_ids_user": lambda: repos.readable_ids(user),
        "readable_ids_admin": lambda: repos.readable_ids(admin),
        "readable_ids_anonymous": lambda: repos.readable_ids(ANONYMOUS),
        "readable_refs_user": lambda: repos.readable_refs(user),
        "list_repos_user_first_page": lambda: repos.list_repos(user, "", 50),
        "list_repos_user_filtered": lambda: repos.list_repos(user, "r04", 50),
        "list_repos_anonymous_first_page": lambda: repos.list_repos(ANONYMOUS, "", 50),
    }
    results: dict[str, Any] = {
        "codewell": str(Path(codewell.__file__).parent),
        "database": runtime.db.engine.dialect.name,
        "readable_counts": counts,
        "setup": setup,
        "service": measure(calls, args.runs),
        "driver_floor": measure(driver_floor(runtime, user.user_id), args.runs),
        # Full Repo objects: the old visibility step, a few runs only (~0.3 s each).
        "readable_user": measure({"readable_user": lambda: repos.readable(user)}, max(3, args.runs // 5)),
    }
    runtime.close()
    return results


def child(args: argparse.Namespace, src: str | None, data: Path, url: str | None, *extra: str) -> dict[str, Any]:
    """This script in a child process importing codewell from `src` (None: the installed one)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if src:
        env["PYTHONPATH"] = src
    command = [sys.executable, __file__, "--data", str(data), "--runs", str(args.runs), *extra]
    command += ["--repos", str(args.repos), "--public", str(args.public), "--grants", str(args.grants)]
    command += ["--other-users", str(args.other_users)] + (["--database-url", url] if url else [])
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def with_database(url: str | None, label: str) -> str | None:
    """`url` naming its own database per label (bench_vis -> bench_vis_before); None stays SQLite."""
    if url is None:
        return None
    parsed = make_url(url)
    return parsed.set(database=f"{parsed.database}_{label}").render_as_string(hide_password=False)


def ab(args: argparse.Namespace) -> dict[str, Any]:
    """Before (codewell from --ab SRC) and after (the installed one), each on its own populated database,
    measured in alternating child processes (`--rounds`): load on the shared machine hits both alike."""
    sides = {"before": args.ab, "after": None}
    root = Path(tempfile.mkdtemp(prefix="repos-visibility-ab-"))
    setup = {}
    for label, src in sides.items():
        setup[label] = child(args, src, root / label, with_database(args.database_url, label), "--populate-only")
    rounds: dict[str, list[dict[str, Any]]] = {label: [] for label in sides}
    for _ in range(args.rounds):
        for label, src in sides.items():
            rounds[label].append(child(args, src, root / label, with_database(args.database_url, label), "--reuse"))
    out: dict[str, Any] = {
        "repos": args.repos,
        "public": args.public,
        "grants_per_user": args.grants,
        "users_with_grants": 1 + args.other_users,
        "runs_per_round": args.runs,
        "rounds": args.rounds,
    }
    for label, runs in rounds.items():
        side: dict[str, Any] = {
            "codewell": runs[0]["codewell"],
            "database": runs[0]["database"],
            "readable_counts": runs[0]["readable_counts"],
            "setup": setup[label]["setup"],
        }
        for group in ("service", "driver_floor", "readable_user"):
            side[group] = {
                name: {
                    stat: round(statistics.median(r[group][name][stat] for r in runs), 2)
                    for stat in ("p50_ms", "p95_ms")
                }
                for name in runs[0][group]
            }
        out[label] = side
    out["database"] = out["after"]["database"]
    out["speedup_p50"] = {
        name: round(out["before"]["service"][name]["p50_ms"] / max(0.01, value["p50_ms"]), 1)
        for name, value in out["after"]["service"].items()
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repos", type=int, default=10_000)
    parser.add_argument("--public", type=int, default=1_000)
    parser.add_argument("--grants", type=int, default=5_000)
    parser.add_argument("--other-users", type=int, default=19)
    parser.add_argument("--runs", type=int, default=30, help="calls of each measure per process")
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--ab", metavar="SRC", help="before/after: SRC is the old commit's src/ (git worktree)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating before/after processes (--ab)")
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--reuse", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--populate-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.data:  # a child of --ab, or a single run on a given data dir: JSON on stdout only
        print(json.dumps(run_one(args)))
        return
    results = ab(args) if args.ab else run_one(args)
    RESULTS.mkdir(exist_ok=True)
    name = "ab" if args.ab else "run"
    database = results["database"]
    (RESULTS / f"repos_visibility_{database}_{name}.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
