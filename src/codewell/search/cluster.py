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
from operator import attrgetter
from typing import Any

import numpy as np
import orjson
import pycurl

from codewell.jobs.placement import Replica, ranked
from codewell.search.results import FileMatch, SearchResults

__all__ = [
    "INTERNAL_PREFIX",
    "Connections",
    "Decoder",
    "Fanout",
    "Reply",
    "TransportError",
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
# Sort keys of the merge (C getters: a lambda per file cost ~0.1 ms of a 382-file count:all).
_BY_REPO = attrgetter("repo")
_BY_ORDER = attrgetter("order")


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
        self._connections = Connections(token)
        self._pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="search-fanout")
        self._lock = threading.Lock()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._connections.close()

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
                replies.append(Reply(replica, None, LATE))
                continue
            try:
                replies.append(Reply(replica, future.result()))
            except (ReplicaError, TransportError) as exc:
                replies.append(Reply(replica, None, str(exc)))
        return replies

    def _one(self, replica: Replica, path: str, data: bytes, deadline: float, decode: Decoder) -> Reply:
        try:
            return Reply(replica, self._post(replica, path, data, deadline, decode))
        except (ReplicaError, TransportError) as exc:
            return Reply(replica, None, str(exc))

    def _post(self, replica: Replica, path: str, data: bytes, deadline: float, decode: Decoder) -> Mapping[str, Any]:
        until = max(time.monotonic() + 0.05, deadline) + TRANSPORT_GRACE_SECONDS
        address = replica.address.rstrip("/")
        status, content_type, content = self._connections.post(address, INTERNAL_PREFIX + path, data, until)
        if status != 200:
            raise ReplicaError(f"answered HTTP {status}")
        try:
            return decode(content_type, content)
        except ValueError as exc:
            raise ReplicaError(str(exc) or "answered something unreadable") from exc


UNREACHABLE = "could not be reached"
LATE = "did not answer before the deadline"
FAILED = "failed to answer"
# The largest answer a replica may send (a count:all of a common word over a replica's share: tens of MB at most).
_MAX_BODY_BYTES = 1 << 30
# Idle handles kept (each with its kept-alive connections): one per request in flight, more only after a burst.
_IDLE_HANDLES = 64


class TransportError(Exception):
    """A replica could not be asked or did not answer (its message is the reason the partial answer gives)."""


class Connections:
    """HTTP requests to replicas through libcurl (pycurl): kept-alive connections, timeouts, chunked and
    close-delimited bodies, TLS and a connection the replica closed while idle (asked again on a new one) are
    libcurl's. A handle serves one request at a time; idle handles, each with its connections, are kept for the next.

    Why libcurl: the fan-out pays the client's CPU once per replica per query, in the web process. urllib3 (over
    http.client, headers parsed through the email package) cost ~0.47 ms of CPU per call on loopback, httpcore
    ~0.4-0.5 ms; libcurl ~0.03-0.05 ms, the same as a minimal socket client, without one of our own
    (docs/architecture.md, "Search cluster")."""

    def __init__(self, token: str) -> None:
        # `Expect:` off: libcurl would wait for a 100-continue before sending a large body.
        self._headers = [f"Authorization: Bearer {token}", "Content-Type: application/json", "Expect:"]
        self._idle: list[pycurl.Curl] = []
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for curl in idle:
            curl.close()

    def post(self, address: str, path: str, body: bytes, until: float) -> tuple[int, str, bytes]:
        """POST `body` (JSON) to `address` + `path`: (status, content type, body); TransportError if the replica
        cannot be reached or does not answer whole by `until` (monotonic)."""
        remaining_ms = int((until - time.monotonic()) * 1000)
        if remaining_ms <= 0:
            raise TransportError(LATE)
        curl = self._take()
        # The body's pieces, joined once at the end (a BytesIO's writes and final copy cost ~2x more on a 270 KB page).
        pieces: list[bytes] = []
        try:
            curl.setopt(pycurl.URL, address + path)
            curl.setopt(pycurl.POSTFIELDS, body)
            curl.setopt(pycurl.WRITEFUNCTION, pieces.append)
            curl.setopt(pycurl.TIMEOUT_MS, remaining_ms)
            curl.setopt(pycurl.CONNECTTIMEOUT_MS, min(int(CONNECT_TIMEOUT_SECONDS * 1000), remaining_ms))
            curl.perform()
            status = int(curl.getinfo(pycurl.RESPONSE_CODE))
            content_type = str(curl.getinfo(pycurl.CONTENT_TYPE) or "")
        except pycurl.error as exc:
            # Whether the request went out: a kept-alive connection reports no connect time, a refused one a
            # pretransfer time; the bytes sent tell.
            reason = _reason(int(exc.args[0]), sent=curl.getinfo(pycurl.REQUEST_SIZE) > 0)
            curl.close()  # its connection may be half-read: not kept
            raise TransportError(reason) from None
        curl.setopt(pycurl.WRITEFUNCTION, _drop)  # an idle handle holds no answer
        self._give(curl)
        return status, content_type, b"".join(pieces)

    def _take(self) -> pycurl.Curl:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        curl = pycurl.Curl()
        curl.setopt(pycurl.NOSIGNAL, 1)  # timeouts without SIGALRM: requests run in many threads
        curl.setopt(pycurl.HTTPHEADER, self._headers)
        curl.setopt(pycurl.FOLLOWLOCATION, 0)
        curl.setopt(pycurl.PROTOCOLS, pycurl.PROTO_HTTP | pycurl.PROTO_HTTPS)
        curl.setopt(pycurl.NOPROXY, "*")  # replicas are inside the deployment: never through a proxy from the env
        curl.setopt(pycurl.MAXFILESIZE_LARGE, _MAX_BODY_BYTES)
        curl.setopt(pycurl.TCP_NODELAY, 1)
        return curl

    def _give(self, curl: pycurl.Curl) -> None:
        with self._lock:
            if len(self._idle) < _IDLE_HANDLES:
                self._idle.append(curl)
                return
        curl.close()


def _drop(_data: bytes) -> None:
    """The write callback of an idle handle (it never runs: a request sets its own first)."""


def _reason(code: int, *, sent: bool) -> str:
    """What a partial answer says of a replica libcurl failed to ask (error `code`; `sent`: the request went out)."""
    # Refused or unknown (also when a kept-alive connection had died and libcurl's new one was refused), a bad
    # address, or the connect timed out.
    if not sent or code in (pycurl.E_COULDNT_CONNECT, pycurl.E_COULDNT_RESOLVE_HOST):
        return UNREACHABLE
    if code == pycurl.E_OPERATION_TIMEDOUT:
        return LATE
    return FAILED  # cut short, not HTTP, too large


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
        if preferred:
            kept = []
            for f, rid in zip(results.files, repo_ids, strict=True):
                if preferred.get(rid, name) != name:
                    count -= f.line_count  # held twice while moving: the other holder's answer counts
                    continue
                kept.append(f)
        else:
            kept = results.files  # normally: no repository is held twice
        for f in kept:
            (symbols if f.labels else text).append(f)
    text.sort(key=_BY_REPO)
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
    text.sort(key=_BY_ORDER, reverse=True)  # ranking's order (`ranking.sort_by_rank`), best first
    symbols.sort(key=_BY_REPO)
    symbols.sort(key=_BY_ORDER)
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
