"""What several benches share: a runtime over a fresh data dir, and precision/recall figures.

Imported by the bench scripts as a sibling module (`python bench/x.py` puts bench/ on sys.path).
"""

from __future__ import annotations

from pathlib import Path

from codewell.core.settings import Settings
from codewell.runtime import Runtime


def open_runtime(data: Path) -> Runtime:
    """The real services over `data` (SQLite database inside it), migrated."""
    settings = Settings.from_env({}, data_dir=data, database_url=f"sqlite:///{data}/codewell.db")
    runtime = Runtime.open(settings)
    runtime.db.upgrade()
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
