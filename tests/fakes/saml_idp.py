"""A test SAML IdP built with pysaml2 (the library codewell's SP uses), signing with xmlsec1."""

from __future__ import annotations

import base64
import datetime
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.utils import CryptographyDeprecationWarning
from cryptography.x509.oid import NameOID

with warnings.catch_warnings():
    warnings.simplefilter("ignore", CryptographyDeprecationWarning)
    from saml2 import BINDING_HTTP_POST, BINDING_HTTP_REDIRECT
    from saml2.config import IdPConfig
    from saml2.metadata import create_metadata_string
    from saml2.saml import AUTHN_PASSWORD, NAME_FORMAT_BASIC, NAMEID_FORMAT_PERSISTENT, NameID
    from saml2.server import Server

IDP_ENTITY = "https://idp.test/metadata"
SSO_URL = "https://idp.test/sso"


@contextmanager
def reaping() -> Iterator[None]:
    """pysaml2 never closes its temporary files; they are freed on return: keep their ResourceWarnings quiet."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        yield


def self_signed(common_name: str, directory: Path) -> tuple[Path, Path]:
    """A fresh RSA key and self-signed certificate (PEM files) for signing SAML messages."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    key_path, cert_path = directory / f"{common_name}-key.pem", directory / f"{common_name}-cert.pem"
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key_path, cert_path


class TestIdP:
    """Answers AuthnRequests from the SP whose metadata it is given, for the user set in `identity`."""

    __test__ = False

    def __init__(self, directory: Path) -> None:
        self.key, self.cert = self_signed("idp", directory)
        self.directory = directory
        self._server: Server | None = None

    def _config(self, sp_metadata: str | None) -> IdPConfig:
        settings: dict[str, Any] = {
            "entityid": IDP_ENTITY,
            "xmlsec_binary": "/usr/bin/xmlsec1",
            "service": {
                "idp": {
                    "endpoints": {"single_sign_on_service": [(SSO_URL, BINDING_HTTP_REDIRECT)]},
                    "name_id_format": [NAMEID_FORMAT_PERSISTENT],
                    "policy": {"default": {"lifetime": {"minutes": 15}, "name_form": NAME_FORMAT_BASIC}},
                }
            },
            "key_file": str(self.key),
            "cert_file": str(self.cert),
            "allow_unknown_attributes": True,
        }
        if sp_metadata:
            settings["metadata"] = {"inline": [sp_metadata]}
        config = IdPConfig()
        config.load(settings)
        return config

    def metadata(self) -> str:
        with reaping():
            return str(create_metadata_string(None, config=self._config(None), sign=False).decode())

    def respond(
        self,
        sp_metadata: str,
        redirect_url: str,
        *,
        user: str,
        attributes: dict[str, list[str]],
        sign_assertion: bool = True,
        sign_response: bool = False,
    ) -> dict[str, str]:
        """The form fields (SAMLResponse, RelayState) the IdP's page would POST to the SP's ACS."""
        with reaping():
            return self._respond(sp_metadata, redirect_url, user, attributes, sign_assertion, sign_response)

    def _respond(
        self,
        sp_metadata: str,
        redirect_url: str,
        user: str,
        attributes: dict[str, list[str]],
        sign_assertion: bool,
        sign_response: bool,
    ) -> dict[str, str]:
        server = Server(config=self._config(sp_metadata))
        query = parse_qs(urlsplit(redirect_url).query)
        request = server.parse_authn_request(query["SAMLRequest"][0], BINDING_HTTP_REDIRECT)
        args = server.response_args(request.message, [BINDING_HTTP_POST])
        response = server.create_authn_response(
            identity=attributes,
            userid=user,
            name_id=NameID(format=NAMEID_FORMAT_PERSISTENT, text=f"persistent-{user}"),
            authn={"class_ref": AUTHN_PASSWORD, "authn_auth": SSO_URL},
            sign_assertion=sign_assertion,
            sign_response=sign_response,
            **args,
        )
        return {
            "SAMLResponse": base64.b64encode(str(response).encode()).decode(),
            "RelayState": query["RelayState"][0],
        }
