"""What several benches share: a runtime over a fresh data dir, a corpus indexed by codenav, precision/recall.

Imported by the bench scripts as a sibling module (`python bench/x.py` puts bench/ on sys.path).
"""

from __future__ import annotations

import time
from pathlib import Path

from codewell.capabilities import CAPABILITIES
from codewell.codenav.service import CodeNavService
from codewell.core.actors import INTERNAL
from codewell.core.settings import Settings
from codewell.repos.service import register_local_repo
from codewell.runtime import Runtime


def open_runtime(data: Path) -> Runtime:
    """The real services over `data` (SQLite database inside it), migrated, knowing the declared capabilities
    (their job kinds: a sync runs as a job) without wiring their listeners."""
    settings = Settings.from_env({}, data_dir=data, database_url=f"sqlite:///{data}/codewell.db")
    runtime = Runtime.open(settings)
    runtime.db.upgrade()
    runtime.capabilities = CAPABILITIES
    return runtime


def precision_recall(tp: int, fp: int, fn: int) -> dict[str, float | int]:
    """Precision and recall (4 decimals; 0 when nothing was found or expected) with their counts."""
    return {
        "precision": round(tp / max(1, tp + fp), 4),
        "recall": round(tp / max(1, tp + fn), 4),
        "true_positives": tp,
        "false_positives": fp,
        "false_negatives": fn,
    }


def index_corpus(runtime: Runtime, root: Path, name: str) -> tuple[CodeNavService, float]:
    """Register the git repository at `root` as `name` and build the symbol index of its head: (codenav, seconds)."""
    repo = register_local_repo(runtime, root, name)
    nav = runtime.get(CodeNavService)
    start = time.perf_counter()
    nav.index_revision(repo, nav.repos.resolve(INTERNAL, name).commit).close()
    return nav, time.perf_counter() - start
