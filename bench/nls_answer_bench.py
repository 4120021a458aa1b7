"""nls_search's default answer as an agent reads it: its size, and where the repository a question names ranks.

Corpus: five projects nobody here wrote, each its own repository (click, jinja2, requests and rich from the venv's
site-packages as `pallets/click`, `pallets/jinja`, `psf/requests`, `textualize/rich`; express from a
node_modules folder as `expressjs/express` when one is given or found), plus codewell's own `src/` and `bench/`
as `codewell/codewell` (the distraction the issue met: codewell's bench files answered a cobra question).
Every repository is registered and indexed like any other (search shard, codenav symbols, nls chunks).

Questions are the kind an agent asks, some naming a repository. Printed per question: characters of the
rendered default answer (the text of the MCP tool `nls_search`), files with text, files listed, and for a
question naming a repository the repository of the first file block. Summary: max / p50 characters, and how
many naming questions got their repository first.

    .venv/bin/python bench/nls_answer_bench.py [--express PATH/TO/node_modules/express]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from codewell.capabilities import wire
from codewell.core.actors import INTERNAL
from codewell.core.settings import Settings
from codewell.nls.render import render
from codewell.nls.service import NlsService
from codewell.repos.service import register_local_repo
from codewell.runtime import Runtime

RESULTS = Path(__file__).parent / ".results"
SITE = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
PROJECT = Path(__file__).resolve().parent.parent
EXPRESS_GUESSES = [
    PROJECT / "tests/mcp_clients/node_modules/express",
    Path("/tmp/ci1/tests/mcp_clients/node_modules/express"),
]
PACKAGES = {"pallets/click": "click", "pallets/jinja": "jinja2", "psf/requests": "requests", "textualize/rich": "rich"}

# (question, the repository it names or None)
QUESTIONS: list[tuple[str, str | None]] = [
    ("where does click split raw command line arguments into options", "pallets/click"),
    ("how does click generate the bash completion script", "pallets/click"),
    ("how does the click test runner invoke a command", "pallets/click"),
    ("where does jinja compile a template to python source", "pallets/jinja"),
    ("how does requests retry a failed connection", "psf/requests"),
    ("where does rich render a table to the console", "textualize/rich"),
    ("how does express set the content type of a response", "expressjs/express"),
    ("where is the etag of a response body computed in express", "expressjs/express"),
    ("how are cookies persisted between requests in a session", None),
    ("where are environment variables read for default option values", None),
    ("how does the template loader find templates in a package", None),
    ("how is the progress bar drawn", None),
    ("where are redirects followed and the authorization header removed", None),
    ("how is syntax highlighting applied to code", None),
]


def commit_folder(root: Path) -> None:
    env = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "corpus"]):
        subprocess.run(["git", *args], cwd=root, check=True, env={**env, "PATH": "/usr/bin:/bin"})


def copy_sources(corpus: Path, express: Path | None, *, smoke: bool) -> dict[str, Path]:
    """The repositories' folders under `corpus` (with --smoke: click and codewell's bench/ only)."""
    # This file itself is left out of codewell's copy: its questions would answer themselves.
    ignore = shutil.ignore_patterns("__pycache__", "*.so", ".results", Path(__file__).name)
    sources: dict[str, Path] = {}
    for name, package in ({"pallets/click": "click"} if smoke else PACKAGES).items():
        sources[name] = corpus / package
        shutil.copytree(SITE / package, sources[name] / package, ignore=ignore)
    if express is not None and not smoke:
        sources["expressjs/express"] = corpus / "express"
        shutil.copytree(express, sources["expressjs/express"], ignore=ignore)
    own = sources["codewell/codewell"] = corpus / "codewell"
    if not smoke:
        shutil.copytree(PROJECT / "src", own / "src", ignore=ignore)
    shutil.copytree(PROJECT / "bench", own / "bench", ignore=ignore)
    return sources


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--express", type=Path, default=next((p for p in EXPRESS_GUESSES if p.is_dir()), None))
    parser.add_argument("--label", default="", help="a name for this run in the JSON summary")
    parser.add_argument(
        "--show", type=int, action="append", default=[], help="print the answer to question N (0-based)"
    )
    parser.add_argument("--smoke", action="store_true", help="smallest run: click and codewell's bench/ only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sources = copy_sources(Path(tmp) / "corpus", args.express, smoke=args.smoke)
        data = Path(tmp) / "data"
        data.mkdir()
        runtime = Runtime.open(Settings.from_env({}, data_dir=data, database_url=f"sqlite:///{data}/codewell.db"))
        runtime.db.upgrade()
        wire(runtime)
        for name, folder in sources.items():
            commit_folder(folder)
            register_local_repo(runtime, folder, name)  # the listeners build shard, symbols and nls chunks
        nls = runtime.get(NlsService)
        sizes: list[int] = []
        first_named = 0
        named = 0
        rows = []
        for number, (question, repo) in enumerate(QUESTIONS):
            if repo is not None and repo not in sources:
                continue
            start = time.perf_counter()
            results = nls.search(INTERNAL, question)
            text = render(results)
            ms = (time.perf_counter() - start) * 1000
            blocks = [line[2:].split(" – ")[0] for line in text.split("\n") if line.startswith("# ")]
            sizes.append(len(text))
            top = blocks[0] if blocks else None
            if repo is not None:
                named += 1
                first_named += top == repo
            rows.append({"question": question, "names": repo, "chars": len(text), "blocks": len(blocks), "top": top})
            if number in args.show:
                print(text, "\n" + "-" * 100)
            print(f"{len(text):6d} chars {len(blocks):3d} blocks {ms:6.0f} ms  top={top}  {question}")
        summary = {
            "label": args.label,
            "questions": len(sizes),
            "chars_max": max(sizes),
            "chars_p50": statistics.median(sizes),
            "named_first": f"{first_named}/{named}",
            "rows": rows,
        }
        print(json.dumps({k: v for k, v in summary.items() if k != "rows"}))
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "nls_answer_bench.json").write_text(json.dumps(summary, indent=2))
        runtime.close()


if __name__ == "__main__":
    main()
