"""What the browser tests share: Debian's chromium with the flags this closed network needs, and the whole app
served over real HTTP on loopback in a thread of the test process."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import uvicorn

from codewell.app import create_app
from codewell.runtime import Runtime

CHROMIUM = "/usr/bin/chromium"
# Without the background-networking flags chromium keeps trying hosts this machine cannot reach.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def serve_app(runtime: Runtime, port: int | None = None) -> Iterator[str]:
    """Serve the app (no background loops) until the block ends; yields its base URL."""
    port = port or free_port()
    config = uvicorn.Config(create_app(runtime, background=False), host="127.0.0.1", port=port, log_config=None)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
