"""How long `codewell` takes to answer the commands that need no data: `--help`, every command's `--help`,
`--version`, and a remote command's start (`--server` at a port nobody listens on: everything a command that talks
to a server does before its first byte goes out, and its error line).

Each run is a fresh process (`python -m codewell ...`, as the `codewell` script starts it), so it pays the
interpreter start and every import, as a person typing the command does; the files are in the page cache after
the first run. The baseline is `python -c pass` measured the same way in the same run: the ratio is what
codewell adds to starting Python. Issue #32 asks for `codewell --help` in at most 0.5 s.

    .venv/bin/python bench/cli_bench.py [--runs 5] [--results bench/.results/cli_bench.json] [--remote | --all]

Without `--all` it measures `--help`, `search --help` and `--version` (tests/functional/test_cli_lazy.py runs that);
`--remote` adds the start of every command that talks to a server; `--all` adds every command's `--help` too. The
machine's load average is printed and kept with the figures: on this shared 2-core machine it moves them most.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from codewell.cli.main import COMMANDS

# Issue #32: the CLI's help, and a command that talks to a server, answer in at most this many seconds.
TARGET_SECONDS = 0.5
CODEWELL = [sys.executable, "-m", "codewell"]
# Port 9 (discard) on loopback: nothing listens, the connection is refused at once.
UNREACHABLE = "http://127.0.0.1:9"
QUICK_CASES: dict[str, list[str]] = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "codewell --help": [*CODEWELL, "--help"],
    "codewell search --help": [*CODEWELL, "search", "--help"],
    "codewell --version": [*CODEWELL, "--version"],
}
# Every command that talks to a server (`--server URL`), up to the refused connection.
REMOTE_CASES: dict[str, list[str]] = {
    f"codewell --server {args[0]}": [*CODEWELL, "--server", UNREACHABLE, *args]
    for args in (
        ("search", "x"),
        ("nls", "x"),
        ("read", "r", "p"),
        ("definition", "r", "p", "s"),
        ("references", "r", "p", "s"),
        ("history", "search", "--repo", "r"),
        ("deepsearch", "ask", "x"),
    )
}
CASES: dict[str, list[str]] = {
    **QUICK_CASES,
    **{f"codewell {name} --help": [*CODEWELL, name, "--help"] for name in sorted(COMMANDS)},
    **REMOTE_CASES,
}
# The remote cases end with `error: cannot reach ...` (exit 1) by design.
EXPECTED_FAILURES = set(REMOTE_CASES)
BASELINE = "python -c pass"
DEFAULT_RESULTS = Path(__file__).with_name(".results") / "cli_bench.json"


def time_once(name: str, command: list[str]) -> float:
    """Seconds from starting `command` to its exit; a failed command fails the bench (unless it is expected to)."""
    env = {k: v for k, v in os.environ.items() if k not in ("CODEWELL_SERVER", "CODEWELL_TOKEN")}
    started = time.perf_counter()
    done = subprocess.run(command, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
    elapsed = time.perf_counter() - started
    expected = 1 if name in EXPECTED_FAILURES else 0
    if done.returncode != expected or "Traceback" in done.stderr:
        raise SystemExit(f"{name}: exit {done.returncode}\n{done.stderr}")
    return elapsed


def measure(cases: dict[str, list[str]], runs: int) -> dict[str, dict[str, float]]:
    """Each case's p50 and slowest run over `runs` rounds; the cases alternate within a round, so that a burst of
    load on the shared machine falls on all of them rather than on one."""
    seconds: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, command in cases.items():
            seconds[name].append(time_once(name, command))
    base = statistics.median(seconds[BASELINE])
    return {
        name: {
            "p50_s": round(statistics.median(values), 4),
            "max_s": round(max(values), 4),
            "ratio_to_python": round(statistics.median(values) / base, 2),
        }
        for name, values in seconds.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="Rounds; each case's p50 over them (default 5).")
    parser.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="Where to write the JSON summary.")
    parser.add_argument("--all", action="store_true", help="Every command's --help and the remote starts too.")
    parser.add_argument("--remote", action="store_true", help="The quick cases and every remote command's start.")
    args = parser.parse_args()
    cases = CASES if args.all else {**QUICK_CASES, **REMOTE_CASES} if args.remote else QUICK_CASES
    load_before = os.getloadavg()[0]
    figures = measure(cases, args.runs)
    load = {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2), "cores": os.cpu_count()}
    print(f"load average (1 min): {load['before']} before, {load['after']} after, {load['cores']} cores")
    for name, figure in figures.items():
        verdict = "" if name == BASELINE else ("  ok" if figure["p50_s"] <= TARGET_SECONDS else "  over 0.5 s")
        print(
            f"{name:32} p50 {figure['p50_s'] * 1000:7.0f} ms  max {figure['max_s'] * 1000:7.0f} ms"
            f"  x{figure['ratio_to_python']:<6}{verdict}"
        )
    args.results.parent.mkdir(parents=True, exist_ok=True)
    summary = {"runs": args.runs, "target_s": TARGET_SECONDS, "load": load, "cases": figures}
    args.results.write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
