"""Run an ASGI app with uvicorn on a free loopback port in a background thread (for fakes of remote services)."""

from __future__ import annotations

import socket
import threading
import time

import uvicorn
from starlette.types import ASGIApp


class LoopbackServer:
    """`with LoopbackServer(app) as server:` serves `app` at `server.url` (http://127.0.0.1:<port>)."""

    def __init__(self, app: ASGIApp) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True)

    def __enter__(self) -> LoopbackServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the loopback server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()
