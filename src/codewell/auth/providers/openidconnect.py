"""OpenID Connect sign-in: discovery, authorization code + PKCE + nonce, id_token validation, userinfo.

authlib's OAuth 2 client makes the authorization URL and the token request; joserfc verifies the id_token's
signature against the issuer's JWKS and its claims (iss byte-exact, aud contains our client ID, exp, nonce
of this flow). The callback is `/.auth/callback` on `externalURL` for every OpenID Connect provider.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import requests

from codewell.auth.identities import ExternalAccount
from codewell.auth.providers.flows import Flow
from codewell.auth.providers.oauth import HTTP_TIMEOUT, FilterRefused, ProviderError
from codewell.config.providers import OpenIDConnectProvider
from codewell.core.errors import PermissionDenied

if TYPE_CHECKING:
    from authlib.integrations.requests_client import OAuth2Session

SCOPES = "openid email profile"
DISCOVERY_TTL = 300.0
# Asymmetric algorithms only: `none` and HMAC (keyed with the client secret) are never accepted.
SAFE_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
LEEWAY_SECONDS = 60


class TokenRefused(PermissionDenied):
    """The id_token failed validation (signature, issuer, audience, expiry or nonce)."""


@dataclass(frozen=True, slots=True)
class Discovery:
    metadata: dict[str, Any]
    jwks: dict[str, Any]
    fetched_at: float


_cache: dict[str, Discovery] = {}
_cache_lock = threading.Lock()


def _get_json(url: str) -> dict[str, Any]:
    try:
        response = requests.get(url, timeout=HTTP_TIMEOUT, headers={"Accept": "application/json"})
    except requests.RequestException as exc:
        raise ProviderError(f"could not reach the OpenID provider at {url}: {type(exc).__name__}") from None
    if response.status_code != 200:
        raise ProviderError(f"the OpenID provider answered {response.status_code} for {url}")
    data: dict[str, Any] = response.json()
    return data


def discover(issuer: str, *, refresh: bool = False) -> Discovery:
    """The issuer's discovery document and JWKS (cached for five minutes).

    ProviderError when the document's `issuer` differs from the configured one (byte-exact, as OpenID
    Connect Discovery requires: a mismatch means a misconfiguration or an impostor).
    """
    with _cache_lock:
        cached = _cache.get(issuer)
    if cached and not refresh and time.monotonic() - cached.fetched_at < DISCOVERY_TTL:
        return cached
    metadata = _get_json(f"{issuer}/.well-known/openid-configuration")
    if str(metadata.get("issuer", "")).rstrip("/") != issuer:
        raise ProviderError(
            f"the discovery document of {issuer} names a different issuer ({metadata.get('issuer')!r})",
            hint="set `issuer` to exactly the provider's issuer URL",
        )
    for key in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
        if not metadata.get(key):
            raise ProviderError(f"the discovery document of {issuer} has no {key}")
    found = Discovery(metadata, _get_json(str(metadata["jwks_uri"])), time.monotonic())
    with _cache_lock:
        _cache[issuer] = found
    return found


def validate_id_token(
    id_token: str, *, jwks: dict[str, Any], issuer: str, client_id: str, nonce: str, now: int | None = None
) -> dict[str, Any]:
    """The id_token's claims after checking signature, iss, aud (and azp), exp, iat and nonce.

    TokenRefused names the failed check (for the audit log; the message is safe to show).
    """
    # joserfc loads with the first OpenID Connect sign-in, not with every process (issue #30: process starts).
    from joserfc import jwt  # noqa: PLC0415
    from joserfc.errors import JoseError  # noqa: PLC0415
    from joserfc.jwk import KeySet  # noqa: PLC0415

    try:
        token = jwt.decode(id_token, KeySet.import_key_set(jwks), algorithms=list(SAFE_ALGORITHMS))  # type: ignore[arg-type]
    except JoseError as exc:
        raise TokenRefused(f"The id_token's signature is invalid ({exc.error}).") from None
    claims = dict(token.claims)
    registry = jwt.JWTClaimsRegistry(
        now=now,
        leeway=LEEWAY_SECONDS,
        iss={"essential": True, "value": issuer},
        aud={"essential": True, "value": client_id},
        sub={"essential": True},
        exp={"essential": True},
        iat={"essential": True},
        nonce={"essential": True, "value": nonce},
    )
    try:
        registry.validate(claims)
    except JoseError as exc:
        raise TokenRefused(f"The id_token was refused: {exc.description or exc.error}.") from None
    audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
    if len(audiences) > 1 and claims.get("azp") != client_id:
        raise TokenRefused("The id_token was refused: it names several audiences but another authorized party.")
    return claims


class OpenIDConnectClient:
    pkce = True

    def __init__(self, provider: OpenIDConnectProvider, redirect_uri: str) -> None:
        self.provider = provider
        self.redirect_uri = redirect_uri

    def session(self, metadata: dict[str, Any]) -> OAuth2Session:
        from authlib.integrations.requests_client import OAuth2Session  # noqa: PLC0415 - see oauth.py's session

        methods = metadata.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
        if not self.provider.client_secret:
            method = "none"
        elif "client_secret_basic" in methods:
            method = "client_secret_basic"
        else:
            method = "client_secret_post"
        return OAuth2Session(
            self.provider.client_id,
            self.provider.client_secret or None,
            scope=SCOPES,
            redirect_uri=self.redirect_uri,
            code_challenge_method="S256",
            token_endpoint_auth_method=method,
        )

    def authorization_url(self, flow: Flow) -> str:
        metadata = discover(self.provider.issuer).metadata
        url, _ = self.session(metadata).create_authorization_url(
            str(metadata["authorization_endpoint"]),
            state=flow.state,
            nonce=flow.nonce,
            code_verifier=flow.code_verifier,
        )
        return str(url)

    def finish(self, code: str, flow: Flow, iss_param: str | None) -> ExternalAccount:
        """Exchange the code, validate the id_token, read userinfo; the signed-in account."""
        found = discover(self.provider.issuer)
        metadata = found.metadata
        # RFC 9207: when the provider names itself in the redirect, it must be the one we sent the user to.
        if iss_param is not None and iss_param.rstrip("/") != self.provider.issuer:
            raise TokenRefused("The sign-in response came from a different issuer.")
        http = self.session(metadata)
        try:
            token = dict(
                http.fetch_token(
                    str(metadata["token_endpoint"]), code=code, code_verifier=flow.code_verifier, timeout=HTTP_TIMEOUT
                )
            )
        except Exception as exc:
            raise ProviderError(
                f"the OpenID provider refused the sign-in code: {str(exc)[:200]}", hint="start the sign-in again"
            ) from None
        if not token.get("id_token"):
            raise TokenRefused("The OpenID provider returned no id_token.")
        try:
            claims = self._validate(str(token["id_token"]), found.jwks, flow.nonce)
        except TokenRefused:
            # The issuer may have rotated its keys since we cached them: refetch once.
            claims = self._validate(
                str(token["id_token"]), discover(self.provider.issuer, refresh=True).jwks, flow.nonce
            )
        info = claims
        if metadata.get("userinfo_endpoint"):
            response = http.get(str(metadata["userinfo_endpoint"]), timeout=HTTP_TIMEOUT)
            if response.status_code != 200:
                raise ProviderError(f"the OpenID provider's userinfo answered {response.status_code}")
            userinfo = response.json()
            if userinfo.get("sub") != claims["sub"]:  # OIDC Core 5.3.2: must match the id_token
                raise TokenRefused("The userinfo response is for a different subject than the id_token.")
            info = {**claims, **userinfo}
        return self.account(info, token)

    def _validate(self, id_token: str, jwks: dict[str, Any], nonce: str) -> dict[str, Any]:
        return validate_id_token(
            id_token, jwks=jwks, issuer=self.provider.issuer, client_id=self.provider.client_id, nonce=nonce
        )

    def account(self, info: dict[str, Any], token: dict[str, Any]) -> ExternalAccount:
        email = str(info.get("email") or "")
        verified = email if email and info.get("email_verified") is True else ""
        domain = self.provider.require_email_domain
        if domain and (not verified or verified.rsplit("@", 1)[-1].lower() != domain):
            raise FilterRefused(
                f"Only users with a verified e-mail address at {domain} may sign in.",
                hint=f"sign in with your {domain} account",
            )
        username = str(info.get("preferred_username") or info.get("nickname") or email or "")
        return ExternalAccount(
            kind="openidconnect",
            service_id=self.provider.service_id,
            client_id=self.provider.client_id,
            account_id=str(info["sub"]),
            username=username,
            display_name=str(info.get("name") or ""),
            verified_emails=(verified,) if verified else (),
            data={"sub": info["sub"], "email": email, "emailVerified": bool(verified), "name": info.get("name")},
            token={k: v for k, v in token.items() if k != "id_token"},
        )
