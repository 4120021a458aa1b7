"""Code navigation quality on TypeScript nobody here wrote, with scip-typescript as the independent ground truth.

Corpus: the `src/` TypeScript of an npm package that ships its sources (default `mobx@6.13.5`: 57 files with
relative imports, an `internal.ts` barrel of `export *` re-exports, classes and functions), fetched with
`npm pack` into $CODEWELL_BENCH_DIR/ts (default /var/tmp/codewell-bench/ts), committed to a git repository and
registered like any other. `@sourcegraph/scip-typescript` (pinned below, installed with npm into
$CODEWELL_BENCH_DIR/ts/tools, never into the repository) indexes the same files (`--infer-tsconfig`), and
`bench/scip_to_json.js` decodes its index.scip with the protobuf classes scip-typescript ships (kept in
$CODEWELL_BENCH_DIR/ts per package and scip-typescript version; `--fresh-truth` indexes again). Symbols local
to a function (SCIP `local N`, parameters, type parameters) and object-literal properties are left out, and
`new Atom()` counts for class Atom (SCIP files it under the constructor). The tool takes a name, not a
position, so:

- go_to_definition: usages (non-definition occurrences, as written with their dotted prefix: `this.x`,
  `ns.f`) whose symbol has exactly one definition inside the corpus, kept only when every such usage in that
  file means the same symbol; the answer's top candidate must be that definition (path and line of the name).
- find_references: definitions whose name is defined once in their file; the truth is the symbol's other
  occurrences (the definition excluded), compared as (path, line) pairs: precision and recall.

Precise indexes stay off (codewell answers syntactically), so the truth stays independent.

    .venv/bin/python bench/codenav_ts_bench.py [--package mobx@6.13.5] [--symbols 300] [--seed 16]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from benchkit import index_corpus, open_runtime, precision_recall
from codewell.codenav.service import CodeNavService
from codewell.core.actors import INTERNAL
from codewell.core.errors import CodewellError

RESULTS = Path(__file__).parent / ".results"
DECODER = Path(__file__).parent / "scip_to_json.js"
BENCH_DIR = Path(os.environ.get("CODEWELL_BENCH_DIR", "/var/tmp/codewell-bench")) / "ts"
TOOLS = BENCH_DIR / "tools"
SCIP_TYPESCRIPT = "@sourcegraph/scip-typescript@0.4.0"
REPO = "bench/ts"
SOURCE_SUFFIXES = (".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@b",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@b",
    "PATH": "/usr/bin:/bin",
}
_IDENTIFIER = re.compile(r"[A-Za-z_$][\w$]*")
_CHAIN = re.compile(r"((?:[A-Za-z_$][\w$]*\.)+)$")
# Symbols scoped to one function: SCIP locals, parameters `f().(x)` and type parameters `[T]`; and the
# properties of object literals (`{ type: 'Literal' }`), which scip-typescript names with a numbered meta
# descriptor (`type0:`): members of anonymous types, not declarations anyone navigates to.
_FUNCTION_SCOPED = re.compile(r"^local |\((?!\+?\d*\))[^)]*\)|\[[^\]]*\]|\d+:$")

_CONSTRUCTOR = "#`<constructor>`()."
_OWNER = re.compile(r"([A-Za-z_$][\w$]*)#[^#/]*$")  # the class (or interface) of a member's SCIP symbol
Spot = tuple[str, int]  # (path, 1-based line)


def package_source(spec: str) -> Path:
    """The sources of the npm package `spec` (name@version), downloaded once with `npm pack`: its `src/` when it
    ships one, else every JavaScript file it publishes (a CommonJS package such as express: `index.js`, `lib/`)."""
    target = BENCH_DIR / spec.replace("/", "_")
    if target.is_dir():
        return target
    download = BENCH_DIR / "dl"
    download.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(["npm", "pack", spec], cwd=download, check=True, capture_output=True, text=True).stdout
    archive = download / out.strip().splitlines()[-1]
    with tarfile.open(archive) as tar:
        files = [m for m in tar.getmembers() if m.isfile()]
        members = [m for m in files if m.name.startswith("package/src/")]
        if not members:
            members = [m for m in files if m.name.endswith(SOURCE_SUFFIXES) and not m.name.endswith(".d.ts")]
        if not members:
            sys.exit(f"{spec} ships no sources: pick a package that publishes its TypeScript or JavaScript")
        tar.extractall(download / spec.replace("/", "_"), members=members, filter="data")
    shutil.move(download / spec.replace("/", "_") / "package", target)
    return target


def scip_typescript() -> Path:
    main = TOOLS / "node_modules/@sourcegraph/scip-typescript/dist/src/main.js"
    if not main.is_file():
        TOOLS.mkdir(parents=True, exist_ok=True)
        if not (TOOLS / "package.json").is_file():
            (TOOLS / "package.json").write_text('{"private": true}\n')
        npm = ["npm", "install", "--no-audit", "--no-fund", SCIP_TYPESCRIPT]
        subprocess.run(npm, cwd=TOOLS, check=True, stdout=subprocess.DEVNULL)
    return main


def make_corpus(source: Path, root: Path) -> list[str]:
    shutil.copytree(source, root)
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.suffix in SOURCE_SUFFIXES)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "corpus"]):
        subprocess.run(["git", *args], cwd=root, check=True, env=GIT_ENV)
    return files


def scip_documents(root: Path, indexer: Path, scratch: Path, cache: Path | None) -> list[dict[str, object]]:
    """scip-typescript's index of a copy of the corpus (its inferred tsconfig.json stays out of the repository)."""
    if cache is not None and cache.is_file():
        kept: list[dict[str, object]] = json.loads(cache.read_text())["documents"]
        return kept
    copy = scratch / "scip"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".git"))
    infer = ["--infer-tsconfig"]
    if any(p.suffix in (".js", ".jsx", ".mjs", ".cjs") for p in copy.rglob("*")):
        # scip-typescript infers `allowJs` only where no .ts file exists; a JavaScript project that ships .d.ts
        # files would be indexed without its JavaScript.
        options = {"allowJs": True, "checkJs": True, "noEmit": True, "module": "esnext", "target": "es2022"}
        tsconfig = {"compilerOptions": {**options, "moduleResolution": "node"}}
        (copy / "tsconfig.json").write_text(json.dumps(tsconfig))
        infer = []
    subprocess.run(
        ["node", str(indexer), "index", *infer, "--output", "index.scip"],
        cwd=copy,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    decoded = subprocess.run(
        ["node", str(DECODER), str(TOOLS), str(copy / "index.scip")], check=True, capture_output=True, text=True
    ).stdout
    if cache is not None:
        cache.write_text(decoded)
    documents: list[dict[str, object]] = json.loads(decoded)["documents"]
    return documents


class Truth:
    """The SCIP occurrences of the corpus: (path, line, name, symbol, is definition, dotted prefix as written)."""

    def __init__(self, root: Path, documents: list[dict[str, object]]) -> None:
        self.occurrences: list[tuple[str, int, str, str, bool, str]] = []
        for doc in documents:
            path = str(doc["path"])
            lines = (root / path).read_text(encoding="utf-8", errors="replace").split("\n")
            for scip_symbol, roles, span in doc["occurrences"]:  # type: ignore[attr-defined]
                symbol = str(scip_symbol)
                if _FUNCTION_SCOPED.search(symbol) or symbol.endswith("/"):
                    continue
                line, column, end = span[0], span[1], span[-1]
                if len(span) == 4 and span[2] != line:  # a name never spans lines
                    continue
                text = lines[line][column:end] if line < len(lines) else ""
                if not _IDENTIFIER.fullmatch(text):
                    continue
                owner = symbol.removesuffix(_CONSTRUCTOR)
                if not roles & 1 and owner != symbol and owner.endswith(("/" + text, "#" + text, "." + text)):
                    # scip-typescript files `new Atom()` under Atom's constructor; a reader means the class.
                    symbol = owner + "#"
                chain = _CHAIN.search(lines[line][:column])
                prefix = chain.group(1) if chain else ""
                self.occurrences.append((path, line + 1, text, symbol, bool(roles & 1), prefix))
        definitions: dict[str, list[Spot]] = {}
        for path, line, _name, symbol, is_definition, _prefix in self.occurrences:
            if is_definition:
                definitions.setdefault(symbol, []).append((path, line))
        # Overloads and declaration merging give a symbol several definitions: only single ones count. A
        # constructor is its class's (above), not a name of its own.
        self.definition = {
            symbol: spots[0]
            for symbol, spots in definitions.items()
            if len(spots) == 1 and not symbol.endswith(_CONSTRUCTOR)
        }

    def usages(self) -> dict[tuple[str, str], set[str]]:
        """(path, symbol as written) → the SCIP symbols its non-definition occurrences there mean."""
        meaning: dict[tuple[str, str], set[str]] = {}
        for path, _line, name, symbol, is_definition, prefix in self.occurrences:
            if not is_definition:
                meaning.setdefault((path, prefix + name), set()).add(symbol)
        return meaning

    def references(self, symbol: str) -> set[Spot]:
        spot = self.definition[symbol]
        return {(p, n) for p, n, _, s, d, _prefix in self.occurrences if s == symbol and not d} - {spot}


def bench_definitions(
    nav: CodeNavService, truth: Truth, wanted: int, rng: random.Random, shown: int = 25
) -> dict[str, object]:
    usages = sorted(
        (key, next(iter(symbols)))
        for key, symbols in truth.usages().items()
        if len(symbols) == 1 and next(iter(symbols)) in truth.definition
    )
    rng.shuffle(usages)
    correct = 0
    times: list[float] = []
    misses: list[dict[str, object]] = []
    cpu: list[float] = []
    for (path, written), symbol in usages[:wanted]:
        start, start_cpu = time.perf_counter(), time.process_time()
        try:
            top = nav.go_to_definition(INTERNAL, REPO, path, written).candidates[0]
            got: Spot = (top.path, top.line)
        except CodewellError:
            got = ("", 0)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        if got == truth.definition[symbol]:
            correct += 1
        elif len(misses) < shown:
            misses.append({"usage": path, "symbol": written, "truth": truth.definition[symbol], "got": got})
    return {
        "symbols": min(wanted, len(usages)),
        "top1_accuracy": round(correct / max(1, min(wanted, len(usages))), 4),
        "p50_ms": round(statistics.median(times) * 1000, 2) if times else None,
        # CPU time of the calling process: steadier than wall time on a machine others load.
        "cpu_p50_ms": round(statistics.median(cpu) * 1000, 2) if cpu else None,
        "misses": misses,
    }


def bench_references(
    nav: CodeNavService, truth: Truth, wanted: int, rng: random.Random, shown: int = 25
) -> dict[str, object]:
    names_in_file: dict[tuple[str, str], int] = {}
    by_symbol: dict[str, str] = {}
    for path, _line, name, symbol, is_definition, _prefix in truth.occurrences:
        if is_definition:
            names_in_file[(path, name)] = names_in_file.get((path, name), 0) + 1
            by_symbol[symbol] = name
    candidates = sorted(
        symbol
        for symbol, (path, _line) in truth.definition.items()
        if symbol in by_symbol and names_in_file[(path, by_symbol[symbol])] == 1
    )
    rng.shuffle(candidates)
    tp = fp = fn = done = not_found = 0
    times: list[float] = []
    cpu: list[float] = []
    worst: list[tuple[int, dict[str, object]]] = []
    for symbol in candidates[:wanted]:
        path, line = truth.definition[symbol]
        name = by_symbol[symbol]
        # A member is named with its class, as an agent asking about it would (`Component.error`).
        owner = _OWNER.search(symbol)
        if owner and not symbol.endswith("#"):
            name = f"{owner.group(1)}.{name}"
        expected = truth.references(symbol)
        start, start_cpu = time.perf_counter(), time.process_time()
        try:
            got = nav.find_references(INTERNAL, REPO, path, name, limit=1000)
        except CodewellError:
            # Unlike the Python and C benches, a definition codewell does not know counts (all its references
            # missed): object-literal members and other shapes it does not extract are part of the measure.
            ours: set[Spot] = set()
            not_found += 1
        else:
            # Mentions in comments and strings are labelled as such, not offered as references.
            ours = set() if got.text_matches else {(f.path, n) for f in got.files for n, _col, _ in f.lines}
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        done += 1
        tp += len(ours & expected)
        fp += len(ours - expected)
        fn += len(expected - ours)
        if ours != expected:
            difference = {
                "def": f"{path}:{line} {name}",
                "missed_count": len(expected - ours),
                "extra_count": len(ours - expected),
                "missed": sorted(expected - ours)[: 4 if shown <= 25 else None],
                "extra": sorted(ours - expected)[: 4 if shown <= 25 else None],
            }
            worst.append((len(expected ^ ours), difference))
    return {
        "symbols": done,
        **precision_recall(tp, fp, fn),
        "definitions_not_found": not_found,
        "p50_ms": round(statistics.median(times) * 1000, 2) if times else None,
        "cpu_p50_ms": round(statistics.median(cpu) * 1000, 2) if cpu else None,
        # The largest differences first: they say what to fix next.
        "differences": [d for _, d in sorted(worst, key=lambda w: -w[0])[:shown]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--package", default="mobx@6.13.5", help="an npm package (name@version) that ships src/")
    parser.add_argument("--symbols", type=int, default=300)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument(
        "--misses", action="store_true", help="list every miss and difference in full (not the first 25)"
    )
    parser.add_argument("--fresh-truth", action="store_true", help="run scip-typescript again (not the kept index)")
    args = parser.parse_args()
    if shutil.which("node") is None or shutil.which("npm") is None:
        sys.exit("node and npm are needed (scip-typescript is an npm package)")
    rng = random.Random(args.seed)
    shown = args.symbols if args.misses else 25
    source = package_source(args.package)
    indexer = scip_typescript()
    with tempfile.TemporaryDirectory(prefix="codenav-ts-bench-") as tmp:
        root = Path(tmp) / "corpus"
        files = make_corpus(source, root)
        start = time.perf_counter()
        kept = BENCH_DIR / f"scip-{args.package.replace('/', '_')}-{SCIP_TYPESCRIPT.rsplit('@', 1)[-1]}.json"
        truth = Truth(root, scip_documents(root, indexer, Path(tmp), None if args.fresh_truth else kept))
        scip_seconds = time.perf_counter() - start
        runtime = open_runtime(Path(tmp) / "data")
        try:
            nav, index_seconds = index_corpus(runtime, root, REPO)
            size = sum((root / f).stat().st_size for f in files)
            results = {
                "corpus": {
                    "package": args.package,
                    "truth": SCIP_TYPESCRIPT,
                    "files": len(files),
                    "megabytes": round(size / 1e6, 2),
                    "scip_single_definitions": len(truth.definition),
                    "scip_seconds": round(scip_seconds, 2),
                    "index_seconds": round(index_seconds, 2),
                    "seed": args.seed,
                },
                "go_to_definition": bench_definitions(nav, truth, args.symbols, rng, shown),
                "find_references": bench_references(nav, truth, args.symbols, rng, shown),
            }
            nav.close()
        finally:
            runtime.close()
    RESULTS.mkdir(exist_ok=True)
    name = args.package.split("@")[-2].replace("/", "_") if "@" in args.package[1:] else args.package
    (RESULTS / f"codenav_ts_bench-{name}-{args.seed}.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
