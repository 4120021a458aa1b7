"""SAML 2.0 sign-in with pysaml2 (XML signatures checked by the `xmlsec1` binary, Debian package xmlsec1).

Why pysaml2: it installs from PyPI as pure Python and drives the distribution's xmlsec1 tool, so there is
no C extension to build against libxml2 (python3-saml's `xmlsec` binding must match lxml's libxml2 exactly,
a frequent install failure); it also implements an IdP, which the tests use as the test IdP.

Flow: `GET /.auth/saml/login` sends an AuthnRequest (HTTP-Redirect; its ID is derived from the flow's
nonce, RelayState is the flow's state) → the IdP posts a Response to `POST /.auth/saml/acs` → the flow is
consumed, the Response must answer our request (InResponseTo), come for our audience, be in its validity
window and carry a *signed* assertion (unless insecureSkipAssertionSignatureValidation) from the IdP whose
metadata is configured. SP metadata: `GET /.auth/saml/metadata`.
"""

from __future__ import annotations

import functools
import gc
import os
import shutil
import types
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import requests
from cryptography.utils import CryptographyDeprecationWarning

from codewell.auth.identities import ExternalAccount
from codewell.auth.providers.flows import Flow
from codewell.auth.providers.oauth import HTTP_TIMEOUT, FilterRefused, ProviderError
from codewell.config.providers import SAMLProvider
from codewell.core.errors import CodewellError, PermissionDenied, Unavailable

if TYPE_CHECKING:
    from saml2.client import Saml2Client
    from saml2.config import SPConfig

    from codewell.runtime import Runtime

# The SAML bindings used here (saml2.BINDING_HTTP_POST / BINDING_HTTP_REDIRECT).
BINDING_HTTP_POST = "urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST"
BINDING_HTTP_REDIRECT = "urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect"


@functools.cache
def _pysaml2() -> types.SimpleNamespace:
    """pysaml2, imported on first use: loading its XML schemas takes ~0.7 s, which every `codewell` command
    would otherwise pay (the one justified import inside a function in auth/)."""
    with warnings.catch_warnings():  # pysaml2 still imports a cipher mode cryptography has moved (harmless here)
        warnings.simplefilter("ignore", CryptographyDeprecationWarning)
        from saml2.client import Saml2Client  # noqa: PLC0415
        from saml2.config import SPConfig  # noqa: PLC0415
        from saml2.metadata import create_metadata_string  # noqa: PLC0415
    return types.SimpleNamespace(
        Saml2Client=Saml2Client, SPConfig=SPConfig, create_metadata_string=create_metadata_string
    )


ACS_PATH = "/.auth/saml/acs"
METADATA_PATH = "/.auth/saml/metadata"
EMAIL_ATTRIBUTES = (
    "email",
    "mail",
    "emailAddress",
    "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress",
)
USERNAME_ATTRIBUTES = ("login", "username", "uid", "nickname", "eduPersonPrincipalName")
NAME_ATTRIBUTES = ("displayName", "displayname", "cn", "name")


P = ParamSpec("P")
R = TypeVar("R")


def _reaps_temp_files(fn: Callable[P, R]) -> Callable[P, R]:
    """pysaml2 leaves NamedTemporaryFile objects (certificates written for xmlsec1) in reference cycles when
    it raises (exception ↔ frame). On a refusal, drop the original exception and collect those cycles at
    once, without their ResourceWarnings, so no file handle outlives the request."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            try:
                return fn(*args, **kwargs)
            except CodewellError as exc:
                # A fresh copy carries no traceback, so nothing keeps pysaml2's frames alive.
                error = type(exc)(exc.message, hint=exc.hint)
            gc.collect()
        raise error

    return wrapper


class AssertionRefused(PermissionDenied):
    """The SAML response is unsigned, tampered, expired, for someone else or not an answer to our request."""


def xmlsec_binary() -> str:
    found = shutil.which("xmlsec1")
    if found is None:
        raise Unavailable(
            "SAML sign-in needs the xmlsec1 program, which is not installed.", hint="apt-get install xmlsec1"
        )
    return found


def request_id(flow: Flow) -> str:
    """The AuthnRequest ID of a flow (an XML NCName: starts with a letter)."""
    return f"id-{flow.nonce}"


class SAMLClient:
    def __init__(self, provider: SAMLProvider, external_url: str, key_dir: Path | None = None) -> None:
        self.provider = provider
        self.external_url = external_url
        self.key_dir = key_dir

    @property
    def entity_id(self) -> str:
        return self.provider.service_provider_issuer or f"{self.external_url}{METADATA_PATH}"

    def _metadata_xml(self) -> str:
        if self.provider.identity_provider_metadata:
            return self.provider.identity_provider_metadata
        try:
            response = requests.get(self.provider.identity_provider_metadata_url, timeout=HTTP_TIMEOUT)
        except requests.RequestException as exc:
            raise ProviderError(f"could not fetch the SAML IdP metadata: {type(exc).__name__}") from None
        if response.status_code != 200:
            raise ProviderError(f"the SAML IdP metadata URL answered {response.status_code}")
        return response.text

    def _key_files(self) -> dict[str, str]:
        """pysaml2 reads the SP key pair from files: written (0600) under the data dir when configured."""
        if not self.provider.service_provider_private_key or self.key_dir is None:
            return {}
        self.key_dir.mkdir(parents=True, exist_ok=True)
        key, cert = self.key_dir / "sp-key.pem", self.key_dir / "sp-cert.pem"
        for path, text in (
            (key, self.provider.service_provider_private_key),
            (cert, self.provider.service_provider_certificate),
        ):
            tmp = path.with_suffix(".tmp")
            tmp.write_text(text)
            tmp.chmod(0o600)
            os.replace(tmp, path)
        return {"key_file": str(key), "cert_file": str(cert)}

    def config(self, *, with_idp: bool = True) -> SPConfig:
        sp: dict[str, Any] = {
            "endpoints": {"assertion_consumer_service": [(f"{self.external_url}{ACS_PATH}", BINDING_HTTP_POST)]},
            "allow_unsolicited": False,
            "authn_requests_signed": bool(self.provider.sign_requests),
            "want_assertions_signed": not self.provider.insecure_skip_assertion_signature_validation,
            "want_response_signed": False,
            "name_id_format": [self.provider.name_id_format],
        }
        settings: dict[str, Any] = {
            "entityid": self.entity_id,
            "xmlsec_binary": xmlsec_binary(),
            "service": {"sp": sp},
            "allow_unknown_attributes": True,
            **self._key_files(),
        }
        if with_idp:
            settings["metadata"] = {"inline": [self._metadata_xml()]}
        config = _pysaml2().SPConfig()
        try:
            config.load(settings)
        except Exception as exc:  # pysaml2 raises assorted errors for bad metadata or keys
            raise ProviderError(f"the SAML configuration is unusable: {str(exc)[:200]}") from None
        return config

    def client(self) -> Saml2Client:
        client: Saml2Client = _pysaml2().Saml2Client(config=self.config())
        return client

    @_reaps_temp_files
    def authorization_url(self, flow: Flow) -> str:
        client = self.client()
        _, info = client.prepare_for_authenticate(
            relay_state=flow.state,
            binding=BINDING_HTTP_REDIRECT,
            message_id=request_id(flow),
            nameid_format=self.provider.name_id_format,
        )
        location = dict(info["headers"]).get("Location")
        if not location:
            raise ProviderError("the SAML IdP metadata has no HTTP-Redirect single sign-on service")
        return str(location)

    @_reaps_temp_files
    def metadata(self) -> str:
        return str(_pysaml2().create_metadata_string(None, config=self.config(with_idp=False), sign=False).decode())

    @_reaps_temp_files
    def finish(self, saml_response: str, flow: Flow) -> ExternalAccount:
        """The account of a verified Response to this flow's request; AssertionRefused otherwise."""
        client = self.client()
        failure = ""
        try:
            response = client.parse_authn_request_response(
                saml_response, BINDING_HTTP_POST, outstanding={request_id(flow): flow.return_to}
            )
        except CodewellError:
            raise
        except Exception as exc:  # pysaml2 signals every refusal with its own exception types
            failure = f"{type(exc).__name__}: {str(exc)[:160]}"
        if failure:
            raise AssertionRefused(
                f"The SAML response was refused ({failure}).",
                hint="sign in again; if it keeps failing, ask a site admin to check the SAML configuration",
            )
        if response is None or response.assertion is None:
            raise AssertionRefused("The SAML response carries no assertion.")
        if not self.provider.insecure_skip_assertion_signature_validation and not _assertion_signed(response):
            raise AssertionRefused("The SAML assertion is not signed.")
        return self.account(response)

    def account(self, response: Any) -> ExternalAccount:
        identity: dict[str, list[str]] = response.get_identity() or {}
        subject = response.get_subject()
        name_id = str(getattr(subject, "text", "") or "").strip()
        if not name_id:
            raise AssertionRefused("The SAML assertion has no NameID.")
        email = _first(identity, EMAIL_ATTRIBUTES)
        username = _first(identity, tuple(self.provider.username_attribute_names) or USERNAME_ATTRIBUTES) or email
        groups = [str(g) for g in identity.get(self.provider.groups_attribute_name, [])]
        if self.provider.allow_groups and not set(groups) & set(self.provider.allow_groups):
            raise FilterRefused(
                "Your SAML account is not in a group allowed to sign in.",
                hint="ask a site admin to add you to one of the groups in allowGroups",
            )
        return ExternalAccount(
            kind="saml",
            service_id=str(response.issuer() or self.provider.service_id),
            client_id=self.entity_id,
            account_id=name_id,
            username=username,
            display_name=_first(identity, NAME_ATTRIBUTES),
            # The IdP asserts the address in a signed assertion: it counts as verified.
            verified_emails=(email,) if email else (),
            data={"nameID": name_id, "email": email, "groups": groups},
        )


def _first(identity: dict[str, list[str]], names: tuple[str, ...]) -> str:
    for name in names:
        values = identity.get(name)
        if values:
            return str(values[0]).strip()
    return ""


def _assertion_signed(response: Any) -> bool:
    # pysaml2 already verified any signature present; this makes "the assertion itself is signed" explicit.
    return getattr(response.assertion, "signature", None) is not None


def client_for(runtime: Runtime, provider: SAMLProvider) -> SAMLClient:
    return SAMLClient(provider, runtime.external_url, runtime.settings.data_dir / "saml")
