"""The test-only license key pair (never the release's) and helpers to issue keys and move the clock.

Keys are signed by the maintainer script `scripts/license_tool.py` (loaded by path: it is not part of the
package), so that the tests sign exactly as maintainers do and the product verifies what they sign."""

from __future__ import annotations

import base64
import importlib.util
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from codewell.licensing.keys import LicenseDocument
from codewell.licensing.service import LicensingService
from codewell.runtime import Runtime

LICENSE_TOOL = Path(__file__).resolve().parents[3] / "scripts" / "license_tool.py"


def load_license_tool() -> ModuleType:
    """The maintainer script as a module (once per process: click commands are module globals)."""
    known = sys.modules.get("license_tool")
    if known is not None:
        return known
    spec = importlib.util.spec_from_file_location("license_tool", LICENSE_TOOL)
    assert spec is not None, LICENSE_TOOL
    assert spec.loader is not None, LICENSE_TOOL
    module = importlib.util.module_from_spec(spec)
    sys.modules["license_tool"] = module
    spec.loader.exec_module(module)
    return module


license_tool = load_license_tool()

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
    signed: str = license_tool.sign(document, private_key)
    return signed


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
