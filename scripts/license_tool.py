#!/usr/bin/env python3
"""The maintainers' license tool: make the release key pair, set a build's release key, sign license keys.

It lives outside the `codewell` package on purpose: signing needs the release's private key, which only
maintainers hold, and the product ships verification alone (`codewell.licensing.keys`). It imports from
codewell only the key format (`LicenseDocument`, `PREFIX`) and the plan table, so that what it signs is
exactly what the product verifies.

    python scripts/license_tool.py generate --private-key ~/secure/codewell-release.key \\
        [--public-key-file src/codewell/licensing/release_key.pub]
    python scripts/license_tool.py public-key --private-key ~/secure/codewell-release.key \\
        > src/codewell/licensing/release_key.pub          # what a distributor does before building a release
    python scripts/license_tool.py sign --private-key ~/secure/codewell-release.key --plan enterprise \\
        --licensee "Acme Corp" --instance-id <ID> --expires 2027-12-31 [--user-limit 500] [--feature mcp]

The private key is one line of base64 (raw Ed25519), written with mode 0600 and never over an existing
file; it never enters the repository. docs/licensing.md has the key format and the release steps.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

import click
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from codewell.licensing.keys import PREFIX, LicenseDocument
from codewell.licensing.plans import FEATURES, PLANS


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def sign(document: LicenseDocument, private_key: Ed25519PrivateKey) -> str:
    """The license key `cwl1.<payload>.<signature>` of `document` (the prefix is signed with the payload)."""
    body = f"{PREFIX}.{_b64url(json.dumps(document.as_payload(), separators=(',', ':')).encode())}"
    return f"{body}.{_b64url(private_key.sign(body.encode()))}"


def public_key_text(private_key: Ed25519PrivateKey) -> str:
    """The public half as the release key file holds it: base64 of the raw 32 bytes."""
    raw = private_key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode()


def private_key_text(private_key: Ed25519PrivateKey) -> str:
    raw = private_key.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    return base64.b64encode(raw).decode()


def write_private_key(path: Path, private_key: Ed25519PrivateKey) -> None:
    """Write the private key readable by its owner only; O_EXCL so that a typo never destroys a release key."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(private_key_text(private_key) + "\n")


def read_private_key(path: Path) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(base64.b64decode(path.read_text().strip(), validate=True))


def parse_expiry(text: str) -> datetime:
    """ISO 8601; UTC when it names no offset (the verifier compares in UTC)."""
    moment = datetime.fromisoformat(text)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


@click.group()
def main() -> None:
    """Release license key pair: generate it, set a build's release key, sign license keys with it."""


@main.command("generate")
@click.option("--private-key", "private_path", type=click.Path(path_type=Path), required=True)
@click.option(
    "--public-key-file",
    "public_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Also write the public key there (e.g. src/codewell/licensing/release_key.pub).",
)
def generate(private_path: Path, public_path: Path | None) -> None:
    """Write a new private key to PATH (0600, never into the repository) and print the public key."""
    if private_path.exists():
        raise click.ClickException(f"{private_path} exists; refusing to overwrite a private key")
    key = Ed25519PrivateKey.generate()
    write_private_key(private_path, key)
    if public_path is not None:
        public_path.write_text(public_key_text(key) + "\n")
    click.echo(public_key_text(key))


@main.command("public-key")
@click.option("--private-key", "private_path", type=click.Path(exists=True, path_type=Path), required=True)
def public_key(private_path: Path) -> None:
    """Print the public key of a private key: the content of a release build's release_key.pub."""
    click.echo(public_key_text(read_private_key(private_path)))


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
    try:
        expires_at = parse_expiry(expires)
    except ValueError:
        raise click.BadParameter(f"{expires!r} is not an ISO 8601 date or time", param_hint="--expires") from None
    document = LicenseDocument(
        plan, licensee, instance_id, user_limit, datetime.now(UTC), expires_at, frozenset(features)
    )
    click.echo(sign(document, read_private_key(private_path)))


if __name__ == "__main__":
    sys.exit(main())
