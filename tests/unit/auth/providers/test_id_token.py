"""id_token validation: signature, issuer, audience, nonce, expiry and algorithm are all enforced."""

from __future__ import annotations

import time
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, OctKey, RSAKey

from codewell.auth.providers.openidconnect import TokenRefused, validate_id_token

ISSUER = "https://idp.example"
CLIENT = "codewell"
KEY = RSAKey.generate_key(2048, parameters={"kid": "k1"})
JWKS = KeySet([KEY]).as_dict(private=False)


def mint(key: Any = KEY, alg: str = "RS256", **overrides: Any) -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": CLIENT, "sub": "u1", "iat": now, "exp": now + 300, "nonce": "n1", **overrides}
    claims = {k: v for k, v in claims.items() if v is not None}
    return jwt.encode({"alg": alg, "kid": "k1"}, claims, key, algorithms=[alg])


def check(token: str, **kwargs: Any) -> dict[str, Any]:
    options = {"jwks": JWKS, "issuer": ISSUER, "client_id": CLIENT, "nonce": "n1", **kwargs}
    return validate_id_token(token, **options)


def test_a_valid_token_passes() -> None:
    assert check(mint())["sub"] == "u1"


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"iss": "https://evil.example"}, "iss"),
        ({"aud": "another-client"}, "aud"),
        ({"nonce": "replayed"}, "nonce"),
        ({"nonce": None}, "nonce"),
        ({"exp": int(time.time()) - 3600}, "expired"),
        ({"aud": [CLIENT, "other"], "azp": "other"}, "authorized party"),
    ],
)
def test_wrong_claims_are_refused(overrides: dict[str, Any], words: str) -> None:
    with pytest.raises(TokenRefused) as info:
        check(mint(**overrides))
    assert words in info.value.message.lower() or words in info.value.message


def test_a_token_signed_by_another_key_is_refused() -> None:
    other = RSAKey.generate_key(2048, parameters={"kid": "k1"})
    with pytest.raises(TokenRefused, match="signature"):
        check(mint(key=other))


def test_tampered_payload_is_refused() -> None:
    header, payload, signature = mint().split(".")
    forged = mint(sub="admin").split(".")[1]
    with pytest.raises(TokenRefused, match="signature"):
        check(f"{header}.{forged[:-2]}AA.{signature}")
    assert payload != forged


def test_hmac_with_the_client_secret_is_not_accepted() -> None:
    secret = OctKey.import_key(b"x" * 32)
    with pytest.raises(TokenRefused):
        check(mint(key=secret, alg="HS256"))
