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
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from operator import attrgetter
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import orjson
import urllib3
from urllib3.exceptions import ConnectTimeoutError, HTTPError, MaxRetryError, NewConnectionError
from urllib3.exceptions import TimeoutError as TransportTimeout

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
        # Replicas at http:// addresses (every `codewell searcher`): a keep-alive client of our own, ~0.1 ms of CPU
        # per call where urllib3 cost ~0.6 ms (see `Connections`). urllib3 stays for any other scheme (a
        # replica behind a TLS proxy).
        self._connections = Connections(token)
        self._http = urllib3.PoolManager(num_pools=64, maxsize=64, retries=False)
        self._headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self._pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="search-fanout")
        self._lock = threading.Lock()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._connections.close()
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
                replies.append(Reply(replica, None, LATE))
                continue
            try:
                replies.append(Reply(replica, future.result()))
            except (ReplicaError, TransportError) as exc:
                replies.append(Reply(replica, None, str(exc)))
            except HTTPError as exc:
                replies.append(Reply(replica, None, _transport_reason(exc)))
        return replies

    def _one(self, replica: Replica, path: str, data: bytes, deadline: float, decode: Decoder) -> Reply:
        try:
            return Reply(replica, self._post(replica, path, data, deadline, decode))
        except (ReplicaError, TransportError) as exc:
            return Reply(replica, None, str(exc))
        except HTTPError as exc:
            return Reply(replica, None, _transport_reason(exc))

    def _post(self, replica: Replica, path: str, data: bytes, deadline: float, decode: Decoder) -> Mapping[str, Any]:
        until = max(time.monotonic() + 0.05, deadline) + TRANSPORT_GRACE_SECONDS
        address = replica.address.rstrip("/")
        if address.startswith("http://"):
            status, content_type, content = self._connections.post(address, INTERNAL_PREFIX + path, data, until)
        else:
            remaining = until - time.monotonic()
            response = self._http.request(
                "POST",
                address + INTERNAL_PREFIX + path,
                body=data,
                headers=self._headers,
                timeout=urllib3.Timeout(connect=min(CONNECT_TIMEOUT_SECONDS, remaining), read=remaining),
                redirect=False,
            )
            status, content_type, content = response.status, response.headers.get("content-type", ""), response.data
        if status != 200:
            raise ReplicaError(f"answered HTTP {status}")
        try:
            return decode(content_type, content)
        except ValueError as exc:
            raise ReplicaError(str(exc) or "answered something unreadable") from exc


UNREACHABLE = "could not be reached"
LATE = "did not answer before the deadline"
FAILED = "failed to answer"
# Bounds of what a replica may send: a status line and headers, and a body (a count:all of a common word over a
# replica's share: tens of MB at most).
_MAX_HEAD_BYTES = 64 << 10
_MAX_BODY_BYTES = 1 << 30
# Idle connections kept per replica (one per request in flight is enough; more only after a burst).
_IDLE_PER_ADDRESS = 16


class TransportError(Exception):
    """A replica could not be asked or did not answer (its message is the reason the partial answer gives)."""


class _Stale(Exception):
    """A kept-alive connection the replica had closed (nothing of an answer came back): asked again on a new one."""


class Connections:
    """HTTP/1.1 keep-alive connections to replicas at http:// addresses, a few kept idle per address.

    Minimal on purpose: the internal API answers with a Content-Length (Starlette's `Response`; chunked and
    close-delimited bodies are read too). urllib3 over http.client cost ~0.6 ms of CPU per call on the web tier
    (header parsing through the email package, a liveness poll per pooled connection), over a tenth of the
    fan-out's overhead budget; this costs ~0.1-0.2 ms. A connection the replica closed while idle (uvicorn's
    keep-alive timeout) is noticed when nothing comes back, and the request is sent once more on a new one:
    every internal call is a read, so a repeat is harmless."""

    def __init__(self, token: str) -> None:
        self._auth = f"Authorization: Bearer {token}\r\n"
        self._idle: dict[tuple[str, int], list[socket.socket]] = {}
        self._targets: dict[str, tuple[str, int, str]] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for sockets in idle.values():
            for sock in sockets:
                sock.close()

    def post(self, address: str, path: str, body: bytes, until: float) -> tuple[int, str, bytes]:
        """POST `body` (JSON) to `address` + `path`: (status, content type, body); TransportError if the replica
        cannot be reached or does not answer whole by `until` (monotonic)."""
        host, port, prefix = self._target(address)
        request = (
            f"POST {prefix}{path} HTTP/1.1\r\nHost: {host}:{port}\r\n{self._auth}"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode("latin-1") + body
        for _attempt in range(2):
            sock, reused = self._take(host, port, until)
            try:
                status, content_type, content, keep = _exchange(sock, request, until)
            except _Stale:
                sock.close()
                if reused:
                    continue
                raise TransportError(FAILED) from None
            except BaseException:
                sock.close()
                raise
            if keep:
                self._give(host, port, sock)
            else:
                sock.close()
            return status, content_type, content
        raise TransportError(FAILED)

    def _target(self, address: str) -> tuple[str, int, str]:
        target = self._targets.get(address)
        if target is None:
            parts = urlsplit(address)
            try:
                port = parts.port or 80
            except ValueError as exc:
                raise TransportError(UNREACHABLE) from exc
            target = (parts.hostname or "", port, parts.path.rstrip("/"))
            self._targets[address] = target
        return target

    def _take(self, host: str, port: int, until: float) -> tuple[socket.socket, bool]:
        with self._lock:
            idle = self._idle.get((host, port))
            if idle:
                return idle.pop(), True
        remaining = until - time.monotonic()
        if remaining <= 0:
            raise TransportError(LATE)
        try:
            sock = socket.create_connection((host, port), timeout=min(CONNECT_TIMEOUT_SECONDS, remaining))
        except OSError as exc:  # refused, unreachable, unknown name, or the connect timed out
            raise TransportError(UNREACHABLE) from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock, False

    def _give(self, host: str, port: int, sock: socket.socket) -> None:
        with self._lock:
            idle = self._idle.setdefault((host, port), [])
            if len(idle) < _IDLE_PER_ADDRESS:
                idle.append(sock)
                return
        sock.close()


def _exchange(sock: socket.socket, request: bytes, until: float) -> tuple[int, str, bytes, bool]:
    """Send `request` and read one answer: (status, content type, body, whether the connection stays open)."""
    try:
        _wait_until(sock, until)
        sock.sendall(request)
    except TimeoutError as exc:
        raise TransportError(LATE) from exc
    except OSError as exc:  # reset or broken pipe: the replica closed the connection while it was idle
        raise _Stale from exc
    buffer = bytearray()
    head_end = -1
    while head_end < 0:
        chunk = _receive(sock, until, stale_if_empty=not buffer)
        if not chunk:
            raise TransportError(FAILED)  # the replica closed the connection during its answer
        buffer += chunk
        head_end = buffer.find(b"\r\n\r\n")
        if head_end < 0 and len(buffer) > _MAX_HEAD_BYTES:
            raise TransportError(FAILED)
    status, headers = _parse_head(bytes(buffer[:head_end]))
    rest = buffer[head_end + 4 :]
    keep = headers.get("connection", "").lower() != "close"
    if "chunked" in headers.get("transfer-encoding", "").lower():
        content = _read_chunked(sock, rest, until)
    elif "content-length" in headers:
        try:
            length = int(headers["content-length"])
        except ValueError as exc:
            raise TransportError(FAILED) from exc
        if not 0 <= length <= _MAX_BODY_BYTES:
            raise TransportError(FAILED)
        content = _read_exactly(sock, rest, length, until)
    else:  # close-delimited
        content, keep = _read_to_end(sock, rest, until), False
    return status, headers.get("content-type", ""), content, keep


def _wait_until(sock: socket.socket, until: float) -> None:
    remaining = until - time.monotonic()
    if remaining <= 0:
        raise TransportError(LATE)
    sock.settimeout(remaining)


def _receive(sock: socket.socket, until: float, *, stale_if_empty: bool = False) -> bytes:
    """The next bytes of the answer (b"" once the replica closed the connection)."""
    try:
        _wait_until(sock, until)
        chunk = sock.recv(1 << 18)
    except TimeoutError as exc:
        raise TransportError(LATE) from exc
    except OSError as exc:
        if stale_if_empty:
            raise _Stale from exc
        raise TransportError(FAILED) from exc
    if not chunk and stale_if_empty:
        raise _Stale
    return chunk


def _parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or not code.isdigit():
        raise TransportError(FAILED)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(code), headers


def _read_exactly(sock: socket.socket, start: bytearray, length: int, until: float) -> bytes:
    if len(start) >= length:
        return bytes(start[:length])
    body = bytearray(length)
    body[: len(start)] = start
    view = memoryview(body)
    got = len(start)
    while got < length:
        try:
            _wait_until(sock, until)
            n = sock.recv_into(view[got:])
        except TimeoutError as exc:
            raise TransportError(LATE) from exc
        except OSError as exc:
            raise TransportError(FAILED) from exc
        if n == 0:
            raise TransportError(FAILED)
        got += n
    return bytes(body)


def _read_to_end(sock: socket.socket, start: bytearray, until: float) -> bytes:
    body = bytearray(start)
    while chunk := _receive(sock, until):
        body += chunk
        if len(body) > _MAX_BODY_BYTES:
            raise TransportError(FAILED)
    return bytes(body)


def _read_chunked(sock: socket.socket, start: bytearray, until: float) -> bytes:
    buffer, body, at = bytearray(start), bytearray(), 0

    def line() -> bytes:
        nonlocal at
        while (end := buffer.find(b"\r\n", at)) < 0:
            chunk = _receive(sock, until)
            if not chunk:
                raise TransportError(FAILED)
            buffer.extend(chunk)
        found, at = bytes(buffer[at:end]), end + 2
        return found

    while True:
        try:
            size = int(line().split(b";", 1)[0], 16)
        except ValueError as exc:
            raise TransportError(FAILED) from exc
        if size == 0:
            while line():  # trailers, up to the empty line
                pass
            return bytes(body)
        while len(buffer) - at < size + 2:
            chunk = _receive(sock, until)
            if not chunk:
                raise TransportError(FAILED)
            buffer.extend(chunk)
        body += buffer[at : at + size]
        at += size + 2
        if len(body) > _MAX_BODY_BYTES:
            raise TransportError(FAILED)


def _transport_reason(exc: HTTPError) -> str:
    cause = exc.reason if isinstance(exc, MaxRetryError) and exc.reason is not None else exc
    if isinstance(cause, (NewConnectionError, ConnectTimeoutError)):
        return UNREACHABLE
    if isinstance(cause, TransportTimeout):
        return LATE
    return FAILED


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
