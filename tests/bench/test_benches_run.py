"""Every benchmark under bench/ runs as committed, in its smallest mode (issue #30), so that none can rot.

Each bench is run as a fresh process (`python bench/<name>.py ...`, as docs and issues tell people to run them)
from a copy of bench/ beside the real src/ and tests/, so that a smoke run never overwrites the figures in
bench/.results/. Benches of the Linux corpus get bench/tiny_corpus.py's stand-in through $CODEWELL_BENCH_DIR.
The figures such runs print mean nothing: the test asserts that the bench finished and printed what it reports.
A bench that cannot run small says why in its row (`UNRUNNABLE`), and the test asserts that reason still holds.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]
BENCH = PROJECT / "bench"
# Modules of bench/ that are libraries of the benches, not benches.
LIBRARIES = {"benchkit.py", "corpus.py", "gojs_corpus.py", "tiny_corpus.py"}
POSTGRES = os.environ.get("CODEWELL_TEST_POSTGRES_SERVER", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


@dataclass(frozen=True)
class Smoke:
    """One bench's smallest run: its arguments and a text its output must hold."""

    args: tuple[str, ...]
    expect: str
    # Each smoke run takes 1-30 s; the limit (under pytest-timeout's 300 s, so that this test cleans up) is for a
    # machine shared at load 10 and more.
    timeout: float = 270.0
    env: dict[str, str] = field(default_factory=dict)


# {tmp}: the run's scratch dir; {corpus}: the tiny corpus dir ($CODEWELL_BENCH_DIR).
SMOKES: dict[str, Smoke] = {
    "accounts_bench.py": Smoke(("--requests", "20"), "token"),
    "analytics_bench.py": Smoke(("--events", "2000", "--users", "20", "--record-calls", "2000"), "rollup"),
    "cli_bench.py": Smoke(("--runs", "1", "--results", "{tmp}/cli.json"), "codewell --help"),
    "codehosts_bench.py": Smoke(("--repos", "40", "--users", "10"), "discovery"),
    "codenav_bench.py": Smoke(("--symbols", "5", "--packages", "json"), "go_to_definition"),
    "codenav_c_bench.py": Smoke(("--symbols", "5", "--source", "{corpus}/linux/fs/ext4"), "go_to_definition"),
    "codenav_linux.py": Smoke(
        ("--repo", "{corpus}/linux", "--data", "{tmp}/linux-data", "--samples", "3", "--repeat", "1", "--workers", "1"),
        "nls",
    ),
    "codenav_scip_bench.py": Smoke(("--packages", "json", "--samples", "5"), "scip"),
    "evaluator_bench.py": Smoke(("--runs", "6"), "trivial script"),
    "history_bench.py": Smoke(("--repos", "22", "--commits", "120", "--long", "200", "--runs", "1"), "commit_search"),
    "mcp_bench.py": Smoke(("--smoke", "--out", "{tmp}/mcp.json"), "calls/s"),
    "nls_bench.py": Smoke(("--limit", "10", "--packages", "click"), "nls"),
    "repos_bench.py": Smoke(("--reads", "10", "--lists", "5", "--repos", "3"), "read_file"),
    "repos_visibility_bench.py": Smoke(
        ("--repos", "60", "--public", "10", "--grants", "20", "--other-users", "2", "--runs", "2"), "readable_ids"
    ),
    "search_bench.py": Smoke(
        ("--repo", "{corpus}/linux", "--shard", "{tmp}/shard", "--rebuild", "--runs", "1"), "mutex_lock"
    ),
    # 20 s of 4 clients over 2 repositories, the kill included; a 3 s warm-up is too short for an RSS verdict.
    "soak_bench.py": Smoke(
        (
            "--seconds",
            "8",
            "--clients",
            "4",
            "--repos",
            "2",
            "--warmup",
            "3",
            "--settle",
            "0",
            "--rss-limit",
            "2",
            "--out",
            "{tmp}/s.json",
        ),
        "calls/s",
    ),
    "agents_bench.py": Smoke(("--only", "attrs-evolve"), "top-1"),
    "cluster_bench.py": Smoke(
        (
            "--repos",
            "4",
            "--searchers",
            "2",
            "--runs",
            "1",
            "--limit",
            "120",
            "--postgres",
            POSTGRES,
            "--pg-database",
            f"codewell_cluster_smoke_{os.getpid()}",
            "--data",
            "{tmp}/cluster",
            "--out",
            "{tmp}/cluster.json",
        ),
        "wrote",
        timeout=270,
    ),
    "codenav_ts_bench.py": Smoke(
        ("--package", "express@4.21.2", "--symbols", "10"),
        "go_to_definition",
        timeout=270,
    ),
    "nls_answer_bench.py": Smoke(("--smoke",), "named_first"),
    "nls_dense_check.py": Smoke(("--kept",), "cosine_min"),
    "nls_query_ab.py": Smoke(("--data", "{linux_data}", "--repeat", "1"), "same_hits_and_scores"),
    "scale_bench.py": Smoke(
        ("--repos", "4", "--data", "{tmp}/scale-data", "--runs", "1", "--count-runs", "1", "--out", "{tmp}/scale.json"),
        "wrote",
        timeout=270,
    ),
    "search_compound_bench.py": Smoke(
        ("--repos", "4", "--data", "{tmp}/compound", "--runs", "1", "--count-runs", "1", "--out", "{tmp}/c.json"),
        "index",
    ),
    "search_native_ab.py": Smoke(("--shard", "{shard}", "--repo", "{corpus}/linux", "--blocks", "1"), "ripgrep"),
    "web_bench.py": Smoke(("--data", "{linux_data}", "--source", "{corpus}/linux", "--runs", "2"), "file view"),
}

# Benches that cannot run small, and why (checked below, so that the reason is kept true).
UNRUNNABLE: dict[str, str] = {}


def test_every_bench_has_a_smoke_run() -> None:
    benches = {p.name for p in BENCH.glob("*.py")} - LIBRARIES
    assert benches == set(SMOKES) | set(UNRUNNABLE), "add the new bench's smallest run to SMOKES"
    assert not set(SMOKES) & set(UNRUNNABLE)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of bench/ (its .results/ left out) beside links to the real src/ and tests/."""
    root = tmp_path_factory.mktemp("project")
    shutil.copytree(BENCH, root / "bench", ignore=shutil.ignore_patterns(".results", "__pycache__"))
    for name in ("src", "tests", "pyproject.toml"):
        (root / name).symlink_to(PROJECT / name)
    return root


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory, project: Path) -> Path:
    target = tmp_path_factory.mktemp("corpus")
    subprocess.run(
        [sys.executable, str(project / "bench" / "tiny_corpus.py"), str(target)],
        check=True,
        cwd=project,
        env={**os.environ, "CODEWELL_BENCH_DIR": str(target)},
        capture_output=True,
    )
    return target


def run_bench(project: Path, corpus: Path, tmp: Path, name: str, made: dict[str, str]) -> tuple[str, float]:
    smoke = SMOKES[name]
    args = [a.format(tmp=tmp, corpus=corpus, **made) for a in smoke.args]
    env = {**os.environ, "CODEWELL_BENCH_DIR": str(corpus), "PYTHONUNBUFFERED": "1", **smoke.env}
    env.pop("CODEWELL_DATA_DIR", None)
    started = time.perf_counter()
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    # Its own session, so that servers a failed or timed-out bench left behind are ended with it.
    with subprocess.Popen(
        [sys.executable, str(project / "bench" / name), *args],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=smoke.timeout)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    done = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_seconds = after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{name} {' '.join(args)} failed ({done.returncode}):\n{output[-4000:]}"
    assert smoke.expect in output, f"{name} printed no {smoke.expect!r}:\n{output[-4000:]}"
    # CPU seconds of the bench and its children (servers it started and waited for): robust to other load.
    print(f"{name}: {seconds:.1f} s wall, {cpu_seconds:.1f} s CPU")
    return output, seconds


# Benches whose smoke run leaves what others read: (bench, its placeholder, the path in its scratch dir).
MAKERS = {"codenav_linux.py": ("linux_data", "linux-data"), "search_bench.py": ("shard", "shard")}


@pytest.fixture(scope="module")
def made(project: Path, corpus_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Run the benches that build data others reuse (the Linux data dir, the search shard) once."""
    paths: dict[str, str] = {}
    for name, (key, sub) in MAKERS.items():
        tmp = tmp_path_factory.mktemp(key)
        run_bench(project, corpus_dir, tmp, name, {})
        paths[key] = str(tmp / sub)
    return paths


@pytest.mark.slow(minutes=2)  # each a fresh process, most a server: the longest family of the suite
@pytest.mark.parametrize("name", sorted(SMOKES))
def test_bench_runs_small(name: str, project: Path, corpus_dir: Path, made: dict[str, str], tmp_path: Path) -> None:
    if name in MAKERS:  # ran (and was checked) by the fixture; its product must be there
        assert Path(made[MAKERS[name][0]]).is_dir()
        return
    run_bench(project, corpus_dir, tmp_path, name, made)
