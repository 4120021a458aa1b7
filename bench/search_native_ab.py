"""A/B of the native kernels on the filtered query, and what a pause before a query costs on this machine.

Blocks of ripgrep, ours with the kernels and ours without them, interleaved 7 times in one process (so
machine drift hits all three), plus each mode timed right after a ripgrep run. Then the same query right
after ripgrep, after a 50 ms and a 1 ms sleep, and back to back: if a sleep costs as much as ripgrep, the
interleaved figure measures the machine waking up, not the query.
Run after bench/search_bench.py has built the shard: python bench/search_native_ab.py [--blocks 7]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from codewell.search import native
from codewell.search.index.shard import Shard
from search_bench import ours, rg_lines

QUERY = "count:all mutex_lock file:^fs/ext4/"
RG_ARGS = ["-i", "-F", "mutex_lock", "fs/ext4"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shard", type=Path, default=Path("/var/tmp/codewell-bench/search-shard"))
    parser.add_argument("--repo", type=Path, default=Path("/var/tmp/codewell-bench/linux"))
    parser.add_argument("--blocks", type=int, default=7, help="interleaved blocks (1 for a smoke run)")
    args = parser.parse_args()
    shard = Shard.open(args.shard)
    repo = args.repo
    modes = ("rg", "kernels", "python", "kernels after rg", "python after rg")
    rows: dict[str, list[float]] = {mode: [] for mode in modes}
    for _ in range(args.blocks):
        rg_lines(repo, RG_ARGS)
        rows["rg"] += [rg_lines(repo, RG_ARGS)[1] for _ in range(9)]
        for mode in ("kernels", "python"):
            native.ENABLED = mode == "kernels"
            ours(shard, QUERY)
            rows[mode] += [ours(shard, QUERY)[1] for _ in range(90)]
            for _ in range(3):
                rg_lines(repo, RG_ARGS)
                rows[f"{mode} after rg"].append(ours(shard, QUERY)[1])
    native.ENABLED = True
    for _ in range(2 * args.blocks + 1):
        rg_lines(repo, RG_ARGS)
        rows.setdefault("right after rg", []).append(ours(shard, QUERY)[1])
        time.sleep(0.05)
        rows.setdefault("after 50 ms sleep", []).append(ours(shard, QUERY)[1])
        time.sleep(0.001)
        rows.setdefault("after 1 ms sleep", []).append(ours(shard, QUERY)[1])
        rows.setdefault("back to back", []).append(ours(shard, QUERY)[1])
    rg_ms = statistics.median(rows["rg"]) * 1000
    for name, times in rows.items():
        ms = statistics.median(times) * 1000
        print(f"{name:18} {ms:8.3f} ms  ripgrep / this = {rg_ms / ms:7.1f}")


if __name__ == "__main__":
    main()
