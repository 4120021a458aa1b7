"""Password hashing with argon2id, and a dummy verification that makes unknown users cost the same time."""

from __future__ import annotations

import functools

from argon2 import Parameters, PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from codewell.core.errors import InvalidInput


class _Hashing:
    # argon2-cffi's RFC 9106 low-memory profile (t=3, m=64 MiB, p=4): ~50 ms per hash on the reference machine.
    hasher = PasswordHasher()


MAX_PASSWORD_LENGTH = 256


def use_hash_parameters(parameters: Parameters) -> None:
    """Hash new passwords (and the dummy) with `parameters` from now on; verification always uses the parameters
    stored in each hash. Only the test suite calls this, with argon2's cheapest profile: a default hash costs
    ~0.5 s on a slow machine and many tests sign in. The service always runs with the default."""
    _Hashing.hasher = PasswordHasher.from_parameters(parameters)
    _dummy_hash.cache_clear()


def hash_password(password: str) -> str:
    return _Hashing.hasher.hash(password)


@functools.cache
def _dummy_hash() -> str:
    return _Hashing.hasher.hash("codewell dummy password, never matches a real one")


def verify_password(stored_hash: str | None, password: str) -> bool:
    """True when `password` matches; without a stored hash, spend one verification anyway and return False."""
    try:
        if stored_hash is None:
            _Hashing.hasher.verify(_dummy_hash(), password + "\x00")
            return False
        return _Hashing.hasher.verify(stored_hash, password)
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
