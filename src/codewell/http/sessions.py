"""Signed session cookies and CSRF tokens (pure helpers; the session rows live in accounts' tables)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

SESSION_COOKIE = "cw_session"
# Before sign-in there is no session to hold the CSRF token: a random cookie is compared with the form field.
PRESESSION_CSRF_COOKIE = "cw_csrf"
CSRF_FORM_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"


def _mac(key: bytes, purpose: str, value: str) -> str:
    digest = hmac.new(key, f"{purpose}:{value}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest[:24]).decode().rstrip("=")


def new_session_id() -> str:
    return secrets.token_urlsafe(32)


def new_csrf_token() -> str:
    return secrets.token_urlsafe(32)


def sign(key: bytes, purpose: str, value: str) -> str:
    """`value.signature`: tampering (or a cookie minted for another purpose) fails `unsign`."""
    return f"{value}.{_mac(key, purpose, value)}"


def unsign(key: bytes, purpose: str, signed: str) -> str | None:
    """The value of a `sign`ed string, or None when the signature does not match."""
    value, _, signature = signed.rpartition(".")
    if not value or not hmac.compare_digest(signature, _mac(key, purpose, value)):
        return None
    return value


def same(a: str, b: str) -> bool:
    """Constant-time equality for CSRF tokens (empty never matches)."""
    return bool(a) and bool(b) and hmac.compare_digest(a.encode(), b.encode())
