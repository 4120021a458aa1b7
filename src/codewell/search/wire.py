"""What travels between the web tier and a searcher replica: actors, search results and held repositories.

Plain JSON (orjson) over the internal HTTP API of `codewell searcher` (search/replica.py). A result's lines are
read here, on the replica: a `LineSource` maps the replica's shard, which does not travel.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import numpy as np

from codewell.core.actors import INTERNAL, Actor, ActorKind
from codewell.search.results import FileMatch, IndexStatus, RowLines, SearchResults

__all__ = [
    "decode_actor",
    "decode_ids",
    "decode_results",
    "decode_status",
    "encode_actor",
    "encode_ids",
    "encode_results",
    "encode_status",
]


def encode_actor(actor: Actor) -> dict[str, Any]:
    """Who asks, as the web tier authenticated them: the replica decides permissions for the same actor with
    the same database (`authz.ensure`), so it reads exactly what the web replica would."""
    return {
        "kind": actor.kind.value,
        "user_id": actor.user_id,
        "username": actor.username,
        "site_admin": actor.site_admin,
        "service_account": actor.service_account,
        "scopes": sorted(actor.scopes),
        "via": actor.via,
        "client": actor.client,
    }


def decode_actor(data: Mapping[str, Any]) -> Actor:
    # INTERNAL arrives too (`codewell search`, the service's own work on a worker): whoever holds the internal
    # credential is trusted with the actor it names, and no request's actor is ever INTERNAL (core/actors.py).
    kind = ActorKind(str(data["kind"]))
    if kind is ActorKind.INTERNAL:
        return INTERNAL
    user_id = data.get("user_id")
    return Actor(
        kind,
        int(user_id) if user_id is not None else None,
        str(data.get("username", "")),
        bool(data.get("site_admin", False)),
        bool(data.get("service_account", False)),
        frozenset(str(s) for s in data.get("scopes", ())),
        str(data.get("via", "")),
        str(data.get("client", "")),
    )


def encode_ids(ids: Iterable[int]) -> str:
    """A set of repository ids as a packed bitmap (base64): 10,000 repositories in ~1.7 KB."""
    values = np.fromiter(ids, dtype=np.int64)
    if values.size == 0:
        return ""
    mask = np.zeros(int(values.max()) + 1, dtype=bool)
    mask[values] = True
    return base64.b64encode(np.packbits(mask).tobytes()).decode("ascii")


def decode_ids(text: str) -> np.ndarray:
    """The ids `encode_ids` packed, as a sorted int64 array."""
    if not text:
        return np.zeros(0, dtype=np.int64)
    bits = np.unpackbits(np.frombuffer(base64.b64decode(text), dtype=np.uint8))
    return np.flatnonzero(bits).astype(np.int64)


def _encode_file(f: FileMatch, repo_id: int) -> list[Any]:
    lines = [[m.line_number, m.line, [list(r) for r in m.ranges]] for m in f.line_matches]
    labels = {str(n): label for n, label in f.labels.items()}
    return [f.repo, repo_id, f.path, f.commit, f.language, f.path_match, f.score, list(f.order), labels, lines]


def _decode_file(row: list[Any]) -> tuple[int, FileMatch]:
    repo, repo_id, path, commit, language, path_match, score, order, labels, lines = row
    f = FileMatch(
        repo,
        path,
        commit,
        language,
        None,
        path_match,
        score,
        {int(n): label for n, label in labels.items()},
        source=RowLines(lines),  # read as they came: most are only rendered again (results.py `lines_json`)
    )
    f.order = tuple(order)
    return int(repo_id), f


def encode_results(results: SearchResults, repo_ids: Mapping[str, int], held: Iterable[int]) -> dict[str, Any]:
    """A replica's answer: its files in its order (with their repositories' ids, for de-duplication while a
    repository is held twice), its counts and flags, and every repository it holds (what it covered)."""
    return {
        "files": [_encode_file(f, repo_ids.get(f.repo, -1)) for f in results.files],
        "match_count": results.match_count,
        "limit_hit": results.limit_hit,
        "timed_out": results.timed_out,
        "count_given": results.count_given,
        "held": encode_ids(held),
    }


def decode_results(data: Mapping[str, Any]) -> tuple[SearchResults, list[int], np.ndarray]:
    """(results, each file's repository id, the ids the replica holds)."""
    decoded = [_decode_file(row) for row in data["files"]]
    results = SearchResults(
        [f for _, f in decoded],
        int(data["match_count"]),
        bool(data["limit_hit"]),
        bool(data["timed_out"]),
        [],
        count_given=bool(data.get("count_given", False)),
    )
    return results, [rid for rid, _ in decoded], decode_ids(str(data.get("held", "")))


def encode_status(s: IndexStatus) -> list[Any]:
    indexed_at = s.indexed_at.isoformat() if s.indexed_at else None
    return [s.repo, s.state, s.branches, s.documents, s.content_bytes, s.index_bytes, indexed_at, s.error]


def decode_status(row: list[Any]) -> IndexStatus:
    repo, state, branches, documents, content, index, indexed_at, error = row
    when = datetime.fromisoformat(indexed_at) if indexed_at else None
    return IndexStatus(repo, state, dict(branches), documents, content, index, when, error)
