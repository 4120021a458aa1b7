"""Client ID Metadata Documents: fetch the JSON document named by an HTTPS client_id, safely.

SSRF guards: https only, default port 443 or an explicit port, the host resolved once and every address
checked to be public (no loopback, private, link-local, multicast, reserved or unspecified address), the
connection pinned to a checked address (no second resolution to rebind), no redirects, a short timeout,
a size cap, and the document's `client_id` must equal the URL byte for byte.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
from typing import Any
from urllib.parse import urlsplit

from codewell.http.bodies import InvalidJson, parse_json
from codewell.oauth.errors import OAuthError

MAX_DOCUMENT_BYTES = 64 * 1024
TIMEOUT_SECONDS = 5.0


def _fail(description: str) -> OAuthError:
    return OAuthError("invalid_client_metadata", description, redirectable=False)


def is_public_address(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not (
        ip.is_loopback
        or ip.is_private
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or not ip.is_global
    )


def resolve_public(host: str, port: int, *, allow_private: bool = False) -> str:
    """One address of `host` after checking that every address it resolves to is public."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise _fail(f"cannot resolve {host}: {exc.strerror or exc}") from None
    addresses = [str(info[4][0]) for info in infos]
    if not addresses:
        raise _fail(f"{host} has no address")
    if not allow_private:
        for address in addresses:
            if not is_public_address(address):
                raise _fail(f"{host} resolves to a non-public address ({address}); refusing to fetch")
    return addresses[0]


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """HTTPS to a pre-checked IP address while verifying the certificate for the original host name."""

    def __init__(self, host: str, address: str, port: int, context: ssl.SSLContext) -> None:
        super().__init__(host, port, timeout=TIMEOUT_SECONDS, context=context)
        self._address = address
        self._context = context

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


def validate_client_id_url(url: str) -> tuple[str, int, str]:
    """(host, port, path+query) of a metadata-document client_id, or invalid_client_metadata."""
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        raise _fail("a metadata-document client_id must be an https URL")
    if parts.fragment or parts.username or parts.password:
        raise _fail("a metadata-document client_id must not contain a fragment or credentials")
    if not parts.path or parts.path == "/":
        raise _fail("a metadata-document client_id must have a path")
    return parts.hostname, parts.port or 443, parts.path + (f"?{parts.query}" if parts.query else "")


def fetch_client_metadata(
    url: str, *, allow_private: bool = False, context: ssl.SSLContext | None = None
) -> dict[str, Any]:
    """Fetch and check the metadata document at `url`. `allow_private`/`context` exist for loopback tests."""
    host, port, target = validate_client_id_url(url)
    address = resolve_public(host, port, allow_private=allow_private)
    connection = _PinnedHTTPSConnection(host, address, port, context or ssl.create_default_context())
    try:
        connection.request("GET", target, headers={"Accept": "application/json", "User-Agent": "codewell-oauth"})
        response = connection.getresponse()
        if response.status != 200:
            raise _fail(f"fetching the client metadata document returned HTTP {response.status}")
        body = response.read(MAX_DOCUMENT_BYTES + 1)
    except (OSError, http.client.HTTPException) as exc:
        raise _fail(f"cannot fetch the client metadata document: {exc}") from None
    finally:
        connection.close()
    if len(body) > MAX_DOCUMENT_BYTES:
        raise _fail(f"the client metadata document exceeds {MAX_DOCUMENT_BYTES} bytes")
    try:
        document = parse_json(body, what="the client metadata document")
    except InvalidJson as exc:
        raise _fail(exc.message) from None
    if not isinstance(document, dict):
        raise _fail("the client metadata document must be a JSON object")
    if document.get("client_id") != url:
        raise _fail("the document's client_id must equal the URL it was fetched from")
    return document
