"""Helpers for driving external sign-in through the whole app and a loopback provider."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from starlette.testclient import TestClient

from codewell.config.providers import Provider
from codewell.runtime import Runtime
from tests.factories import set_site_config
from tests.fakes.codehosts import FakeCodeHost


@pytest.fixture
def host() -> Iterator[FakeCodeHost]:
    with FakeCodeHost() as fake:
        yield fake


def configure(runtime: Runtime, *providers: dict[str, Any]) -> list[Provider]:
    """Set `auth.providers` and return the typed entries (same order)."""
    set_site_config(runtime, {"auth.providers": list(providers)})
    return runtime.config.providers


def local(url: str) -> str:
    """The path and query of an absolute URL pointing at the app under test."""
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def start(client: TestClient, provider: Provider, return_to: str = "/") -> str:
    """Start a sign-in at codewell; the provider URL it redirects to."""
    response = client.get(
        f"/.auth/{provider.kind}/login", params={"pc": provider.id, "returnTo": return_to}, follow_redirects=False
    )
    assert response.status_code == 302, response.text
    return response.headers["location"]


def approve(authorize_url: str) -> str:
    """Visit the provider's authorization URL (the fake approves at once); the callback URL it sends back to."""
    response = requests.get(authorize_url, allow_redirects=False, timeout=10)
    assert response.status_code == 302, response.text
    return response.headers["location"]


def sign_in(client: TestClient, provider: Provider, return_to: str = "/") -> Any:
    """The whole round trip; the response of codewell's callback (303 to returnTo on success)."""
    return client.get(local(approve(start(client, provider, return_to))), follow_redirects=False)
