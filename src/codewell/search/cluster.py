"""The web tier's side of a cluster (CODEWELL_SEARCHERS=database): every search goes to every live searcher
replica at once, over HTTP with the internal credential, and their answers merge into the one answer a single
process would give over the same indexes.

- **Who is asked**: the replicas the database lists as alive (`JobService.replicas`: heartbeat rows, no
  membership protocol of our own), draining ones included (they answer for what they hold until it has moved).
- **Partial, never wrong**: a replica that errs or does not answer by the query's deadline leaves the answer
  partial, and the answer names the readable repositories that replica owns (`SearchResults.unsearched`);
  the others' answers stand. Nothing waits past the deadline plus a small grace for the transport.
- **Held twice while moving**: a repository moving to a new owner is answered by its old one until the new
  one has built it; while both hold it, only the files of its preferred holder (the owner if it holds it,
  else the next by rendezvous rank) are kept, so nothing is counted twice.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import urllib3
from urllib3.exceptions import ConnectTimeoutError, HTTPError, MaxRetryError, NewConnectionError
from urllib3.exceptions import TimeoutError as TransportTimeout

from codewell.jobs.placement import Replica, ranked
from codewell.search.results import FileMatch, SearchResults

__all__ = [
    "INTERNAL_PREFIX",
    "Decoder",
    "Fanout",
    "Reply",
    "coverage",
    "internal_token",
    "merge_files",
    "preferred_holders",
]

log = logging.getLogger(__name__)

# The internal API's path prefix: served only by `codewell searcher` on its own port, never by the public app.
INTERNAL_PREFIX = "/.internal"
# Time a replica's answer may take past the query's deadline (the transport, the encoding).
TRANSPORT_GRACE_SECONDS = 0.5
# A replica that cannot be connected to within this is down for this query.
CONNECT_TIMEOUT_SECONDS = 1.0
_TOKEN_CONTEXT = b"codewell searcher internal credential v1"


def internal_token(secret: bytes) -> str:
    """The credential the web tier presents to searcher replicas, derived from the instance secret that every
    process of the deployment shares (CODEWELL_SHARED_DIR): nothing to configure, and it changes with it."""
    return hmac.new(secret, _TOKEN_CONTEXT, hashlib.sha256).hexdigest()


# Turns a replica's answer (its content type, its body) into the payload a caller reads; ValueError if it cannot.
Decoder = Callable[[str, bytes], Mapping[str, Any]]


def json_object(_content_type: str, data: bytes) -> Mapping[str, Any]:
    """The default decoder: the body is one JSON object."""
    try:
        payload = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ValueError("answered something that is not JSON") from exc
    if not isinstance(payload, dict):
        raise ValueError("answered something that is not a JSON object")
    return payload


class ReplicaError(Exception):
    """A replica's answer could not be used (its reason is what the partial answer says)."""


@dataclass(frozen=True, slots=True)
class Reply:
    replica: Replica
    payload: Mapping[str, Any] | None
    error: str = ""  # why `payload` is None


class Fanout:
    """Posts one request to many replicas at once and collects what arrives by the deadline."""

    def __init__(self, token: str) -> None:
        self._token = token
        # urllib3 itself, not requests above it: requests' session added ~1.5 ms of CPU to each replica's
        # round trip (1.5 ms → 3.1 ms for a rare literal on loopback), most of the fan-out's own overhead.
        self._http = urllib3.PoolManager(num_pools=64, maxsize=64, retries=False)
        self._headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self._pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="search-fanout")
        self._lock = threading.Lock()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._http.clear()

    def post_all(
        self,
        replicas: Sequence[Replica],
        path: str,
        body: Mapping[str, Any],
        deadline: float,
        decode: Decoder = json_object,
    ) -> list[Reply]:
        """`body` to every replica's `path`; each reply (its body through `decode`), or why there is none, in the
        replicas' order."""
        data = orjson.dumps(body)
        if len(replicas) == 1:
            # One replica: asked from this thread (a pool hand-off costs more than the request's own overhead).
            return [self._one(replicas[0], path, data, deadline, decode)]
        futures: list[Future[Mapping[str, Any]]] = [
            self._pool.submit(self._post, replica, path, data, deadline, decode) for replica in replicas
        ]
        done, _ = wait(futures, timeout=max(0.0, deadline - time.monotonic()) + TRANSPORT_GRACE_SECONDS)
        replies = []
        for replica, future in zip(replicas, futures, strict=True):
            if future not in done:
                # Its request times out by itself (the same deadline); the answer does not wait for it.
                future.cancel()
                replies.append(Reply(replica, None, "did not answer before the deadline"))
                continue
            try:
                replies.append(Reply(replica, future.result()))
            except ReplicaError as exc:
                replies.append(Reply(replica, None, str(exc)))
            except HTTPError as exc:
                replies.append(Reply(replica, None, _transport_reason(exc)))
        return replies

    def _one(self, replica: Replica, path: str, data: bytes, deadline: float, decode: Decoder) -> Reply:
        try:
            return Reply(replica, self._post(replica, path, data, deadline, decode))
        except ReplicaError as exc:
            return Reply(replica, None, str(exc))
        except HTTPError as exc:
            return Reply(replica, None, _transport_reason(exc))

    def _post(self, replica: Replica, path: str, data: bytes, deadline: float, decode: Decoder) -> Mapping[str, Any]:
        remaining = max(0.05, deadline - time.monotonic()) + TRANSPORT_GRACE_SECONDS
        response = self._http.request(
            "POST",
            replica.address.rstrip("/") + INTERNAL_PREFIX + path,
            body=data,
            headers=self._headers,
            timeout=urllib3.Timeout(connect=min(CONNECT_TIMEOUT_SECONDS, remaining), read=remaining),
            redirect=False,
        )
        if response.status != 200:
            raise ReplicaError(f"answered HTTP {response.status}")
        try:
            return decode(response.headers.get("content-type", ""), response.data)
        except ValueError as exc:
            raise ReplicaError(str(exc) or "answered something unreadable") from exc


def _transport_reason(exc: HTTPError) -> str:
    cause = exc.reason if isinstance(exc, MaxRetryError) and exc.reason is not None else exc
    if isinstance(cause, (NewConnectionError, ConnectTimeoutError)):
        return "could not be reached"
    if isinstance(cause, TransportTimeout):
        return "did not answer before the deadline"
    return "failed to answer"


def preferred_holders(held: Mapping[str, np.ndarray]) -> dict[int, str]:
    """For each repository held by more than one answering replica, the one whose files count (its owner by
    rendezvous rank among the holders). Only those repositories are hashed: normally none."""
    if len(held) < 2:
        return {}
    size = max((int(ids.max()) + 1 for ids in held.values() if ids.size), default=0)
    counts = np.zeros(size, dtype=np.int32)
    for ids in held.values():
        counts[ids] += 1
    twice = np.flatnonzero(counts > 1).tolist()
    if not twice:
        return {}
    holders: dict[int, list[str]] = {rid: [] for rid in twice}
    for name, ids in held.items():
        for rid in np.intersect1d(ids, twice, assume_unique=True).tolist():
            holders[rid].append(name)
    return {rid: ranked(f"repo:{rid}", names)[0] for rid, names in holders.items()}


def coverage(readable: np.ndarray, held: Mapping[str, np.ndarray]) -> np.ndarray:
    """The readable repository ids that no answering replica holds (sorted)."""
    if not readable.size:
        return readable
    # A mask over ids, not set operations: ~50 µs for 10,000 repositories where np.unique took ~1.5 ms.
    covered = np.zeros(int(readable.max()) + 1, dtype=bool)
    for ids in held.values():
        covered[ids[ids < covered.size]] = True
    return np.sort(readable[~covered[readable]])


def merge_files(
    answers: Sequence[tuple[str, SearchResults, list[int]]],
    preferred: Mapping[int, str],
    limit: int | None,
    symbol_limit: int,
) -> tuple[list[FileMatch], int, bool]:
    """Merge replicas' files into one process's order: definitions of `type:symbol` first (by closeness), then
    the rest by the ranking keys their replicas computed (search/ranking.py `score`: a file's key depends on it
    alone; ties keep repository-name order). With a `limit`, files are taken in repository-name order until it
    is reached, as one process collects them, and only those are sorted, here (each replica scored its files
    beside its own symbol tables: the web tier reads none); of the definitions, those of the first
    `symbol_limit` files.

    Returns (files, the match count, whether the limit cut anything)."""
    symbols: list[FileMatch] = []
    text: list[FileMatch] = []
    count = 0
    for name, results, repo_ids in answers:
        count += results.match_count
        for f, rid in zip(results.files, repo_ids, strict=True):
            if preferred.get(rid, name) != name:
                count -= f.line_count  # held twice while moving: the other holder's answer counts
                continue
            (symbols if f.labels else text).append(f)
    text.sort(key=lambda f: f.repo)
    cut = False
    if limit is not None:
        lines = sum(f.line_count for f in symbols)
        for k, f in enumerate(text):
            if lines >= limit:
                cut = True
                count -= sum(g.line_count for g in text[k:])
                text = text[:k]
                break
            lines += f.line_count
    text.sort(key=lambda f: f.order, reverse=True)  # ranking's order (`ranking.sort_by_rank`), best first
    symbols.sort(key=lambda f: f.repo)
    symbols.sort(key=lambda f: f.order)
    # One process keeps the first `limit` definitions of all; each replica kept its own first `limit`.
    room = symbol_limit
    kept_symbols: list[FileMatch] = []
    for f in symbols:
        if room <= 0:
            count -= f.line_count
            cut = True
            continue
        kept_symbols.append(f)
        room -= f.line_count
    return kept_symbols + text, count, cut
