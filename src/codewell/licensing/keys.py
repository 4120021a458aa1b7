"""License keys: the signed document, its offline verification, and the maintainer commands.

A key is `cwl1.<payload>.<signature>`: `payload` is base64url (no padding) of a JSON object, `signature`
the base64url Ed25519 signature of the ASCII text `cwl1.<payload>` (the prefix is signed too, so a
signature can never be replayed under another format). Payload fields (docs/licensing.md):
`plan`, `licensee`, `instanceID` (the instance the key is for, `codewell license show`), `userLimit`
(null: the plan's), `issuedAt`, `expiresAt` (ISO 8601 UTC), `features` (added to the plan's) and
`limits` (overriding the plan's).

The release verifies with `RELEASE_PUBLIC_KEY` only. Its private half never enters the repository: a
maintainer makes a pair with `python -m codewell.licensing.keys generate --private-key PATH` (the
private key is written to PATH with mode 0600, the public key printed to paste here) and signs keys with
`python -m codewell.licensing.keys sign --private-key PATH --plan ... --licensee ... --instance-id ...`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from codewell.licensing.plans import FEATURES, LIMITS, PLANS

PREFIX = "cwl1"
# The release's verification key (raw Ed25519, base64). Replace it with the output of `generate` when the
# release key pair is rotated; keys signed by the old pair stop verifying.
RELEASE_PUBLIC_KEY = "dQX2ekKt16mY8Pcmv0q62NlxEIlbeYFmPwq5nCSiZdY="
MAX_KEY_CHARS = 16_384


class KeyProblem(Exception):
    """Why a key cannot be used: `kind` is one of malformed, invalid_signature, wrong_instance, expired."""

    def __init__(self, kind: str, message: str, hint: str) -> None:
        super().__init__(message)
        self.kind, self.message, self.hint = kind, message, hint


@dataclass(frozen=True, slots=True)
class LicenseDocument:
    plan: str
    licensee: str
    instance_id: str
    user_limit: int | None
    issued_at: datetime
    expires_at: datetime
    features: frozenset[str] = frozenset()
    limits: dict[str, int | None] = field(default_factory=dict)

    def as_payload(self) -> dict[str, Any]:
        return {
            "plan": self.plan,
            "licensee": self.licensee,
            "instanceID": self.instance_id,
            "userLimit": self.user_limit,
            "issuedAt": self.issued_at.isoformat(),
            "expiresAt": self.expires_at.isoformat(),
            "features": sorted(self.features),
            "limits": dict(sorted(self.limits.items())),
        }


def public_key_from_text(text: str) -> Ed25519PublicKey:
    return Ed25519PublicKey.from_public_bytes(base64.b64decode(text))


def fingerprint(key: str) -> str:
    """A stable, non-secret name of a key (sha256 of its text) for storage and the audit log."""
    return hashlib.sha256(key.strip().encode()).hexdigest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sign(document: LicenseDocument, private_key: Ed25519PrivateKey) -> str:
    body = f"{PREFIX}.{_b64(json.dumps(document.as_payload(), separators=(',', ':')).encode())}"
    return f"{body}.{_b64(private_key.sign(body.encode()))}"


_MALFORMED_HINT = "paste the whole key exactly as issued (it starts with cwl1.)"


def verify(key: str, public_key: Ed25519PublicKey, instance_id: str, now: datetime) -> LicenseDocument:
    """The document of a key signed by `public_key` for this instance and not expired; KeyProblem otherwise."""
    document = verify_signature(key, public_key)
    check_applies(document, instance_id, now)
    return document


def verify_signature(key: str, public_key: Ed25519PublicKey) -> LicenseDocument:
    """The document of a key signed by `public_key` (KeyProblem otherwise); whether it applies here and now
    is `check_applies`. The signature is checked before anything in the payload is believed."""
    text = key.strip()
    parts = text.split(".")
    if len(text) > MAX_KEY_CHARS or len(parts) != 3 or parts[0] != PREFIX:
        raise KeyProblem("malformed", "the license key is not a codewell license key", _MALFORMED_HINT)
    try:
        signature, payload_bytes = _unb64(parts[2]), _unb64(parts[1])
    except (binascii.Error, ValueError):
        raise KeyProblem("malformed", "the license key is not a codewell license key", _MALFORMED_HINT) from None
    try:
        public_key.verify(signature, f"{parts[0]}.{parts[1]}".encode())
    except InvalidSignature:
        raise KeyProblem(
            "invalid_signature",
            "the license key's signature is not valid: it was changed or not issued for this release",
            "paste the key exactly as issued, or ask your codewell contact for a new one",
        ) from None
    return _parse(payload_bytes)


def check_applies(document: LicenseDocument, instance_id: str, now: datetime) -> None:
    """KeyProblem when a verified document is for another instance or has expired."""
    if document.instance_id != instance_id:
        raise KeyProblem(
            "wrong_instance",
            "the license key was issued for another instance",
            f"ask for a key for this instance's ID {instance_id} (shown by codewell license show)",
        )
    if now >= document.expires_at:
        raise KeyProblem(
            "expired",
            f"the license key expired on {document.expires_at:%Y-%m-%d %H:%M} UTC",
            "ask your codewell contact for a renewed key and install it with codewell license set",
        )


def _parse(payload: bytes) -> LicenseDocument:
    """A signed payload's document; a signed but unreadable one is still refused as malformed."""
    try:
        data = json.loads(payload)
        plan, licensee, instance_id = data["plan"], data["licensee"], data["instanceID"]
        user_limit = data.get("userLimit")
        features = frozenset(data.get("features", ()))
        limits = dict(data.get("limits", {}))
        document = LicenseDocument(
            plan=plan,
            licensee=licensee,
            instance_id=instance_id,
            user_limit=user_limit,
            issued_at=_utc(data["issuedAt"]),
            expires_at=_utc(data["expiresAt"]),
            features=features,
            limits=limits,
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        raise KeyProblem("malformed", "the license key's contents cannot be read", _MALFORMED_HINT) from None
    valid = (
        isinstance(plan, str)
        and plan in PLANS
        and PLANS[plan].purchasable
        and isinstance(licensee, str)
        and isinstance(instance_id, str)
        and (user_limit is None or (isinstance(user_limit, int) and not isinstance(user_limit, bool)))
        and features <= set(FEATURES)
        and set(limits) <= set(LIMITS)
        and all(v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in limits.values())
    )
    if not valid:
        raise KeyProblem("malformed", "the license key's contents cannot be read", _MALFORMED_HINT)
    return document


def _utc(text: object) -> datetime:
    if not isinstance(text, str):
        raise ValueError("not a timestamp")
    moment = datetime.fromisoformat(text)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


# -- maintainer commands (not part of `codewell`: they need the private key, which only maintainers hold) ----
@click.group()
def main() -> None:
    """Release license key pair: generate it, sign license keys with it."""


@main.command("generate")
@click.option("--private-key", "private_path", type=click.Path(path_type=Path), required=True)
def generate(private_path: Path) -> None:
    """Write a new private key to PATH (0600, never into the repository) and print the public key."""
    if private_path.exists():
        raise click.ClickException(f"{private_path} exists; refusing to overwrite a private key")
    key = Ed25519PrivateKey.generate()
    raw = key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(base64.b64encode(raw).decode() + "\n")
    public = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    click.echo(f'RELEASE_PUBLIC_KEY = "{base64.b64encode(public).decode()}"')


@main.command("sign")
@click.option("--private-key", "private_path", type=click.Path(exists=True, path_type=Path), required=True)
@click.option("--plan", type=click.Choice([p.name for p in PLANS.values() if p.purchasable]), required=True)
@click.option("--licensee", required=True)
@click.option("--instance-id", required=True, help="From `codewell license show` on the customer's instance.")
@click.option("--expires", required=True, help="Expiry, ISO 8601 (UTC when no offset).")
@click.option("--user-limit", type=int, default=None)
@click.option("--feature", "features", multiple=True, type=click.Choice(FEATURES), help="Added to the plan's.")
def sign_command(
    private_path: Path,
    plan: str,
    licensee: str,
    instance_id: str,
    expires: str,
    user_limit: int | None,
    features: tuple[str, ...],
) -> None:
    """Print a license key."""
    private = Ed25519PrivateKey.from_private_bytes(base64.b64decode(private_path.read_text().strip()))
    document = LicenseDocument(
        plan, licensee, instance_id, user_limit, datetime.now(UTC), _utc(expires), frozenset(features)
    )
    click.echo(sign(document, private))


if __name__ == "__main__":
    sys.exit(main())
