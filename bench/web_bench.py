"""Server time of the pages people read code with, on the Linux corpus (#19's performance targets).

Uses a data dir with the Linux tree registered as `bench/linux` and its search index (`--data`, default
/var/tmp/codewell-bench/linux-data, which `bench/codenav_linux.py` builds; the search index alone is enough). The
app runs in this process (Starlette's test client: no sockets, so the figure is the server's own time plus a few
tens of microseconds of in-process transport), signed in with a site admin's access token. Measured, each page
right after its baseline, `--runs` times:

- the search page (`/search?q=...`) for the selective queries of `bench/search_bench.py` without `count:all`
  (what a person types), against `SearchService.search` of the same query by the same user (the baseline: what
  the page adds is rendering, sessions, CSP and the rest of the request);
- the highlighters on ~5,000-line C and Python files of the tree: tree-sitter (web/highlight_ts.py) against
  Pygments, wall and CPU milliseconds, same text, same process;
- the file view of a ~5,000-line C file with an empty highlight store (in a temporary directory): the first view
  (highlighting), the first view after a restart (in-memory caches cleared: served from the store on disk) and
  the next ones (in-memory cache), against `RepoService.read_file` of the same file.

Targets: search page p50 ≤ 50 ms for selective queries; 5,000-line file view ≤ 100 ms with highlighting.
Run: .venv/bin/python bench/web_bench.py [--data DIR] [--runs 15]
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import statistics
import tempfile
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
from codewell.web import highlight, highlight_ts

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
# Highlighter comparison: ~5,000-line files of each kind, read from the source tree (the Python one is larger
# than read_file's whole-file limit, so the file view would cut it).
HIGHLIGHTED = ["drivers/gpu/drm/omapdrm/dss/dsi.c", "tools/perf/scripts/python/exported-sql-viewer.py"]


def cpu_timed(call: Callable[[], object]) -> tuple[float, float]:
    """(wall, CPU) milliseconds `call` takes (CPU: this process; steadier than wall time on a busy machine)."""
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000


def compare_highlighters(source: Path, runs: int) -> dict[str, Any]:
    """tree-sitter against Pygments on the same text, median wall and CPU ms of `runs` runs each."""
    found: dict[str, Any] = {}
    print(f"\n{'highlighter':44} {'tree-sitter':>22} {'pygments':>22} {'ratio':>6}")
    for path in HIGHLIGHTED:
        text = (source / path).read_text(encoding="utf-8", errors="replace")
        language = highlight_ts.grammar_for(path)
        assert language is not None, path
        highlight_ts.highlight_html(language, "")  # grammar and query loaded outside the timing
        with_ts = functools.partial(highlight_ts.highlight_html, language, text)
        with_pygments = functools.partial(highlight._pygments, path, text)
        ts = [cpu_timed(with_ts) for _ in range(runs)]
        pyg = [cpu_timed(with_pygments) for _ in range(max(1, runs // 3))]
        row = {
            "lines": text.count("\n"),
            "tree_sitter_ms": p50([w for w, _ in ts]),
            "tree_sitter_cpu_ms": p50([c for _, c in ts]),
            "pygments_ms": p50([w for w, _ in pyg]),
            "pygments_cpu_ms": p50([c for _, c in pyg]),
        }
        row["cpu_ratio"] = round(row["pygments_cpu_ms"] / max(row["tree_sitter_cpu_ms"], 0.01), 1)
        found[path] = row
        label = f"{path.rsplit('/', 1)[-1]} ({row['lines']} lines)"
        print(
            f"{label:44} {row['tree_sitter_ms']:>7} ms ({row['tree_sitter_cpu_ms']:>6} CPU)"
            f" {row['pygments_ms']:>7} ms ({row['pygments_cpu_ms']:>6} CPU) {row['cpu_ratio']:>5}x"
        )
    return found


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


def measure_search(
    client: TestClient, headers: dict[str, str], search: SearchService, actor: Actor, runs: int
) -> dict[str, Any]:
    """Each query's page against its service call: p50 wall and CPU ms (CPU: steadier on a busy machine)."""
    found: dict[str, Any] = {}
    print(f"{'search page':28} {'page p50':>20} {'service p50':>20} {'page - service':>22}")
    for name, query in QUERIES.items():
        scoped = f"repo:^{REPO}$ {query}"

        def page(scoped: str = scoped) -> None:
            assert client.get("/search", params={"q": scoped}, headers=headers).status_code == 200

        pages: list[tuple[float, float]] = []
        services: list[tuple[float, float]] = []
        for _ in range(runs):
            services.append(cpu_timed(functools.partial(search.search, actor, scoped)))
            pages.append(cpu_timed(page))
        row = {
            "page_p50_ms": p50([w for w, _ in pages]),
            "page_cpu_p50_ms": p50([c for _, c in pages]),
            "service_p50_ms": p50([w for w, _ in services]),
            "service_cpu_p50_ms": p50([c for _, c in services]),
        }
        row["overhead_ms"] = round(row["page_p50_ms"] - row["service_p50_ms"], 2)
        row["overhead_cpu_ms"] = round(row["page_cpu_p50_ms"] - row["service_cpu_p50_ms"], 2)
        found[name] = row
        print(
            f"{name:28} {row['page_p50_ms']:>7} ms ({row['page_cpu_p50_ms']:>6} CPU)"
            f" {row['service_p50_ms']:>7} ms ({row['service_cpu_p50_ms']:>6} CPU)"
            f" {row['overhead_ms']:>8} ms ({row['overhead_cpu_ms']:>6} CPU)"
        )
    return found


def measure_file_view(
    client: TestClient, headers: dict[str, str], repos: RepoService, actor: Actor, runs: int, store_dir: Path | None
) -> dict[str, Any]:
    """The file view of the first ~5,000-line file of LARGE_FILES, p50 of each: first view (empty caches),
    after a restart (the in-memory cache cleared, the store on disk kept), later views (in-memory cache)."""
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

    firsts: list[tuple[float, float]] = []
    restarts: list[tuple[float, float]] = []
    for _ in range(max(1, runs // 2)):
        highlight._highlighted.cache_clear()
        if store_dir is not None:
            shutil.rmtree(store_dir, ignore_errors=True)  # an empty store: this view highlights
        firsts.append(cpu_timed(view))
        highlight._highlighted.cache_clear()  # a restart: the in-memory cache is gone, the store on disk is not
        restarts.append(cpu_timed(view))
    first, first_cpu = p50([w for w, _ in firsts]), p50([c for _, c in firsts])
    restarted, restarted_cpu = p50([w for w, _ in restarts]), p50([c for _, c in restarts])
    later = [cpu_timed(view) for _ in range(runs)]
    read = [timed(read_file) for _ in range(runs)]
    found = {
        "path": path,
        "lines": lines,
        "first_view_p50_ms": first,
        "first_view_cpu_p50_ms": first_cpu,
        "after_restart_p50_ms": restarted,
        "after_restart_cpu_p50_ms": restarted_cpu,
        "cached_view_p50_ms": p50([w for w, _ in later]),
        "cached_view_cpu_p50_ms": p50([c for _, c in later]),
        "read_file_p50_ms": p50(read),
    }
    print(f"\nfile view {path} ({lines} lines): first view p50 {first} ms ({first_cpu} CPU; highlighting),")
    print(f"  after a restart p50 {restarted} ms ({restarted_cpu} CPU; highlight store on disk),")
    print(f"  then p50 {found['cached_view_p50_ms']} ms ({found['cached_view_cpu_p50_ms']} CPU; in-memory cache)")
    print(f"  baseline RepoService.read_file p50 {p50(read)} ms")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--source", type=Path, default=Path("/var/tmp/codewell-bench/linux"), help="the tree")
    args = parser.parse_args()
    settings = Settings.from_env({}, data_dir=args.data, database_url=f"sqlite:///{args.data}/codewell.db")
    runtime = Runtime.open(settings)
    runtime.db.upgrade()
    # An empty highlight store of this run's own: the first view highlights, whatever earlier runs stored.
    store_dir = Path(tempfile.mkdtemp(prefix="web-bench-highlight-"))
    runtime.provide(highlight.HighlightStore, highlight.HighlightStore(store_dir))
    app = create_app(runtime, background=False)
    actor, token = admin(runtime)
    headers = {"Authorization": f"token {token}"}
    search = runtime.get(SearchService)
    repos = runtime.get(RepoService)
    report: dict[str, Any] = {"runs": args.runs, "search": {}, "file_view": {}}
    try:
        with TestClient(app) as client:
            assert client.get("/", headers=headers).status_code == 200
            report["search"] = measure_search(client, headers, search, actor, args.runs)
            report["file_view"] = measure_file_view(client, headers, repos, actor, args.runs, store_dir)
    finally:
        shutil.rmtree(store_dir, ignore_errors=True)
    report["highlighters"] = compare_highlighters(args.source, args.runs)
    OUT.mkdir(exist_ok=True)
    (OUT / "web_bench.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
