"""Start the real OpenID Provider (tests/oidc/provider.mjs, npm oidc-provider) on loopback for a test."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import pytest
import requests

HERE = Path(__file__).parent


class OpenIDProvider:
    """`with OpenIDProvider(clients, accounts) as op:` runs oidc-provider; `op.issuer` is its issuer URL."""

    def __init__(self, clients: list[dict[str, Any]], accounts: dict[str, dict[str, Any]]) -> None:
        if shutil.which("node") is None or not (HERE / "node_modules" / "oidc-provider").is_dir():
            # Part of the test setup, never skipped: say how to install it.
            pytest.fail("oidc-provider is not installed: run `npm ci` in tests/oidc (./scripts/test does)")
        self.config = {"clients": clients, "accounts": accounts}
        self.issuer = ""
        self._process: subprocess.Popen[str] | None = None

    def __enter__(self) -> OpenIDProvider:
        self._process = subprocess.Popen(
            ["node", str(HERE / "provider.mjs"), json.dumps(self.config)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self._process.stdout is not None
        line = self._process.stdout.readline().strip()
        if not line.startswith("READY "):
            self.__exit__()
            raise RuntimeError(f"oidc-provider did not start: {line!r}")
        self.issuer = line.removeprefix("READY ")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=10)
            if self._process.stdout:
                self._process.stdout.close()

    def login_as(self, account: str) -> None:
        requests.post(f"{self.issuer}/__test/login-as", params={"account": account}, timeout=10).raise_for_status()

    def authorize(self, url: str, stop_at: str) -> str:
        """Follow the provider's redirects (login, consent) from `url` until one leads to `stop_at`; that URL."""
        browser = requests.Session()
        for _ in range(10):
            response = browser.get(url, allow_redirects=False, timeout=10)
            if response.status_code not in (302, 303):
                raise AssertionError(f"the OpenID provider answered {response.status_code}: {response.text[:300]}")
            url = urljoin(url, response.headers["location"])
            if url.startswith(stop_at):
                return url
        raise AssertionError("too many redirects at the OpenID provider")
