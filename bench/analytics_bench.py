"""Analytics benchmark: 5M usage events for 10k users over a year, every report timed to the last byte.

Loads users and raw events in bulk (executemany on SQLite, COPY on PostgreSQL), rebuilds the daily rollup
with the production code, then serves the real app with uvicorn on loopback and streams each report with an
HTTP client, timing to the last byte and sampling the server's resident memory while it streams. Baselines
in the same run: the same aggregation computed from the raw events (what the rollup saves), and a plain
function call (what `record_usage` adds to a tool call). Writes bench/.results/analytics-<engine>.json.

Run: python bench/analytics_bench.py [--database-url postgresql+psycopg://postgres@127.0.0.1:5432/bench]
         [--events 5000000] [--users 10000] [--keep]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import socket
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2 as httpx
import numpy as np
import uvicorn
from sqlalchemy import create_engine, insert, text
from sqlalchemy.engine import make_url

from codewell.accounts.models import UserEmailRow, UserRow
from codewell.analytics.events import UsageEvent, UsageRecorder, record_usage
from codewell.analytics.rebuild import rebuild_rollup
from codewell.analytics.tokens import AnalyticsTokenService
from codewell.app import create_app
from codewell.config import SiteConfig
from codewell.core.actors import INTERNAL
from codewell.core.settings import Settings
from codewell.runtime import Runtime

OUT = Path(__file__).with_name(".results")
WORK = Path(os.environ.get("CODEWELL_BENCH_DIR", "/var/tmp/codewell-bench")) / "analytics"
YEAR_START = datetime(2025, 1, 1, tzinfo=UTC)
CLIENTS = ["web", "claude-code/2.1.3", "cursor/1.2", "vscode/1.96", "codex/0.3", "rest"]
LANGUAGES = ["Go", "Python", "TypeScript", "Java", "C++", "Rust", "Ruby", ""]
# (feature, tool, share of events)
MIX = [
    ("mcp", "keyword_search", 0.15),
    ("mcp", "read_file", 0.15),
    ("mcp", "go_to_definition", 0.05),
    ("mcp", "deepsearch", 0.03),
    ("mcp", "code_finder", 0.04),
    ("search", "", 0.30),
    ("codenav", "", 0.15),
    ("deepsearch", "", 0.08),
    ("code_finder", "", 0.05),
]
REPORTS = [
    ("by_user, all time", {"granularity": "by_user"}),
    ("by_user_month, all time", {"granularity": "by_user_month"}),
    ("by_user_day, all time", {"granularity": "by_user_day"}),
    ("by_user_day_client_language, all time", {}),
    ("by_user_day_client_language, one month", {"startDate": "2025-06-01", "endDate": "2025-06-30"}),
    ("by_user_day, one quarter", {"granularity": "by_user_day", "startDate": "2025-04-01", "endDate": "2025-06-30"}),
]
HOST = "analytics.bench.example"
SESSION_EVENTS = 10


def open_runtime(database_url: str | None, *, reuse: bool = False) -> Runtime:
    """A runtime on a fresh database (or, with `reuse`, on the one the previous run loaded)."""
    data = WORK / ("data" if database_url is None else "data-pg")
    url = database_url or f"sqlite:///{data / 'codewell.db'}"
    if reuse:
        runtime = Runtime.open(Settings.from_env({}, data_dir=data, database_url=url))
        runtime.db.upgrade()  # a database loaded before a rollup migration gets it (and its backfill)
        return runtime
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    if database_url:
        base = make_url(database_url)
        admin = create_engine(base.set(database="postgres"), isolation_level="AUTOCOMMIT")
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{base.database}" WITH (FORCE)'))
            c.execute(text(f'CREATE DATABASE "{base.database}"'))
        admin.dispose()
    runtime = Runtime.open(Settings.from_env({}, data_dir=data, database_url=url))
    runtime.db.upgrade()
    merged = {**runtime.config.model_dump(by_alias=True), "externalURL": f"https://{HOST}"}
    runtime.site_config.write(SiteConfig.model_validate(merged))
    return runtime


def load_users(runtime: Runtime, count: int) -> None:
    """Bulk-insert users and primary e-mails (test data; the accounts service creates them one by one)."""
    now = datetime.now(UTC)
    users = [
        {"id": i, "username": f"user{i}", "site_admin": i == 1, "service_account": i % 500 == 0, "created_at": now}
        for i in range(1, count + 1)
    ]
    emails = [{"user_id": i, "email": f"user{i}@example.com"} for i in range(1, count + 1) if i % 500]
    for u in users:
        u.update(display_name="", failed_sign_ins=0, updated_at=now)
    with runtime.db.engine.begin() as c:
        c.execute(insert(UserRow.__table__), users)
        c.execute(
            insert(UserEmailRow.__table__),
            [{**e, "verified": True, "is_primary": True, "created_at": now} for e in emails],
        )
        if runtime.db.engine.dialect.name == "postgresql":
            c.execute(text("SELECT setval(pg_get_serial_sequence('users', 'id'), :n)"), {"n": count})


def generate(events: int, users: int, seed: int = 9) -> dict[str, Any]:
    """Column arrays of a year of usage, in sessions: one user, day, client and (mostly) language per session
    of ~10 events (an agent run or a search session), Zipf-skewed users, workday-weighted days."""
    rng = np.random.default_rng(seed)
    sizes = rng.geometric(1 / SESSION_EVENTS, size=events // SESSION_EVENTS * 2)
    sessions = int(np.searchsorted(np.cumsum(sizes), events)) + 1
    session = np.repeat(np.arange(sessions), sizes[:sessions])[:events]
    weights = 1.0 / np.arange(1, users + 1) ** 0.8
    s_user = rng.choice(np.arange(1, users + 1), size=sessions, p=weights / weights.sum())
    day_weight = np.array([1.0 if (YEAR_START + timedelta(days=d)).weekday() < 5 else 0.2 for d in range(365)])
    s_day = rng.choice(365, size=sessions, p=day_weight / day_weight.sum())
    s_start = rng.integers(8 * 3600, 20 * 3600, size=sessions)
    # Each user mostly sticks to one client and one language.
    main_client = rng.integers(0, len(CLIENTS), size=users + 1)[s_user]
    s_client = np.where(rng.random(sessions) < 0.8, main_client, rng.integers(0, len(CLIENTS), size=sessions))
    main_language = rng.integers(0, len(LANGUAGES), size=users + 1)[s_user]
    s_language = np.where(rng.random(sessions) < 0.7, main_language, rng.integers(0, len(LANGUAGES), size=sessions))
    language = np.where(rng.random(events) < 0.9, s_language[session], rng.integers(0, len(LANGUAGES), size=events))
    shares = np.array([m[2] for m in MIX])
    columns = {
        "user": s_user[session],
        "seconds": s_day[session] * 86400 + np.minimum(s_start[session] + rng.integers(0, 3600, size=events), 86399),
        "client": s_client[session],
        "language": language,
        "mix": rng.choice(len(MIX), size=events, p=shares / shares.sum()),
        "error": rng.random(events) < 0.03,
    }
    order = np.argsort(columns["seconds"], kind="stable")
    return {k: v[order] for k, v in columns.items()}


def load_events(runtime: Runtime, cols: dict[str, Any], chunk: int = 200_000) -> float:
    """Bulk-load raw events; returns seconds. SQLite: executemany in big transactions; PostgreSQL: COPY.
    Row values are prepared with numpy (vectorised timestamps and lookups), not per row in Python."""
    started = time.perf_counter()
    engine = runtime.db.engine
    postgres = engine.dialect.name == "postgresql"
    total = len(cols["user"])
    base = np.datetime64(YEAR_START.replace(tzinfo=None).isoformat(), "s")
    features = np.array([m[0] for m in MIX], dtype=object)
    tools = np.array([m[1] for m in MIX], dtype=object)
    clients = np.array(CLIENTS, dtype=object)
    languages = np.array(LANGUAGES, dtype=object)
    columns = "created_at, user_id, client, feature, tool, endpoint, duration_ms, result_bytes, error, language"
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        for start in range(0, total, chunk):
            end = min(total, start + chunk)
            stamps = np.datetime_as_string(base + cols["seconds"][start:end].astype("timedelta64[s]"), unit="us")
            stamps = np.char.add(stamps, "+00:00") if postgres else np.char.replace(stamps, "T", " ")
            rows = list(
                zip(
                    stamps.tolist(),
                    cols["user"][start:end].tolist(),
                    clients[cols["client"][start:end]].tolist(),
                    features[cols["mix"][start:end]].tolist(),
                    tools[cols["mix"][start:end]].tolist(),
                    [""] * (end - start),
                    [40] * (end - start),
                    [2000] * (end - start),
                    np.where(cols["error"][start:end], "timeout", "").tolist(),
                    languages[cols["language"][start:end]].tolist(),
                    strict=True,
                )
            )
            if postgres:
                with cursor.copy(f"COPY usage_events ({columns}) FROM STDIN") as copy:  # type: ignore[attr-defined]
                    for row in rows:
                        copy.write_row(row)
            else:
                cursor.executemany(f"INSERT INTO usage_events ({columns}) VALUES (?,?,?,?,?,?,?,?,?,?)", rows)
            raw.commit()
    finally:
        raw.close()
    return time.perf_counter() - started


def serve(settings: Settings, port: int) -> None:
    """The server process: the real app under uvicorn (its own process, so its CPU and RSS are its own)."""
    runtime = Runtime.open(settings)
    uvicorn.run(create_app(runtime, background=False), port=port, log_level="warning")


class Server:
    """The real app under uvicorn on a loopback port, in a child process."""

    def __init__(self, runtime: Runtime) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        self.process = multiprocessing.get_context("fork").Process(
            target=serve, args=(runtime.settings, self.port), daemon=True
        )

    def __enter__(self) -> Server:
        self.process.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            time.sleep(0.1)
        raise RuntimeError("the server did not start")

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.join(timeout=10)

    def rss(self) -> int:
        with open(f"/proc/{self.process.pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def cpu_seconds(self) -> float:
        with open(f"/proc/{self.process.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed_report(server: Server, client: httpx.Client, path: str, token: str, params: dict[str, str]) -> dict[str, Any]:
    """Stream one report, discarding the bytes: seconds to the last byte, the server's CPU seconds, bytes,
    rows, and how much the server's resident memory grew while streaming (sampled every 10 ms)."""
    peak = [server.rss()]
    baseline = peak[0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], server.rss())
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    size = lines = 0
    started, cpu_started = time.perf_counter(), server.cpu_seconds()
    url = f"http://127.0.0.1:{server.port}{path}"
    headers = {"Authorization": f"Bearer {token}"}
    with client.stream("GET", url, params={"instanceURL": HOST, **params}, headers=headers) as response:
        assert response.status_code == 200, response.read()
        for chunk in response.iter_bytes():
            size += len(chunk)
            lines += chunk.count(b"\n")
    elapsed, cpu = time.perf_counter() - started, server.cpu_seconds() - cpu_started
    done.set()
    sampler.join()
    return {
        "seconds": round(elapsed, 3),
        "server_cpu_seconds": round(cpu, 3),
        "bytes": size,
        "rows": lines - 1,
        "server_rss_growth_mb": round((peak[0] - baseline) / 2**20, 1),
    }


def raw_baseline(runtime: Runtime, params: dict[str, str]) -> float:
    """Seconds for the database to compute the same grouping from the raw events (no rollup), no output."""
    postgres = runtime.db.engine.dialect.name == "postgresql"
    day = "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')" if postgres else "substr(created_at, 1, 10)"
    keys = {
        "by_user": "user_id",
        "by_user_month": f"user_id, substr({day}, 1, 7)",
        "by_user_day": f"user_id, {day}",
    }.get(params.get("granularity", ""), f"user_id, {day}, client, language")
    where = []
    if "startDate" in params:
        where.append(f"{day} >= '{params['startDate']}'")
    if "endDate" in params:
        where.append(f"{day} <= '{params['endDate']}'")
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    sql = f"SELECT count(*) FROM (SELECT {keys}, count(*) FROM usage_events {clause} GROUP BY {keys}) t"
    started = time.perf_counter()
    with runtime.db.engine.connect() as c:
        c.execute(text(sql)).scalar()
    return time.perf_counter() - started


def record_cost(runtime: Runtime, calls: int = 200_000) -> dict[str, float]:
    """Microseconds `record_usage` adds per call, against an empty function call in the same loop."""
    event = UsageEvent(1, "claude-code/2.1.3", "mcp", tool="read_file", language="Go")

    def nothing(_runtime: Runtime, _event: UsageEvent) -> None:
        return None

    def loop(fn: Any) -> float:
        started = time.perf_counter()
        for _ in range(calls):
            fn(runtime, event)
        return (time.perf_counter() - started) / calls * 1e6

    base = loop(nothing)
    cost = loop(record_usage)
    flush_started = time.perf_counter()
    runtime.get(UsageRecorder).flush()
    return {
        "record_usage_us": round(cost, 2),
        "empty_call_us": round(base, 3),
        "added_us": round(cost - base, 2),
        "budget_us": 200.0,
        "flush_us_per_event": round((time.perf_counter() - flush_started) / calls * 1e6, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=None, help="PostgreSQL URL (default: SQLite in the work dir)")
    parser.add_argument("--events", type=int, default=5_000_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--reuse", action="store_true", help="time the reports on the previous run's data")
    parser.add_argument("--record-calls", type=int, default=200_000, help="record_usage calls timed")
    args = parser.parse_args()
    runtime = open_runtime(args.database_url, reuse=args.reuse)
    engine = runtime.db.engine.dialect.name
    summary: dict[str, Any] = {"engine": engine, "events": args.events, "users": args.users}
    if not args.reuse:
        print(f"engine: {engine}; generating {args.events:,} events for {args.users:,} users")
        load_users(runtime, args.users)
        cols = generate(args.events, args.users)
        load_seconds = load_events(runtime, cols)
        print(f"bulk load: {load_seconds:.1f} s ({args.events / load_seconds:,.0f} events/s)")
        started = time.perf_counter()
        rebuild_rollup(runtime)
        summary["bulk_load_seconds"] = round(load_seconds, 1)
        summary["rollup_rebuild_seconds"] = round(time.perf_counter() - started, 1)
        with runtime.db.engine.connect() as c:
            c.execute(text("ANALYZE"))
            c.commit()
    with runtime.db.engine.connect() as c:
        summary["events"] = c.execute(text("SELECT count(*) FROM usage_events")).scalar()
        summary["rollup_rows"] = c.execute(text("SELECT count(*) FROM usage_daily")).scalar()
        for table in ("usage_user_day", "usage_user_month", "usage_user_total"):
            summary[f"{table}_rows"] = c.execute(text(f"SELECT count(*) FROM {table}")).scalar()
    print(
        f"{summary['events']:,} events, rollup: {summary['rollup_rows']:,} rows (user-day"
        f" {summary['usage_user_day_rows']:,}, user-month {summary['usage_user_month_rows']:,}, user"
        f" {summary['usage_user_total_rows']:,}; load avg {os.getloadavg()[0]:.1f})"
    )
    token, _ = runtime.get(AnalyticsTokenService).create_token(INTERNAL, "bench", None, user_id=1)
    results: list[dict[str, Any]] = []
    report = "/analytics/api/reports/by-user-client-date"
    with Server(runtime) as server, httpx.Client(timeout=300) as client:
        timed_report(server, client, report, token, {"granularity": "by_user"})  # warm caches once
        for name, params in REPORTS:
            figures = timed_report(server, client, report, token, params)
            figures["raw_events_groupby_seconds"] = round(raw_baseline(runtime, params), 3)
            figures["ratio_vs_raw_groupby"] = round(figures["seconds"] / figures["raw_events_groupby_seconds"], 2)
            figures["report"] = name
            figures["within_2s"] = figures["seconds"] <= 2.0
            results.append(figures)
            print(
                f"{name:42} {figures['seconds']:6.2f} s (server cpu {figures['server_cpu_seconds']:5.2f} s)"
                f" {figures['rows']:>9,} rows {figures['bytes'] / 2**20:6.1f} MiB"
                f"  server RSS +{figures['server_rss_growth_mb']:5.1f} MiB"
                f"  raw-events GROUP BY alone {figures['raw_events_groupby_seconds']:.2f} s"
                f" (ratio {figures['ratio_vs_raw_groupby']})"
            )
        registry = timed_report(server, client, "/analytics/api/reports/user-registry", token, {})
        registry["report"] = "user-registry"
        print(f"{'user-registry':42} {registry['seconds']:6.2f} s  {registry['rows']:>9,} rows")
        results.append(registry)
    cost = record_cost(runtime, args.record_calls)
    print(
        f"record_usage: {cost['record_usage_us']} µs per call (empty call {cost['empty_call_us']} µs; adds"
        f" {cost['added_us']} µs = {cost['added_us'] / cost['budget_us']:.3f} of the 200 µs budget)"
    )
    summary.update(reports=results, record_usage=cost, load_average=os.getloadavg())
    OUT.mkdir(exist_ok=True)
    (OUT / f"analytics-{engine}.json").write_text(json.dumps(summary, indent=2))
    runtime.close()


if __name__ == "__main__":
    main()
