"""License keys: the signed document and its offline verification against the build's release key.

A key is `cwl1.<payload>.<signature>`: `payload` is base64url (no padding) of a JSON object, `signature`
the base64url Ed25519 signature of the ASCII text `cwl1.<payload>` (the prefix is signed too, so a
signature can never be replayed under another format). Payload fields (docs/licensing.md):
`plan`, `licensee`, `instanceID` (the instance the key is for, `codewell license show`), `userLimit`
(null: the plan's), `issuedAt`, `expiresAt` (ISO 8601 UTC), `features` (added to the plan's) and
`limits` (overriding the plan's).

Only verification lives here. Making key pairs and signing keys needs the private key, which only
maintainers hold, so it is the maintainer script `scripts/license_tool.py`, outside the package.

The public key a release trusts is the package data file `release_key.pub` beside this module, set by the
distributor when building a release (`scripts/license_tool.py generate --public-key-file ...`). It is
deliberately not a setting: an operator who could point the verifier at a key of their own could sign
any plan for themselves. A build without it (the file absent or holding no key, as in the source
repository) verifies no license key and runs the trial, then the Free plan (`load_release_key`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from codewell.licensing.plans import FEATURES, LIMITS, PLANS, TRIAL_DAYS

PREFIX = "cwl1"
# The release's verification key: package data (pyproject.toml), one line of base64 raw Ed25519 public key;
# lines starting with `#` are comments. Tests point this name at a file of their own (a test seam, read
# when a LicensingService is made; nothing at run time can change it).
RELEASE_KEY_FILE = Path(__file__).with_name("release_key.pub")
MAX_KEY_CHARS = 16_384
# What a build without a usable release key says (license page, `codewell license show`, GET /.api/license).
NO_RELEASE_KEY_REFUSAL = "this build has no release key: license keys cannot be verified"
NO_RELEASE_KEY = f"{NO_RELEASE_KEY_REFUSAL}; the {TRIAL_DAYS}-day trial applies, then the Free plan"
_NO_RELEASE_KEY_HINT = "run a release build of codewell: its distributor sets the release key (docs/licensing.md)"


class KeyProblem(Exception):
    """Why a key cannot be used: `kind` is one of malformed, invalid_signature, wrong_instance, expired,
    no_release_key (this build trusts no key at all)."""

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


@dataclass(frozen=True, slots=True)
class ReleaseKey:
    """The public key this build trusts, or (None) why it trusts none."""

    public_key: Ed25519PublicKey | None
    # What to tell admins when there is no usable key ("" when there is one).
    problem: str = ""


def public_key_from_text(text: str) -> Ed25519PublicKey:
    return Ed25519PublicKey.from_public_bytes(base64.b64decode(text, validate=True))


def load_release_key(path: Path | None = None) -> ReleaseKey:
    """The build's release key from `path` (default `RELEASE_KEY_FILE`, looked up now so that tests can
    point it elsewhere). Absent, empty or comments only: no key. A file that holds something other than
    one Ed25519 public key is a broken build, said as such rather than crashing every command."""
    path = path or RELEASE_KEY_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ReleaseKey(None, NO_RELEASE_KEY)
    except (OSError, UnicodeDecodeError) as exc:
        return ReleaseKey(None, f"{NO_RELEASE_KEY} (the release key file {path} cannot be read: {exc})")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        return ReleaseKey(None, NO_RELEASE_KEY)
    try:
        if len(lines) != 1:
            raise ValueError("more than one line")
        return ReleaseKey(public_key_from_text(lines[0]))
    except (binascii.Error, ValueError):
        return ReleaseKey(None, f"{NO_RELEASE_KEY} (the release key file {path} holds no Ed25519 public key)")


def fingerprint(key: str) -> str:
    """A stable, non-secret name of a key (sha256 of its text) for storage and the audit log."""
    return hashlib.sha256(key.strip().encode()).hexdigest()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


_MALFORMED_HINT = "paste the whole key exactly as issued (it starts with cwl1.)"


def verify(key: str, public_key: Ed25519PublicKey | None, instance_id: str, now: datetime) -> LicenseDocument:
    """The document of a key signed by `public_key` for this instance and not expired; KeyProblem otherwise."""
    document = verify_signature(key, public_key)
    check_applies(document, instance_id, now)
    return document


def verify_signature(key: str, public_key: Ed25519PublicKey | None) -> LicenseDocument:
    """The document of a key signed by `public_key` (KeyProblem otherwise; `no_release_key` when the build
    has none); whether it applies here and now is `check_applies`. The signature is checked before anything
    in the payload is believed. A text that is no key at all is called malformed even in a build without a
    release key: that is the more useful thing to tell whoever pasted it."""
    text = key.strip()
    parts = text.split(".")
    if len(text) > MAX_KEY_CHARS or len(parts) != 3 or parts[0] != PREFIX:
        raise KeyProblem("malformed", "the license key is not a codewell license key", _MALFORMED_HINT)
    try:
        signature, payload_bytes = _unb64(parts[2]), _unb64(parts[1])
    except (binascii.Error, ValueError):
        raise KeyProblem("malformed", "the license key is not a codewell license key", _MALFORMED_HINT) from None
    if public_key is None:
        raise KeyProblem("no_release_key", NO_RELEASE_KEY_REFUSAL, _NO_RELEASE_KEY_HINT)
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
