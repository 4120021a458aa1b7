"""The web tier's HTTP client of searcher replicas (search/cluster.py `Connections`), against real sockets on
loopback: a scripted server answers each request as a test says (kept alive, closed while idle, slow, cut short,
chunked), and the client's answers and reasons are what the partial answer says."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

import orjson
import pytest

from codewell.jobs.placement import Replica
from codewell.search.cluster import FAILED, LATE, UNREACHABLE, Connections, Fanout, TransportError

# What the scripted server does with one request: (the connection, the request's head, its body) → keep the
# connection open for the next request?
Handler = Callable[[socket.socket, bytes, bytes], bool]


def _read_request(conn: socket.socket) -> tuple[bytes, bytes] | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += conn.recv(65536)
    return head, body


def _answer(body: bytes, *, status: str = "200 OK", content_type: str = "application/json") -> bytes:
    return f"HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {len(body)}\r\n\r\n".encode() + body


class Server:
    """Accepts connections on loopback and answers each request with `handler`; counts connections."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.requests: list[tuple[bytes, bytes]] = []
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            self.open.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            while (request := _read_request(conn)) is not None:
                self.requests.append(request)
                if not self.handler(conn, *request):
                    return

    def close_idle(self) -> None:
        """Close every connection the server holds (as uvicorn does after its keep-alive timeout)."""
        for conn in self.open:
            with suppress(OSError):  # already closed by its handler
                conn.shutdown(socket.SHUT_RDWR)
        self.open.clear()

    def stop(self) -> None:
        # shutdown first: a plain close leaves the socket listening while the accept thread is blocked on it.
        with suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self.close_idle()


@contextmanager
def serving(handler: Handler) -> Iterator[Server]:
    server = Server(handler)
    try:
        yield server
    finally:
        server.stop()


def echo(conn: socket.socket, head: bytes, body: bytes) -> bool:
    conn.sendall(_answer(orjson.dumps({"path": head.split(b" ")[1].decode(), "got": orjson.loads(body)})))
    return True


def _soon(seconds: float = 5.0) -> float:
    return time.monotonic() + seconds


@pytest.fixture
def client() -> Iterator[Connections]:
    connections = Connections("t")
    yield connections
    connections.close()


def test_requests_share_one_kept_alive_connection_and_carry_the_credential() -> None:
    client = Connections("secret-token")
    with serving(echo) as server:
        for n in range(3):
            status, content_type, body = client.post(server.address, "/.internal/search", b'{"n": %d}' % n, _soon())
            assert (status, content_type) == (200, "application/json")
            assert orjson.loads(body) == {"path": "/.internal/search", "got": {"n": n}}
        assert server.connections == 1
        assert all(b"\r\nAuthorization: Bearer secret-token\r\n" in head for head, _ in server.requests)
    client.close()


def test_a_connection_the_replica_closed_while_idle_is_replaced_without_an_error(client: Connections) -> None:
    with serving(echo) as server:
        client.post(server.address, "/a", b"{}", _soon())
        server.close_idle()
        time.sleep(0.05)
        status, _, body = client.post(server.address, "/b", b"{}", _soon())
        assert (status, orjson.loads(body)["path"]) == (200, "/b")
        assert server.connections == 2


def test_a_large_body_arrives_whole(client: Connections) -> None:
    big = orjson.dumps({"lines": ["x" * 100] * 20_000})  # ~2 MB: many reads

    def large(conn: socket.socket, _head: bytes, _body: bytes) -> bool:
        conn.sendall(_answer(big))
        return True

    with serving(large) as server:
        assert client.post(server.address, "/", b"{}", _soon())[2] == big


def test_chunked_and_close_delimited_bodies_are_read(client: Connections) -> None:
    def chunked(conn: socket.socket, _head: bytes, _body: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=1\r\n world\r\n0\r\n\r\n")
        return True

    def until_close(conn: socket.socket, _head: bytes, _body: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nto the end")
        return False

    with serving(chunked) as server:
        assert client.post(server.address, "/", b"{}", _soon())[2] == b"hello world"
        assert client.post(server.address, "/", b"{}", _soon())[2] == b"hello world"
        assert server.connections == 1
    with serving(until_close) as server:
        assert client.post(server.address, "/", b"{}", _soon())[2] == b"to the end"
        assert client.post(server.address, "/", b"{}", _soon())[2] == b"to the end"
        assert server.connections == 2  # closed after each answer, as the replica said


def test_a_replica_that_is_not_listening_could_not_be_reached(client: Connections) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
    with pytest.raises(TransportError, match=UNREACHABLE):
        client.post(f"http://127.0.0.1:{port}", "/", b"{}", _soon())


def test_a_replica_gone_after_a_kept_alive_answer_could_not_be_reached(client: Connections) -> None:
    """A replica killed between two queries: its kept-alive connection is dead and its port refuses."""
    with serving(echo) as server:
        client.post(server.address, "/a", b"{}", _soon())
        address = server.address
    time.sleep(0.05)
    with pytest.raises(TransportError, match=UNREACHABLE):
        client.post(address, "/b", b"{}", _soon())


def test_a_slow_replica_did_not_answer_before_the_deadline(client: Connections) -> None:
    def slow(conn: socket.socket, _head: bytes, _body: bytes) -> bool:
        time.sleep(1.0)
        return False

    with serving(slow) as server:
        started = time.monotonic()
        with pytest.raises(TransportError, match=LATE):
            client.post(server.address, "/", b"{}", time.monotonic() + 0.2)
        assert time.monotonic() - started < 0.8


def test_an_answer_cut_short_failed(client: Connections) -> None:
    def cut(conn: socket.socket, _head: bytes, _body: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly this")
        return False

    def not_http(conn: socket.socket, _head: bytes, _body: bytes) -> bool:
        conn.sendall(b"SSH-2.0-OpenSSH\r\n\r\n")
        return False

    for handler in (cut, not_http):
        with serving(handler) as server, pytest.raises(TransportError, match=FAILED):
            client.post(server.address, "/", b"{}", _soon())


def test_the_fanout_says_which_replica_failed_and_why() -> None:
    def refused(conn: socket.socket, _head: bytes, _body: bytes) -> bool:
        conn.sendall(_answer(b'{"error": "no"}', status="401 Unauthorized"))
        return True

    fanout = Fanout("t")
    with socket.create_server(("127.0.0.1", 0)) as taken:
        down = f"http://127.0.0.1:{taken.getsockname()[1]}"
    try:
        with serving(echo) as good, serving(refused) as bad:
            replicas = [Replica("s1", good.address), Replica("s2", bad.address), Replica("s3", down)]
            replies = fanout.post_all(replicas, "/search", {"q": 1}, _soon())
            assert replies[0].payload == {"path": "/.internal/search", "got": {"q": 1}}
            assert [(r.payload, r.error) for r in replies[1:]] == [(None, "answered HTTP 401"), (None, UNREACHABLE)]
            # One replica: asked from the caller's thread, the same way.
            (alone,) = fanout.post_all(replicas[:1], "/search", {"q": 2}, _soon())
            assert alone.payload == {"path": "/.internal/search", "got": {"q": 2}}
    finally:
        fanout.close()
