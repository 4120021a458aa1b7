"""nls_search quality and speed on Python nobody here wrote: docstring sentences as questions.

Corpus: the sources of `click`, `jinja2` and `requests` from the venv's site-packages, committed to a git
repository with every function's docstring removed (its lines blanked, so line numbers stay), then registered
and indexed like any other repository (search shard, codenav symbols, nls chunks: the listeners run). For every
function or method with a docstring whose first sentence has at least 4 words, that sentence is the question
and the function is the answer. nls_search: a hit when a result chunk of the right file covers the function's
`def` line (rank = chunk rank). keyword_search, given the same sentence (without query syntax characters): a hit
when a result file is the right one with a matching line inside the function (rank = file rank).
Printed: recall@10 and MRR@10 for both, p50/p95 latency of nls_search at the service API, index build times.

With --dense (site config `search.nls.dense` on; nls/dense.py): BM25 alone (switch off), then for each model of
--models (`static`: nls/static.py's static embeddings re-ranking BM25's best matches; `minilm`: all-MiniLM fused by
reciprocal rank, the switch's model): the chunks embedded after the nls build (CPU seconds, chunks per CPU second,
and what the 1,340,122 chunks of the Linux source would cost at that rate), every question asked with the switch
on (hybrid), and the dense ranking alone (cosine order); for static, also the other weights of --static-weights;
for minilm, the CPU cost of one question's cosines over a Linux-sized vector file (a tenth of it, times ten).
Run it on one BLAS thread so that "per core" means one core:

    OPENBLAS_NUM_THREADS=1 RAYON_NUM_THREADS=1 nice -n 10 .venv/bin/python bench/nls_bench.py --dense

With --cost PATH (a git repository, branch main; e.g. a large part of the Linux tree): only the builds, each timed
alone in one process (CPU of the process and its children, and wall): search's shard, nls's BM25 index, and the
static vectors (--no-compounds: whole identifiers left out), with the vectors' cost as a share of the shard's.

    .venv/bin/python bench/nls_bench.py [--limit 400] [--packages click,jinja2,requests] [--dense [--models ...]]
    .venv/bin/python bench/nls_bench.py --cost /var/tmp/codewell-bench/linux [--no-compounds]
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from codewell.capabilities import wire
from codewell.core.actors import INTERNAL
from codewell.core.errors import CodewellError
from codewell.core.settings import Settings
from codewell.nls import dense as dense_module
from codewell.nls.dense import STATIC_VECTORS, VECTORS, DenseRanker, StaticRanker
from codewell.nls.encoder import DIMENSIONS
from codewell.nls.index import NlsIndex
from codewell.nls.service import NlsService
from codewell.nls.static import STATIC_DIMENSIONS
from codewell.repos.service import Repo, RepoService, register_local_repo
from codewell.runtime import Runtime
from codewell.search.service import SearchService

RESULTS = Path(__file__).parent / ".results"
SITE = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
REPO = "bench/nls"
_SYNTAX = re.compile(r"[\"'()/\\:`*\[\]{}|]")
LINUX_CHUNKS = 1_340_122


def first_sentence(doc: str) -> str:
    text = " ".join(doc.strip().split("\n\n")[0].split())
    return re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0].rstrip(".")


def strip_and_label(path: Path, rel: str) -> list[tuple[str, str, int, int]]:
    """Blank every docstring of `path` in place; return (question, path, def line, end line) per function."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    lines = source.split("\n")
    labels: list[tuple[str, str, int, int]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Module):
            continue
        body = node.body
        if not body or not isinstance(body[0], ast.Expr) or not isinstance(body[0].value, ast.Constant):
            continue
        if not isinstance(body[0].value.value, str):
            continue
        doc = body[0]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            question = first_sentence(body[0].value.value)
            if len(question.split()) >= 4:
                labels.append((question, rel, node.lineno, node.end_lineno or node.lineno))
        indent = " " * doc.col_offset
        for i in range(doc.lineno - 1, (doc.end_lineno or doc.lineno)):
            lines[i] = ""
        lines[doc.lineno - 1] = indent + "..."
    path.write_text("\n".join(lines), encoding="utf-8")
    return labels


def make_corpus(root: Path, packages: list[str]) -> list[tuple[str, str, int, int]]:
    labels: list[tuple[str, str, int, int]] = []
    for package in packages:
        shutil.copytree(SITE / package, root / package, ignore=shutil.ignore_patterns("__pycache__"))
    for path in sorted(root.rglob("*.py")):
        labels.extend(strip_and_label(path, path.relative_to(root).as_posix()))
    env = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "corpus"]):
        subprocess.run(["git", *args], cwd=root, check=True, env={**env, "PATH": "/usr/bin:/bin"})
    return labels


def recall(ranks: list[int | None]) -> float:
    return sum(r is not None for r in ranks) / len(ranks)


def mrr(ranks: list[int | None]) -> float:
    return sum(1 / r for r in ranks if r is not None) / len(ranks)


def set_dense(runtime: Runtime, on: bool) -> None:
    runtime.site_config.write(runtime.config.model_copy(update={"search_nls_dense": on}))


def _ask_all(
    labels: list[tuple[str, str, int, int]], ask: Callable[[tuple[str, str, int, int], list[float]], int | None]
) -> dict[str, float]:
    latencies: list[float] = []
    ranks = [ask(label, latencies) for label in labels]
    latencies.sort()
    return {
        "recall@10": round(recall(ranks), 3),
        "mrr@10": round(mrr(ranks), 3),
        "p50_ms": round(statistics.median(latencies), 2),
    }


def _alone(
    ranker: DenseRanker | StaticRanker, folder: Path, index: NlsIndex, labels: list[tuple[str, str, int, int]]
) -> dict[str, float]:
    """The dense ranking alone (cosine order), as nls_search embeds the question (filters removed)."""
    cosine_ranks: list[int | None] = []
    for question, path, line, _ in labels:
        cosines = ranker.cosines(folder, index, question)
        if cosines is None:
            cosine_ranks.append(None)
            continue
        top = np.argsort(-cosines)[:10]
        chunks_found = [index.chunk(int(i)) for i in top]
        cosine_ranks.append(
            next((r + 1 for r, c in enumerate(chunks_found) if c.path == path and c.start <= line <= c.end), None)
        )
    return {"recall@10": round(recall(cosine_ranks), 3), "mrr@10": round(mrr(cosine_ranks), 3)}


def _cosine_cost(dimensions: int) -> float:
    """One question's cosine pass over a Linux-sized float16 vector file: a tenth of it, in memory, times ten."""
    tenth = np.random.default_rng(17).standard_normal((LINUX_CHUNKS // 10, dimensions)).astype(np.float16)
    query = np.ones(dimensions, dtype=np.float32)
    times = []
    for _ in range(5):
        t = time.process_time()  # CPU time: the wall time of a memory-bound loop swings with the machine's load
        for start in range(0, len(tenth), 1 << 16):
            np.asarray(tenth[start : start + (1 << 16)], dtype=np.float32) @ query
        times.append((time.process_time() - t) * 1000 * 10)
    return round(statistics.median(times), 1)


def measure_dense(
    runtime: Runtime,
    nls: NlsService,
    repo: Repo,
    commit: str,
    labels: list[tuple[str, str, int, int]],
    ask: Callable[[tuple[str, str, int, int], list[float]], int | None],
    chunk_tokens: int,
    models: list[str],
    static_weights: list[float],
) -> dict[str, object]:
    """BM25 alone (switch off), then for each model: embed the chunks (timed), hybrid and cosine alone over the
    same questions. `static` (nls/static.py, the default) and `minilm` (nls/encoder.py)."""
    dense_module.CHUNK_TOKENS = chunk_tokens
    folder = nls.folder(repo, commit)
    default, model_in_use = runtime.config.search_nls_dense, nls.dense
    set_dense(runtime, False)
    out: dict[str, object] = {"bm25": _ask_all(labels, ask)}
    for model in models:
        ranker: DenseRanker | StaticRanker = StaticRanker() if model == "static" else DenseRanker()
        nls.dense = ranker
        (folder / VECTORS).unlink(missing_ok=True)  # the listener may have embedded them while the switch was on
        (folder / STATIC_VECTORS).unlink(missing_ok=True)
        set_dense(runtime, True)
        ranker.encoder()  # loaded outside the timing (once per process)
        cpu, wall = time.process_time(), time.perf_counter()
        chunks = nls.embed_revision(repo, commit)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        index = nls._load(folder)
        assert index is not None
        assert chunks == len(index)
        dims = STATIC_DIMENSIONS if model == "static" else DIMENSIONS
        out[model] = {
            "chunks": chunks,
            **({"chunk_tokens": dense_module.CHUNK_TOKENS} if model == "minilm" else {}),
            "embed_cpu_seconds": round(cpu, 2),
            "embed_wall_seconds": round(wall, 2),
            "chunks_per_cpu_second": round(chunks / max(cpu, 1e-6), 1),
            "linux_projected_cpu_hours": round(LINUX_CHUNKS * cpu / chunks / 3600, 3),
            "linux_vectors_mb": round(LINUX_CHUNKS * dims * 2 / 1e6),
            "hybrid": _ask_all(labels, ask),
            "dense_alone": _alone(ranker, folder, index, labels),
        }
        if isinstance(ranker, StaticRanker):
            # The re-ranking's weight (the default is dense.STATIC_WEIGHT); no cosine pass over every chunk to
            # project: a question reads the rows of BM25's best STATIC_CANDIDATES chunks only.
            for weight in static_weights:
                ranker.weight = weight
                out[f"static_weight_{weight}"] = _ask_all(labels, ask)
            ranker.weight = dense_module.STATIC_WEIGHT
        else:
            out[model]["linux_cosine_cpu_ms_projected"] = _cosine_cost(dims)  # type: ignore[index]
    set_dense(runtime, default)
    nls.dense = model_in_use
    return out


def _cpu() -> float:
    """CPU seconds of this process and of its children waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measure_cost(tree: Path, compounds: bool = True) -> dict[str, object]:
    """The build of the git repository at `tree` (branch main): search's shard, nls's BM25 index and the static
    vectors, each timed alone (CPU of this process and its children, and wall), and the static vectors' cost as
    a share of the shard's."""
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        settings = Settings.from_env({}, data_dir=data, database_url=f"sqlite:///{data}/codewell.db")
        runtime = Runtime.open(settings)
        runtime.db.upgrade()
        wire(runtime)
        set_dense(runtime, False)  # the registration's listeners build the nls index, not the vectors
        register_local_repo(runtime, tree, "bench/cost")
        repo = runtime.get(RepoService).get(INTERNAL, "bench/cost")
        commit = runtime.get(RepoService).resolve(INTERNAL, "bench/cost").commit
        search, nls = runtime.get(SearchService), runtime.get(NlsService)
        figures: dict[str, object] = {"tree": str(tree)}

        def timed(name: str, step: Callable[[], object]) -> None:
            cpu, wall = _cpu(), time.perf_counter()
            step()
            figures[f"{name}_cpu_seconds"] = round(_cpu() - cpu, 2)
            figures[f"{name}_wall_seconds"] = round(time.perf_counter() - wall, 2)

        timed("search_shard", lambda: search.index(repo, force=True))
        shutil.rmtree(nls.folder(repo, commit))
        timed("nls_bm25", lambda: nls.index_revision(repo, commit))
        ranker = StaticRanker()
        ranker.compounds = compounds
        figures["compounds"] = compounds
        nls.dense = ranker
        ranker.encoder()  # loaded outside the timing (once per process)
        set_dense(runtime, True)
        chunks: list[int] = []
        timed("static_vectors", lambda: chunks.append(nls.embed_revision(repo, commit)))
        figures["chunks"] = chunks[0]
        index = nls._load(nls.folder(repo, commit))
        assert index is not None
        figures["terms"] = len(index.model.vocab_dict)
        shard = float(figures["search_shard_cpu_seconds"])  # type: ignore[arg-type]
        static = float(figures["static_vectors_cpu_seconds"])  # type: ignore[arg-type]
        figures["static_share_of_shard_cpu"] = round(static / shard, 3)
        figures["static_share_of_shard_and_bm25_cpu"] = round(
            static / (shard + float(figures["nls_bm25_cpu_seconds"])),  # type: ignore[arg-type]
            3,
        )
        figures["static_chunks_per_cpu_second"] = round(chunks[0] / max(static, 1e-6))
        return figures


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=400)
    parser.add_argument("--packages", default="click,jinja2,requests")
    parser.add_argument("--dense", action="store_true", help="also embed the chunks and compare hybrid with BM25")
    parser.add_argument("--models", default="static,minilm", help="with --dense: the models compared (static,minilm)")
    parser.add_argument("--chunk-tokens", type=int, default=dense_module.CHUNK_TOKENS, help="tokens embedded per chunk")
    parser.add_argument("--static-weights", default="0.5,1.0", help="with --dense: other static weights to compare")
    parser.add_argument(
        "--cost", type=Path, help="only time the builds (shard, nls, static vectors) of this git repository"
    )
    parser.add_argument("--no-compounds", action="store_true", help="with --cost: leave whole identifiers out")
    return parser.parse_args()


def main() -> None:
    args = _arguments()
    if args.cost is not None:
        figures = measure_cost(args.cost, compounds=not args.no_compounds)
        print(json.dumps(figures, indent=2))
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "nls_bench_cost.json").write_text(json.dumps(figures, indent=2) + "\n")
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "corpus"
        labels = make_corpus(root, args.packages.split(","))
        random.Random(17).shuffle(labels)
        labels = labels[: args.limit]
        data = Path(tmp) / "data"
        data.mkdir()
        settings = Settings.from_env({}, data_dir=data, database_url=f"sqlite:///{data}/codewell.db")
        runtime = Runtime.open(settings)
        runtime.db.upgrade()
        wire(runtime)
        register_local_repo(runtime, root, REPO)
        repo = runtime.get(RepoService).get(INTERNAL, REPO)
        commit = runtime.get(RepoService).resolve(INTERNAL, REPO).commit
        search, nls = runtime.get(SearchService), runtime.get(NlsService)
        start = time.perf_counter()
        search.index(repo, force=True)  # the shard alone (listeners rerun but find their indexes built)
        shard_seconds = time.perf_counter() - start
        shutil.rmtree(nls.folder(repo, commit))
        start = time.perf_counter()
        nls.index_revision(repo, commit)
        nls_seconds = time.perf_counter() - start

        def ask(label: tuple[str, str, int, int], latencies: list[float]) -> int | None:
            question, path, line, _ = label
            t = time.perf_counter()
            hits = nls.search(INTERNAL, f"{question} repo:{REPO}").hits[:10]
            latencies.append((time.perf_counter() - t) * 1000)
            return next((i + 1 for i, h in enumerate(hits) if h.path == path and h.start <= line <= h.end), None)

        dense = (
            measure_dense(
                runtime,
                nls,
                repo,
                commit,
                labels,
                ask,
                args.chunk_tokens,
                args.models.split(","),
                [float(w) for w in args.static_weights.split(",") if w],
            )
            if args.dense
            else {}
        )
        nls_ranks: list[int | None] = []
        kw_ranks: list[int | None] = []
        latencies: list[float] = []
        for label in labels:
            question, path, line, end = label
            nls_ranks.append(ask(label, latencies))
            try:
                files = search.search(INTERNAL, f"repo:^bench/nls$ {_SYNTAX.sub(' ', question)}").files[:10]
            except CodewellError:
                files = []
            kw_ranks.append(
                next(
                    (
                        i + 1
                        for i, f in enumerate(files)
                        if f.path == path and any(line <= m.line_number <= end for m in f.line_matches)
                    ),
                    None,
                )
            )

    latencies.sort()
    results = {
        "questions": len(labels),
        "packages": args.packages,
        "nls": {"recall@10": round(recall(nls_ranks), 3), "mrr@10": round(mrr(nls_ranks), 3)},
        "keyword": {"recall@10": round(recall(kw_ranks), 3), "mrr@10": round(mrr(kw_ranks), 3)},
        "nls_p50_ms": round(statistics.median(latencies), 2),
        "nls_p95_ms": round(latencies[int(len(latencies) * 0.95) - 1], 2),
        "shard_index_seconds": round(shard_seconds, 2),
        "nls_index_seconds": round(nls_seconds, 2),
        **({"dense": dense} if dense else {}),
    }
    print(json.dumps(results, indent=2))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "nls_bench.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
