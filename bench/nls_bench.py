"""nls_search quality and speed on Python nobody here wrote: docstring sentences as questions.

Corpus: the sources of `click`, `jinja2` and `requests` from the venv's site-packages, committed to a git
repository with every function's docstring removed (its lines blanked, so line numbers stay), then registered
and indexed like any other repository (search shard, codenav symbols, nls chunks: the listeners run). For every
function or method with a docstring whose first sentence has at least 4 words, that sentence is the question
and the function is the answer. nls_search: a hit when a result chunk of the right file covers the function's
`def` line (rank = chunk rank). keyword_search, given the same sentence (without query syntax characters): a hit
when a result file is the right one with a matching line inside the function (rank = file rank).
Printed: recall@10 and MRR@10 for both, p50/p95 latency of nls_search at the service API, index build times.

With --dense (site config `search.nls.dense` on; nls/dense.py): the chunks are embedded after the nls build
(CPU seconds, chunks per CPU second, and what the 1,340,122 chunks of the Linux source would cost), and every
question is asked twice in one process: BM25 alone (switch off) and hybrid (switch on); also the dense
ranking alone (cosine order), and the CPU cost of one question's cosines over a Linux-sized vector file
(measured on a tenth of it, times ten). Run it on one BLAS thread so that "per core" means one core:

    OPENBLAS_NUM_THREADS=1 nice -n 10 .venv/bin/python bench/nls_bench.py --dense

    .venv/bin/python bench/nls_bench.py [--limit 400] [--packages click,jinja2,requests] [--dense]
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import re
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
from codewell.nls.dense import VECTORS
from codewell.nls.encoder import DIMENSIONS
from codewell.nls.service import NlsService, parse_question
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


def content_words(question: str) -> str:
    return " ".join(parse_question(question).words)


def set_dense(runtime: Runtime, on: bool) -> None:
    runtime.site_config.write(runtime.config.model_copy(update={"search_nls_dense": on}))


def measure_dense(
    runtime: Runtime,
    nls: NlsService,
    repo: Repo,
    commit: str,
    labels: list[tuple[str, str, int, int]],
    ask: Callable[[tuple[str, str, int, int], list[float]], int | None],
    chunk_tokens: int,
) -> dict[str, object]:
    """Embed the chunks (timed), then BM25 alone, hybrid and cosine alone over the same questions."""
    dense_module.CHUNK_TOKENS = chunk_tokens
    folder = nls.folder(repo, commit)
    (folder / VECTORS).unlink(missing_ok=True)  # the listener may have embedded them while the switch was on
    set_dense(runtime, True)
    nls.dense.encoder()  # loaded outside the timing (~0.5 s, once per process)
    cpu, wall = time.process_time(), time.perf_counter()
    chunks = nls.embed_revision(repo, commit)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    index = nls._load(folder)
    assert index is not None
    assert chunks == len(index)
    out: dict[str, object] = {
        "chunks": chunks,
        "chunk_tokens": dense_module.CHUNK_TOKENS,
        "embed_cpu_seconds": round(cpu, 1),
        "embed_wall_seconds": round(wall, 1),
        "chunks_per_cpu_second": round(chunks / cpu, 1),
        "linux_projected_cpu_hours": round(LINUX_CHUNKS * cpu / chunks / 3600, 1),
        "linux_vectors_mb": round(LINUX_CHUNKS * DIMENSIONS * 2 / 1e6),
    }
    for name, on in (("bm25", False), ("hybrid", True)):
        set_dense(runtime, on)
        latencies: list[float] = []
        ranks = [ask(label, latencies) for label in labels]
        latencies.sort()
        out[name] = {
            "recall@10": round(recall(ranks), 3),
            "mrr@10": round(mrr(ranks), 3),
            "p50_ms": round(statistics.median(latencies), 2),
        }
    # The dense ranking alone (cosine order), embedding the whole question or (as nls_search does) its content
    # words only.
    for name, text in (("dense_alone", lambda q: q), ("dense_alone_content_words", content_words)):
        cosine_ranks: list[int | None] = []
        for question, path, line, _ in labels:
            cosines = nls.dense.cosines(folder, index, text(question))
            assert cosines is not None
            top = np.argsort(-cosines)[:10]
            chunks_found = [index.chunk(int(i)) for i in top]
            cosine_ranks.append(
                next((r + 1 for r, c in enumerate(chunks_found) if c.path == path and c.start <= line <= c.end), None)
            )
        out[name] = {"recall@10": round(recall(cosine_ranks), 3), "mrr@10": round(mrr(cosine_ranks), 3)}
    # One question's cosine pass over a Linux-sized float16 vector file: a tenth of it, in memory, times ten.
    tenth = np.random.default_rng(17).standard_normal((LINUX_CHUNKS // 10, DIMENSIONS)).astype(np.float16)
    query = np.ones(DIMENSIONS, dtype=np.float32)
    times = []
    for _ in range(5):
        t = time.process_time()  # CPU time: the wall time of a memory-bound loop swings with the machine's load
        for start in range(0, len(tenth), 1 << 16):
            np.asarray(tenth[start : start + (1 << 16)], dtype=np.float32) @ query
        times.append((time.process_time() - t) * 1000 * 10)
    out["linux_cosine_cpu_ms_projected"] = round(statistics.median(times), 1)
    set_dense(runtime, False)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=400)
    parser.add_argument("--packages", default="click,jinja2,requests")
    parser.add_argument("--dense", action="store_true", help="also embed the chunks and compare hybrid with BM25")
    parser.add_argument("--chunk-tokens", type=int, default=dense_module.CHUNK_TOKENS, help="tokens embedded per chunk")
    args = parser.parse_args()
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

        dense = measure_dense(runtime, nls, repo, commit, labels, ask, args.chunk_tokens) if args.dense else {}
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
