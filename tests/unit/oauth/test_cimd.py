"""Client ID Metadata Documents: the SSRF guards and the fetch, against a real HTTPS server on loopback."""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from codewell.oauth.cimd import fetch_client_metadata, is_public_address, resolve_public, validate_client_id_url
from codewell.oauth.errors import OAuthError
from codewell.oauth.service import OAuthService
from codewell.runtime import Runtime

DOCUMENTS: dict[str, tuple[int, bytes]] = {}


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        status, body = DOCUMENTS.get(self.path, (404, b"{}"))
        self.send_response(status)
        if status == 302:
            self.send_header("Location", "https://127.0.0.1/elsewhere")
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def self_signed(tmp: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / "cert.pem", tmp / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


@pytest.fixture
def https_server(tmp_path: Path) -> Iterator[tuple[str, ssl.SSLContext]]:
    cert, key = self_signed(tmp_path)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    client_context = ssl.create_default_context(cafile=str(cert))
    try:
        yield f"https://localhost:{server.server_address[1]}", client_context
    finally:
        server.shutdown()
        server.server_close()
        DOCUMENTS.clear()


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://client.example.com/meta.json", "must be an https URL"),
        ("https://client.example.com/", "must have a path"),
        ("https://client.example.com/m.json#x", "must not contain a fragment"),
        ("https://user:pw@client.example.com/m.json", "must not contain a fragment or credentials"),
    ],
)
def test_client_id_urls_are_checked(url: str, problem: str) -> None:
    with pytest.raises(OAuthError, match=problem):
        validate_client_id_url(url)


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.216.34", True),
        ("2606:4700::1111", True),
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("192.168.0.1", False),
        ("169.254.169.254", False),
        ("::1", False),
        ("::ffff:127.0.0.1", False),
        ("fd00::1", False),
        ("0.0.0.0", False),
        ("100.64.0.1", False),
    ],
)
def test_only_public_addresses_are_fetched(address: str, public: bool) -> None:
    assert is_public_address(address) is public


def test_names_resolving_to_loopback_are_refused() -> None:
    with pytest.raises(OAuthError, match="non-public address"):
        resolve_public("localhost", 443)


def test_fetch_checks_the_document(https_server: tuple[str, ssl.SSLContext]) -> None:
    base, context = https_server
    good = base + "/client.json"
    DOCUMENTS["/client.json"] = (
        200,
        json.dumps({"client_id": good, "redirect_uris": ["http://127.0.0.1/cb"]}).encode(),
    )
    DOCUMENTS["/other.json"] = (200, json.dumps({"client_id": "https://evil.example/x.json"}).encode())
    DOCUMENTS["/big.json"] = (200, b"[" + b"1," * 40_000 + b"1]")
    DOCUMENTS["/moved.json"] = (302, b"")
    document = fetch_client_metadata(good, allow_private=True, context=context)
    assert document["redirect_uris"] == ["http://127.0.0.1/cb"]
    for path, problem in [
        ("/other.json", "must equal the URL"),
        ("/big.json", "exceeds"),
        ("/moved.json", "HTTP 302"),
        ("/missing.json", "HTTP 404"),
    ]:
        with pytest.raises(OAuthError, match=problem):
            fetch_client_metadata(base + path, allow_private=True, context=context)
    with pytest.raises(OAuthError, match="non-public address"):
        fetch_client_metadata(good, context=context)  # the default guard refuses loopback


def test_service_refuses_metadata_clients_on_private_addresses(runtime: Runtime) -> None:
    with pytest.raises(OAuthError) as raised:
        runtime.get(OAuthService).get_client("https://127.0.0.1:9/client.json")
    assert raised.value.error == "invalid_client"
    assert "non-public address" in raised.value.description
