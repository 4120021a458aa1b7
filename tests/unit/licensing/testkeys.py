"""The test-only license key pair (never the release's) and helpers to issue keys and move the clock."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from codewell.licensing.keys import LicenseDocument, sign
from codewell.licensing.service import LicensingService
from codewell.runtime import Runtime

TEST_PRIVATE_KEY = Ed25519PrivateKey.from_private_bytes(
    base64.b64decode("UJS38mAnKQk0FtCN0MbaOK+oxRoiQmvppKmHL1s5dDA=")
)
TEST_PUBLIC_KEY: Ed25519PublicKey = TEST_PRIVATE_KEY.public_key()


def issue(
    instance_id: str,
    *,
    plan: str = "enterprise",
    expires_in: timedelta = timedelta(days=365),
    user_limit: int | None = 250,
    features: frozenset[str] = frozenset(),
    limits: dict[str, int | None] | None = None,
    private_key: Ed25519PrivateKey = TEST_PRIVATE_KEY,
) -> str:
    now = datetime.now(UTC)
    document = LicenseDocument(
        plan, "Acme Corp", instance_id, user_limit, now, now + expires_in, features, dict(limits or {})
    )
    return sign(document, private_key)


@dataclass
class Clock:
    """An injectable clock: real time shifted by `offset` (move it to simulate the trial's end)."""

    offset: timedelta = timedelta()

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset


def licensing(runtime: Runtime, clock: Clock | None = None) -> LicensingService:
    """Install a LicensingService trusting the test key pair (and an injected clock) in `runtime`."""
    service = LicensingService(runtime, clock=clock or Clock(), public_key=TEST_PUBLIC_KEY)
    runtime.provide(LicensingService, service)
    return service
