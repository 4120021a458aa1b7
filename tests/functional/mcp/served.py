"""A real codewell HTTP server (uvicorn on a free loopback port, in a thread) plus users and tokens,
shared by the MCP and OAuth functional tests."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import uvicorn

from codewell.accounts.service import AccountService, User
from codewell.accounts.tokens import TokenService
from codewell.app import create_app
from codewell.config import SiteConfig
from codewell.core.actors import INTERNAL
from codewell.core.settings import Settings
from codewell.core.tools import ToolSpec
from codewell.mcp.registry import ToolRegistry
from codewell.runtime import Runtime


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Served:
    runtime: Runtime
    base_url: str
    server: uvicorn.Server

    def url(self, path: str) -> str:
        return self.base_url + path

    def configure(self, **changes: Any) -> None:
        """Change site config options (by alias, e.g. {"mcp.enabled": False}) on disk, as an admin would."""
        data = self.runtime.config.model_dump(by_alias=True)
        data.update(changes)
        self.runtime.site_config.write(SiteConfig.model_validate(data))

    def user(self, username: str, *, site_admin: bool = False, password: str | None = None) -> User:
        return self.runtime.get(AccountService).create_user(
            INTERNAL, username, site_admin=site_admin, password=password
        )

    def token(self, user: User, scopes: tuple[str, ...] = ("user:all",)) -> str:
        raw, _ = self.runtime.get(TokenService).create_token(INTERNAL, user.id, "test", scopes)
        return raw


@pytest.fixture
def tool_specs() -> list[ToolSpec] | None:
    """The tools the served app offers; None means the real, discovered ones. Modules override this."""
    return None


@pytest.fixture
def served(settings: Settings, tool_specs: list[ToolSpec] | None) -> Iterator[Served]:
    """The whole app served over real HTTP on 127.0.0.1:<free port>; externalURL matches that address."""
    port = free_port()
    runtime = Runtime.open(settings.with_changes(port=port))
    if tool_specs is not None:
        runtime.provide(ToolRegistry, ToolRegistry(tool_specs))
    app = create_app(runtime, background=False)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield Served(runtime, f"http://127.0.0.1:{port}", server)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        runtime.close()
