"""How long `codewell` takes to answer the commands that need no data: `--help`, a command's `--help`, `--version`.

Each run is a fresh process (`python -m codewell ...`, as the `codewell` script starts it), so it pays the
interpreter start and every import, as a person typing the command does; the files are in the page cache after
the first run. The baseline is `python -c pass` measured the same way in the same run: the ratio is what
codewell adds to starting Python. Issue #32 asks for `codewell --help` in at most 0.5 s.

    .venv/bin/python bench/cli_bench.py [--runs 5] [--results bench/.results/cli_bench.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

# Issue #32: the CLI's help answers in at most this many seconds.
TARGET_SECONDS = 0.5
CASES: dict[str, list[str]] = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "codewell --help": [sys.executable, "-m", "codewell", "--help"],
    "codewell search --help": [sys.executable, "-m", "codewell", "search", "--help"],
    "codewell --version": [sys.executable, "-m", "codewell", "--version"],
}
BASELINE = "python -c pass"
DEFAULT_RESULTS = Path(__file__).with_name(".results") / "cli_bench.json"


def time_once(command: list[str]) -> float:
    """Seconds from starting `command` to its exit; a failed command fails the bench."""
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def measure(runs: int) -> dict[str, dict[str, float]]:
    """Each case's p50 and slowest run over `runs` rounds; the cases alternate within a round, so that a burst of
    load on the shared machine falls on all of them rather than on one."""
    seconds: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(runs):
        for name, command in CASES.items():
            seconds[name].append(time_once(command))
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
    args = parser.parse_args()
    figures = measure(args.runs)
    for name, figure in figures.items():
        verdict = "" if name == BASELINE else ("  ok" if figure["p50_s"] <= TARGET_SECONDS else "  over 0.5 s")
        print(
            f"{name:24} p50 {figure['p50_s'] * 1000:7.0f} ms  max {figure['max_s'] * 1000:7.0f} ms"
            f"  x{figure['ratio_to_python']:<6}{verdict}"
        )
    args.results.parent.mkdir(parents=True, exist_ok=True)
    summary = {"runs": args.runs, "target_s": TARGET_SECONDS, "cases": figures}
    args.results.write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
