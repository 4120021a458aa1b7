"""nls_search quality and speed on Python nobody here wrote: docstring sentences as questions.

Corpus: the sources of `click`, `jinja2` and `requests` from the venv's site-packages, committed to a git
repository with every function's docstring removed (its lines blanked, so line numbers stay), then registered
and indexed like any other repository (search shard, codenav symbols, nls chunks: the listeners run). For every
function or method with a docstring whose first sentence has at least 4 words, that sentence is the question
and the function is the answer. nls_search: a hit when a result chunk of the right file covers the function's
`def` line (rank = chunk rank). keyword_search, given the same sentence (without query syntax characters): a hit
when a result file is the right one with a matching line inside the function (rank = file rank).
Printed: recall@10 and MRR@10 for both, p50/p95 latency of nls_search at the service API, index build times.

    .venv/bin/python bench/nls_bench.py [--limit 400] [--packages click,jinja2,requests]
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
from pathlib import Path

from codewell.capabilities import wire
from codewell.core.actors import INTERNAL
from codewell.core.errors import CodewellError
from codewell.core.settings import Settings
from codewell.nls.service import NlsService
from codewell.repos.service import RepoService, register_local_repo
from codewell.runtime import Runtime
from codewell.search.service import SearchService

RESULTS = Path(__file__).parent / ".results"
SITE = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
REPO = "bench/nls"
_SYNTAX = re.compile(r"[\"'()/\\:`*\[\]{}|]")


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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=400)
    parser.add_argument("--packages", default="click,jinja2,requests")
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
        nls_ranks: list[int | None] = []
        kw_ranks: list[int | None] = []
        latencies: list[float] = []
        for question, path, line, end in labels:
            t = time.perf_counter()
            hits = nls.search(INTERNAL, f"{question} repo:{REPO}").hits[:10]
            latencies.append((time.perf_counter() - t) * 1000)
            nls_ranks.append(
                next((i + 1 for i, h in enumerate(hits) if h.path == path and h.start <= line <= h.end), None)
            )
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

    def recall(ranks: list[int | None]) -> float:
        return sum(r is not None for r in ranks) / len(ranks)

    def mrr(ranks: list[int | None]) -> float:
        return sum(1 / r for r in ranks if r is not None) / len(ranks)

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
    }
    print(json.dumps(results, indent=2))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "nls_bench.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
