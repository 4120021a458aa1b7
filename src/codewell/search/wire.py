"""What travels between the web tier and a searcher replica: actors, search results and held repositories.

Plain JSON (orjson) over the internal HTTP API of `codewell searcher` (search/replica.py). A result's lines are
read here, on the replica: a `LineSource` maps the replica's shard, which does not travel.

A search answer travels **framed** when the web tier asks for it (`"frame": 2`): one line of JSON (the counts and
flags, and the files as columns: repository, id, path, ..., ranking key, line count, where the file ends), a newline
(orjson never writes one), then every file whole in the REST answer's shape (`{"repository", ..., "lineMatches"}`),
one JSON object after another. The web tier decodes the first line only, builds each file from its columns without
reading its lines, and copies each file's bytes into its own answer as they came (`orjson.Fragment`,
search/results.py `RawFile`): a count:all of 1,731 lines in 382 files is neither decoded nor encoded again there.
A replica that does not know the frame asked for answers plain JSON, which the web tier still reads.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import numpy as np
import orjson

from codewell.core.actors import INTERNAL, Actor, ActorKind
from codewell.search.results import FileMatch, IndexStatus, RawFile, RowLines, SearchResults, file_json

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

# The frame a web tier asks for (`"frame": FRAME_VERSION` in the search body) and the media type of such answers:
# version 1 (each file's lines alone after a head of rows) is no longer asked for; a replica answers it plain.
FRAME_VERSION = 2
FRAMED_MEDIA_TYPE = "application/vnd.codewell.search-frame.v2"
# Where the frame's files start, in a decoded frame's head (set by `_unframe`, never sent).
_BLOB = "_blob"
# A frame's file columns, in the order `_frame_files` reads them.
_COLUMNS = ("repo", "repo_id", "path", "commit", "language", "path_match", "score", "order", "lines", "end")
_OPEN, _CLOSE = ord("{"), ord("}")


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
    labels = {str(n): label for n, label in f.labels.items()}
    lines = [[m.line_number, m.line, [list(r) for r in m.ranges]] for m in f.line_matches]
    return [f.repo, repo_id, f.path, f.commit, f.language, f.path_match, f.score, list(f.order), labels, lines]


def _encode_answer(results: SearchResults, files: list[list[Any]], held: Iterable[int]) -> dict[str, Any]:
    return {
        "files": files,
        "match_count": results.match_count,
        "limit_hit": results.limit_hit,
        "timed_out": results.timed_out,
        "count_given": results.count_given,
        "held": encode_ids(held),
    }


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
        source=RowLines(lines),  # read as they came: most are only rendered again
    )
    f.order = tuple(order)
    return int(repo_id), f


def frame_results(results: SearchResults, repo_ids: Mapping[str, int], held: Iterable[int]) -> bytes:
    """`encode_results` as a frame (see the module's docstring): the head's line, then each file whole."""
    parts: list[bytes] = []
    columns: dict[str, list[Any]] = {name: [] for name in _COLUMNS}
    labels: dict[str, dict[str, str]] = {}
    offset = 0
    for k, f in enumerate(results.files):
        raw = orjson.dumps(file_json(f))
        offset += len(raw)
        parts.append(raw)
        for name, value in zip(
            _COLUMNS,
            (f.repo, repo_ids.get(f.repo, -1), f.path, f.commit, f.language, f.path_match, f.score, f.order,
             f.line_count, offset),
            strict=True,
        ):  # fmt: skip
            columns[name].append(value)
        if f.labels:
            labels[str(k)] = {str(n): label for n, label in f.labels.items()}
    head = _encode_answer(results, [], held)
    head["files"] = columns
    head["labels"] = labels
    return orjson.dumps(head) + b"\n" + b"".join(parts)


def _frame_files(head: Mapping[str, Any], blob: bytes) -> tuple[list[FileMatch], list[int]]:
    """A frame's files from its columns, each keeping its bytes (`RawFile`); ValueError if the columns or the
    files' bytes do not line up. The bytes of a file are not parsed here (that is what the frame saves): a replica
    holds the internal credential, and each file is checked only to lie within the frame as one JSON object."""
    columns = head["files"]
    repos, repo_ids, paths, commits, languages, path_matches, scores, orders, counts, ends = (
        columns[name] for name in _COLUMNS
    )
    if len(repo_ids) != len(repos):
        raise ValueError("a frame's file columns differ in length")  # the others: zip(strict=True) below
    files: list[FileMatch] = []
    start, end_of_blob = 0, len(blob)
    # One pass without a function call per file: ~1 µs a file, where decoding rows took ~4 µs.
    for repo, path, commit, language, path_match, score, order, count, end in zip(
        repos, paths, commits, languages, path_matches, scores, orders, counts, ends, strict=True
    ):
        if not (start < end <= end_of_blob and blob[start] == _OPEN and blob[end - 1] == _CLOSE):
            raise ValueError("a file lies outside the frame")
        f = FileMatch(
            repo, path, commit, language, None, path_match, score, None, source=RawFile(blob[start:end], count)
        )
        f.order = tuple(order)
        files.append(f)
        start = end
    if start != end_of_blob:
        raise ValueError("a frame holds bytes past its last file")
    for k, labels in head.get("labels", {}).items():
        files[int(k)].labels = {int(n): str(label) for n, label in labels.items()}
    return files, [int(rid) for rid in repo_ids]


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
    """A framed answer's head, with its files kept aside for `decode_results` (ValueError if it is no frame)."""
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
    if blob is None:
        decoded = [_decode_file(row) for row in data["files"]]
        files, repo_ids = [f for _, f in decoded], [rid for rid, _ in decoded]
    else:
        try:
            files, repo_ids = _frame_files(data, blob)
        except IndexError as exc:
            raise ValueError("a frame's labels name a file it does not hold") from exc
    results = SearchResults(
        files,
        int(data["match_count"]),
        bool(data["limit_hit"]),
        bool(data["timed_out"]),
        [],
        count_given=bool(data.get("count_given", False)),
    )
    return results, repo_ids, decode_ids(str(data.get("held", "")))


def encode_status(s: IndexStatus) -> list[Any]:
    indexed_at = s.indexed_at.isoformat() if s.indexed_at else None
    return [s.repo, s.state, s.branches, s.documents, s.content_bytes, s.index_bytes, indexed_at, s.error]


def decode_status(row: list[Any]) -> IndexStatus:
    repo, state, branches, documents, content, index, indexed_at, error = row
    when = datetime.fromisoformat(indexed_at) if indexed_at else None
    return IndexStatus(repo, state, dict(branches), documents, content, index, when, error)
