"""Server time of the pages people read code with, on the Linux corpus (#19's performance targets).

Uses the data dir `bench/codenav_linux.py` builds (`--data`, default /var/tmp/codewell-bench/linux-data: the Linux
tree registered as `bench/linux` and indexed). The app runs in this process (Starlette's test client: no sockets,
so the figure is the server's own time plus a few tens of microseconds of in-process transport), signed in with a
site admin's access token. Measured, each page right after its baseline, `--runs` times:

- the search page (`/search?q=...`) for the selective queries of `bench/search_bench.py` without `count:all`
  (what a person types), against `SearchService.search` of the same query by the same user (the baseline: what
  the page adds is rendering, sessions, CSP and the rest of the request);
- the file view of a ~5,000-line C file: the first view (highlighting) and the next ones (the highlight cache),
  against `RepoService.read_file` of the same file.

Targets: search page p50 ≤ 50 ms for selective queries; 5,000-line file view ≤ 100 ms once highlighted.
Run: .venv/bin/python bench/web_bench.py [--runs 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from codewell.accounts.service import AccountService
from codewell.accounts.tokens import TokenService
from codewell.app import create_app
from codewell.core.actors import INTERNAL, Actor
from codewell.core.settings import Settings
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from codewell.search.service import SearchService

DATA = Path("/var/tmp/codewell-bench/linux-data")
OUT = Path(__file__).with_name(".results")
REPO = "bench/linux"
# The selective queries of bench/search_bench.py, as a person types them (the page's default count).
QUERIES = {
    "absent literal": "xyzzy_not_there_42",
    "rare literal": "ftrace_graph_ret_addr",
    "linus torvalds": '"linus torvalds"',
    "file filtered": "mutex_lock file:^fs/ext4/",
    "ext filtered": r"spin_lock_irqsave file:\.h$",
    "lang filtered": "mutex_lock lang:rust",
}
# C files of about 5,000 lines under read_file's 128 KB whole-file limit (the first that exists is used).
LARGE_FILES = ["drivers/gpu/drm/omapdrm/dss/dsi.c", "drivers/ata/libata-scsi.c"]


def timed(call: Callable[[], object]) -> float:
    """Milliseconds `call` takes."""
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def p50(values: list[float]) -> float:
    return round(statistics.median(values), 2)


def admin(runtime: Runtime) -> tuple[Actor, str]:
    accounts = runtime.get(AccountService)
    user = accounts.find_by_username("webbench") or accounts.create_user(INTERNAL, "webbench", site_admin=True)
    token, _ = runtime.get(TokenService).create_token(INTERNAL, user.id, "web bench", ("user:all",))
    actor = Actor.user(user.id, user.username, site_admin=True)
    return actor, token


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    settings = Settings.from_env({}, data_dir=args.data, database_url=f"sqlite:///{args.data}/codewell.db")
    runtime = Runtime.open(settings)
    runtime.db.upgrade()
    app = create_app(runtime, background=False)
    actor, token = admin(runtime)
    headers = {"Authorization": f"token {token}"}
    search = runtime.get(SearchService)
    repos = runtime.get(RepoService)
    report: dict[str, Any] = {"runs": args.runs, "search": {}, "file_view": {}}
    with TestClient(app) as client:
        assert client.get("/", headers=headers).status_code == 200
        print(f"{'search page':28} {'page p50':>10} {'service p50':>12} {'page - service':>15}")
        for name, query in QUERIES.items():
            page_ms: list[float] = []
            service_ms: list[float] = []
            scoped = f"repo:^{REPO}$ {query}"
            for _ in range(args.runs):
                started = time.perf_counter()
                search.search(actor, scoped)
                service_ms.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                status = client.get("/search", params={"q": scoped}, headers=headers).status_code
                page_ms.append((time.perf_counter() - started) * 1000)
                assert status == 200, status
            row = {"page_p50_ms": p50(page_ms), "service_p50_ms": p50(service_ms)}
            row["overhead_ms"] = round(row["page_p50_ms"] - row["service_p50_ms"], 2)
            report["search"][name] = row
            print(f"{name:28} {row['page_p50_ms']:>8} ms {row['service_p50_ms']:>9} ms {row['overhead_ms']:>12} ms")

        commit = repos.resolve(actor, REPO).commit
        for path in LARGE_FILES:
            content = repos.read_file(actor, REPO, path, revision=commit)
            if content.lines:
                break
        lines = len(content.lines)
        url = f"/{REPO}@{commit}/-/blob/{path}"

        def view() -> None:
            assert client.get(url, headers=headers).status_code == 200

        def read_file() -> None:
            repos.read_file(actor, REPO, path, revision=commit)

        first = timed(view)
        later = [timed(view) for _ in range(args.runs)]
        read = [timed(read_file) for _ in range(args.runs)]
        report["file_view"] = {
            "path": path,
            "lines": lines,
            "first_view_ms": round(first, 1),
            "cached_view_p50_ms": p50(later),
            "read_file_p50_ms": p50(read),
        }
        print(f"\nfile view {path} ({lines} lines): first {first:.1f} ms (highlighting), then p50 {p50(later)} ms")
        print(f"  baseline RepoService.read_file p50 {p50(read)} ms")
    OUT.mkdir(exist_ok=True)
    (OUT / "web_bench.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
