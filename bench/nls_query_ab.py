"""nls_search's query path, old against new, interleaved in one process on an existing data dir (#17).

Old: the re-scoring of before the stored texts (kept below as `OldNlsService._rank`): each of the top 200
candidates' blobs read by id and the chunk's bytes decoded and lower-cased for the exact-identifier and phrase
boosts. New: `NlsService` as it is (the boosts match the chunk's lower-cased text stored in the index; blobs
are read only for the hits the answer shows). Both load the same index, so the index must be of format 3.

For each of codenav_linux's 50 questions: each path once untimed (cold reads), then `--repeat` runs of each,
alternating which goes first; a question's figure is the median of its runs (the machine is shared). Printed:
p50/p95 wall and CPU milliseconds per path and their ratio, blob reads per question, and whether both paths
return the same hits with the same scores.

    nice -n 10 .venv/bin/python bench/nls_query_ab.py --data /var/tmp/<your copy of linux-sub-data>
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pygit2

from benchkit import open_runtime
from codenav_linux import QUESTIONS, pct
from codewell.accounts.service import AccountService
from codewell.capabilities import wire
from codewell.core.actors import INTERNAL, Actor
from codewell.nls import service as nls_service
from codewell.nls.index import BYTE_END, BYTE_START, END, PATH, START, NlsIndex, terms
from codewell.nls.service import ChunkLines, NlsHit, NlsResults, NlsService, _is_identifier, _Question
from codewell.repos.service import Repo

_CANDIDATES = 200


class OldNlsService(NlsService):
    """NlsService with the re-scoring of before the stored texts (git HEAD dd94463), for the A/B only."""

    blob_reads = 0
    # Did the last question have more chunks tied at the 200th candidate's score than fit (which of them are
    # candidates is then up to argpartition)?
    tied_at_the_last_place = False

    def _rank(self, repo: Repo, commit: str, index: NlsIndex, q: _Question) -> list[NlsHit]:
        scores = index.scores(q.tokens)
        if q.file is not None:
            scores = np.where(index.path_mask(q.file), scores, 0.0)
        top = min(_CANDIDATES, len(scores))
        if top == 0:
            return []
        picked = np.argpartition(-scores, top - 1)[:top] if top < len(scores) else np.arange(len(scores))
        order = picked[np.argsort(-scores[picked], kind="stable")]
        last = scores[order[-1]]
        OldNlsService.tied_at_the_last_place = bool(
            last > 0 and np.count_nonzero(scores == last) > np.count_nonzero(scores[order] == last)
        )
        mirror = pygit2.Repository(str(repo.mirror_path))
        blobs: dict[int, bytes] = {}
        stems = set(terms(" ".join(q.words)))
        phrase = " ".join(w.lower() for w in q.words if not _is_identifier(w))
        identifiers = [ident.lower() for ident in q.identifiers]
        out: list[NlsHit] = []
        for i in order:
            base = float(scores[i])
            if base <= 0:
                break
            row = index.table[int(i)].tolist()
            file_id = row[PATH]
            if file_id not in blobs:
                blobs[file_id] = mirror.odb.read(pygit2.Oid(hex=index.blobs[file_id]))[1]
                OldNlsService.blob_reads += 1
            start, end = row[START], row[END]
            raw = blobs[file_id][row[BYTE_START] : row[BYTE_END]]
            lines = [line.removesuffix("\r") for line in raw.decode("utf-8", "replace").split("\n")]
            lines = lines[: end - start + 1]
            text = "\n".join(lines).lower() if identifiers or phrase else ""
            path, symbols = index.paths[file_id], index.symbols.get(int(i), ())
            boost = 1.0
            boost += 0.5 * sum(1 for ident in identifiers if ident in text)
            if len(phrase.split()) > 1 and phrase in text:
                boost += 0.3
            symbol_stems = set(terms(" ".join(symbols)))
            if symbol_stems:
                boost += 0.6 * len(stems & symbol_stems) / max(1, len(stems))
            boost += 0.2 * len(stems & set(terms(path))) / max(1, len(stems))
            hit_lines = ChunkLines.known(lines)
            out.append(NlsHit(repo.name, path, commit, start, end, base * boost, hit_lines, symbols))
        return out


class CountingBlobs(nls_service._Blobs):
    reads = 0

    def read(self, blob: str) -> bytes:
        before = len(self._read)
        data = super().read(blob)
        CountingBlobs.reads += len(self._read) - before
        return data


def _key(results: NlsResults) -> list[tuple[str, int, int, float]]:
    return sorted((h.path, h.start, h.end, round(h.score, 9)) for h in results.hits)


def _shown(results: NlsResults) -> list[tuple[str, int, list[str]]]:
    return [(h.path, h.start, h.lines) for h in nls_service.shown_hits(results.hits, results.limit)]


def _shown_scores(results: NlsResults) -> list[float]:
    return [round(h.score, 9) for h in nls_service.shown_hits(results.hits, results.limit)]


def _shown_up_to_ties(results: NlsResults) -> list[tuple[float, frozenset[tuple[str, int]]]]:
    """The shown hits as groups of equal score (the order inside a group is the tie-break's)."""
    groups: dict[float, set[tuple[str, int]]] = {}
    for h in nls_service.shown_hits(results.hits, results.limit):
        groups.setdefault(round(h.score, 9), set()).add((h.path, h.start))
    return [(score, frozenset(group)) for score, group in groups.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="a data dir with a format-3 nls index")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    runtime = open_runtime(args.data)
    wire(runtime)
    accounts = runtime.get(AccountService)
    user = accounts.find_by_username("bench") or accounts.create_user(INTERNAL, "bench")
    actor: Actor = accounts.actor_for(user, via="access_token")
    new = runtime.get(NlsService)
    old = OldNlsService(runtime, new.root)
    nls_service._Blobs = CountingBlobs  # type: ignore[misc]
    paths: dict[str, Callable[[str], NlsResults]] = {
        "old": lambda q: old.search(actor, q),
        "new": lambda q: new.search(actor, q),
    }
    wall: dict[str, list[float]] = {"old": [], "new": []}
    cpu: dict[str, list[float]] = {"old": [], "new": []}
    same_hits = same_shown = same_shown_up_to_ties = same_shown_scores = 0
    differ_only_by_ties_at_the_last_place = 0
    reads = {"old": 0, "new": 0}
    for search in paths.values():
        search(QUESTIONS[0])  # loads the index (cached afterwards)
    for question in QUESTIONS:
        OldNlsService.blob_reads = CountingBlobs.reads = 0
        answers = {name: fn(question) for name, fn in paths.items()}  # untimed: cold reads
        reads["old"] += OldNlsService.blob_reads
        reads["new"] += CountingBlobs.reads
        same = _key(answers["old"]) == _key(answers["new"])
        same_hits += same
        differ_only_by_ties_at_the_last_place += not same and OldNlsService.tied_at_the_last_place
        same_shown += _shown(answers["old"]) == _shown(answers["new"])
        same_shown_up_to_ties += _shown_up_to_ties(answers["old"]) == _shown_up_to_ties(answers["new"])
        same_shown_scores += _shown_scores(answers["old"]) == _shown_scores(answers["new"])
        runs: dict[str, list[tuple[float, float]]] = {"old": [], "new": []}
        for r in range(args.repeat):
            for name in ("old", "new") if r % 2 else ("new", "old"):
                w, c = time.perf_counter(), time.process_time()
                paths[name](question)
                runs[name].append((time.perf_counter() - w, time.process_time() - c))
        for name, timed in runs.items():
            wall[name].append(statistics.median(t for t, _ in timed))
            cpu[name].append(statistics.median(c for _, c in timed))
    n = len(QUESTIONS)
    out: dict[str, Any] = {
        "questions": n,
        "repeat": args.repeat,
        "load": os.getloadavg(),
        "wall": {name: pct(times) for name, times in wall.items()},
        "cpu": {name: pct(times) for name, times in cpu.items()},
        "blob_reads_per_question": {name: round(count / n, 1) for name, count in reads.items()},
        "same_hits_and_scores": f"{same_hits}/{n}",
        "hits_differ_where_argpartition_picked_among_ties_at_200th": differ_only_by_ties_at_the_last_place,
        "same_shown_hits_and_lines": f"{same_shown}/{n}",
        "same_shown_hits_up_to_the_order_of_equal_scores": f"{same_shown_up_to_ties}/{n}",
        "same_scores_of_the_shown_hits_in_order": f"{same_shown_scores}/{n}",
    }
    for kind in ("wall", "cpu"):
        out[f"{kind}_p50_old_over_new"] = round(out[kind]["old"]["p50_ms"] / out[kind]["new"]["p50_ms"], 2)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
