"""What travels between the web tier and a searcher replica: actors, search results and held repositories.

Plain JSON (orjson) over the internal HTTP API of `codewell searcher` (search/replica.py). A result's lines are
read here, on the replica: a `LineSource` maps the replica's shard, which does not travel.

A search answer travels **framed** when the web tier asks for it (`"frame": 1`): one line of JSON (the files,
counts and flags), a newline (orjson never writes one), then every file's lines already in the REST answer's shape
(`lineMatches`), one JSON array after another; each file row names its array's byte range and line count. The web
tier decodes the first line only and copies each array into its own answer as it came (`orjson.Fragment`,
search/results.py `RawLines`): a page of 500 lines is neither decoded nor encoded again there. A replica that does
not know the frame answers plain JSON, which the web tier still reads.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import numpy as np
import orjson

from codewell.core.actors import INTERNAL, Actor, ActorKind
from codewell.search.results import FileMatch, IndexStatus, RawLines, RowLines, SearchResults, lines_json

__all__ = [
    "FRAMED_MEDIA_TYPE",
    "FRAME_VERSION",
    "decode_actor",
    "decode_answer",
    "decode_ids",
    "decode_results",
    "decode_status",
    "encode_actor",
    "encode_ids",
    "encode_results",
    "encode_status",
    "frame_results",
]

# The frame a web tier asks for (`"frame": FRAME_VERSION` in the search body) and the media type of such answers.
FRAME_VERSION = 1
FRAMED_MEDIA_TYPE = "application/vnd.codewell.search-frame"
# Where the frame's lines start, in a decoded frame's head (set by `unframe`, never sent).
_BLOB = "_blob"


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


def _encode_file_head(f: FileMatch, repo_id: int) -> list[Any]:
    labels = {str(n): label for n, label in f.labels.items()}
    return [f.repo, repo_id, f.path, f.commit, f.language, f.path_match, f.score, list(f.order), labels]


def _encode_file(f: FileMatch, repo_id: int) -> list[Any]:
    lines = [[m.line_number, m.line, [list(r) for r in m.ranges]] for m in f.line_matches]
    return [*_encode_file_head(f, repo_id), lines]


def _encode_answer(results: SearchResults, files: list[list[Any]], held: Iterable[int]) -> dict[str, Any]:
    return {
        "files": files,
        "match_count": results.match_count,
        "limit_hit": results.limit_hit,
        "timed_out": results.timed_out,
        "count_given": results.count_given,
        "held": encode_ids(held),
    }


def _decode_file(row: list[Any], blob: bytes | None) -> tuple[int, FileMatch]:
    repo, repo_id, path, commit, language, path_match, score, order, labels, lines = row
    if blob is None:
        source: RowLines | RawLines = RowLines(lines)  # read as they came: most are only rendered again
    else:
        start, end, count = (int(v) for v in lines)
        raw = blob[start:end]
        if not (0 <= start <= end <= len(blob) and raw[:1] == b"[" and raw[-1:] == b"]"):
            raise ValueError("a file's lines lie outside the frame")
        source = RawLines(raw, count)  # copied into the REST answer as they came (results.py `lines_fragment`)
    f = FileMatch(
        repo,
        path,
        commit,
        language,
        None,
        path_match,
        score,
        {int(n): label for n, label in labels.items()},
        source=source,
    )
    f.order = tuple(order)
    return int(repo_id), f


def frame_results(results: SearchResults, repo_ids: Mapping[str, int], held: Iterable[int]) -> bytes:
    """`encode_results` as a frame (see the module's docstring): the head's line, then each file's lines."""
    parts: list[bytes] = []
    files: list[list[Any]] = []
    offset = 0
    for f in results.files:
        raw = orjson.dumps(lines_json(f.line_matches))
        row = _encode_file_head(f, repo_ids.get(f.repo, -1))
        row.append([offset, offset + len(raw), f.line_count])
        files.append(row)
        parts.append(raw)
        offset += len(raw)
    head = _encode_answer(results, files, held)
    return orjson.dumps(head) + b"\n" + b"".join(parts)


def decode_answer(content_type: str, data: bytes) -> dict[str, Any]:
    """A replica's search answer as `decode_results` reads it: a frame, or plain JSON (a replica of a release
    before frames). ValueError if it is neither."""
    if content_type.split(";", maxsplit=1)[0].strip() == FRAMED_MEDIA_TYPE:
        return _unframe(data)
    payload = orjson.loads(data)
    if not isinstance(payload, dict):
        raise ValueError("answered something that is not a JSON object")
    return payload


def _unframe(data: bytes) -> dict[str, Any]:
    """A framed answer's head, with its lines kept aside for `decode_results` (ValueError if it is no frame)."""
    end = data.find(b"\n")
    if end < 0:
        raise ValueError("a framed answer without its head's end")
    head = orjson.loads(data[:end])
    if not isinstance(head, dict):
        raise ValueError("a framed answer whose head is not a JSON object")
    head[_BLOB] = data[end + 1 :]
    return head


def encode_results(results: SearchResults, repo_ids: Mapping[str, int], held: Iterable[int]) -> dict[str, Any]:
    """A replica's answer: its files in its order (with their repositories' ids, for de-duplication while a
    repository is held twice), its counts and flags, and every repository it holds (what it covered)."""
    return _encode_answer(results, [_encode_file(f, repo_ids.get(f.repo, -1)) for f in results.files], held)


def decode_results(data: Mapping[str, Any]) -> tuple[SearchResults, list[int], np.ndarray]:
    """(results, each file's repository id, the ids the replica holds), of a plain answer or a frame's head."""
    blob = data.get(_BLOB)
    decoded = [_decode_file(row, blob) for row in data["files"]]
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
