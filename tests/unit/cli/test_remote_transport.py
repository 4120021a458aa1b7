"""The remote CLI's transport (clikit/transport.py, the standard library instead of requests) against a real HTTP
server on loopback: what requests gave is kept (error envelopes, a connect timeout apart from the read timeout),
and a redirect to another address is refused with the address to use, without sending the token there."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from codewell.clikit import remote as remote_module
from codewell.clikit.remote import Remote, RemoteError

Reply = Callable[[BaseHTTPRequestHandler], None]


class Loopback:
    def __init__(self, reply: Reply) -> None:
        self.seen: list[tuple[str, str, str | None]] = []  # (method, path, Authorization)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.seen.append(("GET", self.path, self.headers.get("Authorization")))
                reply(self)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                outer.seen.append(("POST", self.path + " " + body.decode(), self.headers.get("Authorization")))
                reply(self)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _send(
    handler: BaseHTTPRequestHandler, status: int, body: bytes, kind: str = "application/json", **extra: str
) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", kind)
    handler.send_header("Content-Length", str(len(body)))
    for name, value in extra.items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(body)


@pytest.fixture
def serve() -> Iterator[Callable[[Reply], Loopback]]:
    started: list[Loopback] = []

    def start(reply: Reply) -> Loopback:
        started.append(Loopback(reply))
        return started[-1]

    yield start
    for server in started:
        server.close()


def test_json_answers_params_and_the_token(serve: Callable[[Reply], Loopback]) -> None:
    server = serve(lambda h: _send(h, 200, b'{"ok": true}'))
    remote = Remote.connect(server.url + "/", "cwp_secret")
    assert remote.get("/.api/search", [("q", "a b&c"), ("count", 5)]) == {"ok": True}
    assert remote.post("/.api/deepsearch", {"question": "why?"}) == {"ok": True}
    assert server.seen == [
        ("GET", "/.api/search?q=a+b%26c&count=5", "token cwp_secret"),
        ("POST", '/.api/deepsearch {"question": "why?"}', "token cwp_secret"),
    ]


def test_errors_are_one_line_with_a_hint(serve: Callable[[Reply], Loopback]) -> None:
    envelope = json.dumps({"error": {"code": "not_found", "message": "repository x not found", "hint": "list them"}})
    remote = Remote.connect(serve(lambda h: _send(h, 404, envelope.encode())).url, "t")
    with pytest.raises(RemoteError) as caught:
        remote.get("/.api/repos/x")
    assert (caught.value.message, caught.value.hint) == ("repository x not found", "list them")

    remote = Remote.connect(serve(lambda h: _send(h, 502, b"<html>bad gateway</html>", "text/html")).url, "t")
    with pytest.raises(RemoteError, match=r"did not answer as a codewell server \(HTTP 502, text/html\)"):
        remote.get("/.api/search")

    remote = Remote.connect(serve(lambda h: _send(h, 401, b"{}")).url, "t")
    with pytest.raises(RemoteError, match=r"refused the stored token \(401\)"):
        remote.get("/.api/search")


def test_redirects_stay_on_the_servers_origin(serve: Callable[[Reply], Loopback]) -> None:
    elsewhere = serve(lambda h: _send(h, 200, b'{"stolen": true}'))

    def reply(handler: BaseHTTPRequestHandler) -> None:
        if handler.path.startswith("/old"):
            _send(handler, 302, b"", Location="/.api/new")
        elif handler.path.startswith("/away"):
            _send(handler, 302, b"", Location=elsewhere.url + "/.api/new")
        else:
            _send(handler, 200, b'{"moved": true}')

    server = serve(reply)
    remote = Remote.connect(server.url, "cwp_secret")
    assert remote.get("/old") == {"moved": True}
    with pytest.raises(RemoteError) as caught:
        remote.get("/away")
    assert caught.value.message == f"{server.url} redirects to {elsewhere.url}"
    assert caught.value.hint == f"use --server {elsewhere.url} (the token is not sent to another address)"
    assert elsewhere.seen == []


def test_a_server_that_says_nothing_times_out_and_one_that_is_not_there_is_said_at_once(
    serve: Callable[[Reply], Loopback], monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()

    def late(handler: BaseHTTPRequestHandler) -> None:
        release.wait(5)
        _send(handler, 200, b"{}")

    server = serve(late)
    monkeypatch.setattr(remote_module, "READ_TIMEOUT_S", 0.3)
    monkeypatch.setattr("codewell.clikit.transport.READ_TIMEOUT_S", 0.3)
    try:
        with pytest.raises(RemoteError, match=r"did not answer GET /\.api/search in time"):
            Remote.connect(server.url, None).get("/.api/search", {"q": "x"})
    finally:
        release.set()
    with pytest.raises(RemoteError) as caught:
        Remote.connect("http://127.0.0.1:9", None).get("/.api/search")
    assert caught.value.message == "cannot reach http://127.0.0.1:9: [Errno 111] Connection refused"
