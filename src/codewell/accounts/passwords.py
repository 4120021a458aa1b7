"""Password hashing with argon2id, and a dummy verification that makes unknown users cost the same time."""

from __future__ import annotations

import functools

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from codewell.core.errors import InvalidInput

# argon2-cffi's RFC 9106 low-memory profile (t=3, m=64 MiB, p=4): ~50 ms per hash on the reference machine.
_HASHER = PasswordHasher()
MAX_PASSWORD_LENGTH = 256


def hash_password(password: str) -> str:
    return _HASHER.hash(password)


@functools.cache
def _dummy_hash() -> str:
    return _HASHER.hash("codewell dummy password, never matches a real one")


def verify_password(stored_hash: str | None, password: str) -> bool:
    """True when `password` matches; without a stored hash, spend one verification anyway and return False."""
    try:
        if stored_hash is None:
            _HASHER.verify(_dummy_hash(), password + "\x00")
            return False
        return _HASHER.verify(stored_hash, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def check_password_policy(password: str, min_length: int) -> None:
    """Raise InvalidInput unless `password` satisfies `auth.minPasswordLength` and the maximum length."""
    if len(password) < min_length:
        raise InvalidInput(
            f"the password must be at least {min_length} characters long",
            hint="choose a longer passphrase (site config auth.minPasswordLength)",
        )
    if len(password) > MAX_PASSWORD_LENGTH:
        raise InvalidInput(f"the password must be at most {MAX_PASSWORD_LENGTH} characters long")
