"""Code navigation quality on C nobody here wrote, with GNU Global (`gtags`) as the independent ground truth.

Corpus: the Lua 5.4 interpreter's C source (`third-party/lua54/*.c, *.h` of the `lupa` source distribution
from PyPI, fetched with pip into $CODEWELL_BENCH_DIR; `onelua.c`, which #includes every other file, is left
out), committed to a git repository and registered like any other. GNU Global (Debian package `global`)
indexes the same files:

- go_to_definition: usages are sampled from `global -rx NAME` (references, not in comments or strings) of
  names that Global defines exactly once (`global -x NAME`: functions, macros, struct/union/enum tags,
  typedefs); the answer's top candidate must be that definition (path and line of the name).
- find_references: for sampled names defined exactly once, Global's references are the truth, compared
  at line granularity (Global reports lines): precision and recall over (path, line) pairs.

    apt-get install -y global
    .venv/bin/python bench/codenav_c_bench.py [--symbols 300] [--source DIR] [--seed 16]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from benchkit import index_corpus, open_runtime
from codewell.codenav.service import CodeNavService
from codewell.core.actors import INTERNAL
from codewell.core.errors import CodewellError

RESULTS = Path(__file__).parent / ".results"
BENCH_DIR = Path(os.environ.get("CODEWELL_BENCH_DIR", "/var/tmp/codewell-bench"))
REPO = "bench/lua"
SDIST = "lupa==2.8"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@b",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@b",
    "PATH": "/usr/bin:/bin",
}


def lua_source() -> Path:
    """The Lua 5.4 C sources from lupa's source distribution (downloaded once with pip)."""
    target = BENCH_DIR / "lua54"
    if target.is_dir():
        return target
    download = BENCH_DIR / "sdist"
    download.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps", SDIST, "-d", str(download)]
    subprocess.run(pip, check=True, stdout=subprocess.DEVNULL)
    archive = next(download.glob("lupa-*.tar.gz"))
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if "/third-party/lua54/" in m.name and m.isfile()]
        tar.extractall(download, members=members, filter="data")
    shutil.copytree(next(download.glob("lupa-*/third-party/lua54")), target)
    return target


def make_corpus(source: Path, root: Path) -> list[str]:
    root.mkdir(parents=True)
    names = sorted(p.name for p in source.iterdir() if p.suffix in (".c", ".h") and p.name != "onelua.c")
    for name in names:
        shutil.copy(source / name, root / name)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "corpus"]):
        subprocess.run(["git", *args], cwd=root, check=True, env=GIT_ENV)
    subprocess.run(["gtags"], cwd=root, check=True)
    return names


def global_lines(root: Path, *args: str) -> list[tuple[str, str, int]]:
    """`global -x` output as (name, path, line)."""
    out = subprocess.run(["global", *args], cwd=root, check=True, capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split(None, 3)
        if len(parts) >= 3 and parts[1].isdigit():
            rows.append((parts[0], parts[2], int(parts[1])))
    return rows


def single_definitions(root: Path) -> dict[str, tuple[str, int]]:
    """Name → its one definition (path, line), for the names Global defines exactly once."""
    by_name: dict[str, list[tuple[str, int]]] = {}
    for name, path, line in global_lines(root, "-x", "-e", ".*"):
        by_name.setdefault(name, []).append((path, line))
    return {name: spots[0] for name, spots in by_name.items() if len(spots) == 1}


def bench_definitions(
    nav: CodeNavService, root: Path, defs: dict[str, tuple[str, int]], wanted: int, rng: random.Random
) -> dict[str, object]:
    names = sorted(defs)
    rng.shuffle(names)
    samples: list[tuple[str, str]] = []
    for name in names:
        if len(samples) >= wanted:
            break
        uses = sorted({path for _, path, _ in global_lines(root, "-rx", name)})
        if uses:
            samples.append((rng.choice(uses), name))
    correct = 0
    times: list[float] = []
    misses: list[dict[str, object]] = []
    for path, name in samples:
        start = time.perf_counter()
        try:
            top = nav.go_to_definition(INTERNAL, REPO, path, name).candidates[0]
            got = (top.path, top.line)
        except CodewellError:
            got = ("", 0)
        times.append(time.perf_counter() - start)
        if got == defs[name]:
            correct += 1
        elif len(misses) < 15:
            misses.append({"usage": path, "symbol": name, "truth": defs[name], "got": got})
    return {
        "symbols": len(samples),
        "top1_accuracy": round(correct / max(1, len(samples)), 4),
        "p50_ms": round(statistics.median(times) * 1000, 2) if times else None,
        "misses": misses,
    }


def bench_references(
    nav: CodeNavService, root: Path, defs: dict[str, tuple[str, int]], wanted: int, rng: random.Random
) -> dict[str, object]:
    names = sorted(defs)
    rng.shuffle(names)
    tp = fp = fn = done = 0
    times: list[float] = []
    worst: list[dict[str, object]] = []
    for name in names:
        if done >= wanted:
            break
        path, line = defs[name]
        truth = {(p, n) for _, p, n in global_lines(root, "-rx", name)} - {(path, line)}
        start = time.perf_counter()
        try:
            got = nav.find_references(INTERNAL, REPO, path, name, limit=1000)
        except CodewellError:
            continue
        times.append(time.perf_counter() - start)
        ours = set() if got.text_matches else {(f.path, n) for f in got.files for n, _col, _ in f.lines}
        done += 1
        tp += len(ours & truth)
        fp += len(ours - truth)
        fn += len(truth - ours)
        if ours != truth and len(worst) < 10:
            worst.append(
                {"def": f"{path}:{line} {name}", "missed": sorted(truth - ours)[:3], "extra": sorted(ours - truth)[:3]}
            )
    return {
        "symbols": done,
        "precision": round(tp / max(1, tp + fp), 4),
        "recall": round(tp / max(1, tp + fn), 4),
        "p50_ms": round(statistics.median(times) * 1000, 2) if times else None,
        "differences": worst,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--symbols", type=int, default=300)
    parser.add_argument("--source", type=Path, help="a folder of C files (default: Lua 5.4 from lupa's sdist)")
    parser.add_argument("--seed", type=int, default=16)
    args = parser.parse_args()
    if shutil.which("gtags") is None:
        sys.exit("GNU Global is missing: apt-get install -y global")
    rng = random.Random(args.seed)
    source = args.source or lua_source()
    with tempfile.TemporaryDirectory(prefix="codenav-c-bench-") as tmp:
        root = Path(tmp) / "corpus"
        files = make_corpus(source, root)
        defs = single_definitions(root)
        runtime = open_runtime(Path(tmp) / "data")
        try:
            nav, index_seconds = index_corpus(runtime, root, REPO)
            size = sum((root / f).stat().st_size for f in files)
            results = {
                "corpus": {
                    "source": str(source),
                    "files": len(files),
                    "megabytes": round(size / 1e6, 2),
                    "global_single_definitions": len(defs),
                    "index_seconds": round(index_seconds, 2),
                },
                "go_to_definition": bench_definitions(nav, root, defs, args.symbols, rng),
                "find_references": bench_references(nav, root, defs, args.symbols, rng),
            }
            nav.close()
        finally:
            runtime.close()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "codenav_c_bench.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
