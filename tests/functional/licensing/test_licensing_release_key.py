"""The release key as a build carries it: a key pair made by the maintainer script (a real process), its public
half installed as the build's `release_key.pub` (the test points the package-data path at its own file: a test
seam, not a setting), keys signed by it verifying and keys of any other signer refused; and a build without one
saying so on the license page, in the REST answer and the banners, while the trial and its gates run as ever."""

from __future__ import annotations

import html
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from codewell.accounts.audit import AuditService
from codewell.core.actors import INTERNAL
from codewell.core.errors import InvalidInput
from codewell.licensing import keys, plans
from codewell.licensing.service import FeatureNotLicensed, LicensingService
from codewell.runtime import Runtime
from tests.factories import auth_headers, make_token, make_user, set_site_config
from tests.unit.licensing.testkeys import LICENSE_TOOL, Clock, issue

pytestmark = pytest.mark.database

AFTER_TRIAL = timedelta(days=plans.TRIAL_DAYS, minutes=1)


def tool(*args: str) -> subprocess.CompletedProcess[str]:
    """The maintainer script as maintainers run it: its own process, outside the package."""
    return subprocess.run(
        [sys.executable, str(LICENSE_TOOL), *args], capture_output=True, text=True, timeout=60, check=False
    )


def notices(page: str) -> list[str]:
    found = re.findall(r'<p class="page-notice[^"]*"[^>]*>(.*?)</p>', page)
    return [html.unescape(re.sub(r"<[^>]+>", "", n)).strip() for n in found]


def build_with_release_key(runtime: Runtime, monkeypatch: pytest.MonkeyPatch, path: Path, clock: Clock) -> None:
    """What a build whose package data holds `path` runs: the product's own LicensingService (no injected key)."""
    monkeypatch.setattr(keys, "RELEASE_KEY_FILE", path)
    runtime.provide(LicensingService, LicensingService(runtime, clock=clock))


def test_a_release_build_verifies_keys_signed_by_its_pair_and_refuses_every_other_signer(
    client: TestClient, runtime: Runtime, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    private, release_file = tmp_path / "release.key", tmp_path / "release_key.pub"
    generated = tool("generate", "--private-key", str(private), "--public-key-file", str(release_file))
    assert generated.returncode == 0, generated.stderr
    assert release_file.read_text().strip() == generated.stdout.strip()
    assert private.stat().st_mode & 0o777 == 0o600
    assert tool("generate", "--private-key", str(private)).returncode != 0  # a release key is never overwritten

    clock = Clock()
    build_with_release_key(runtime, monkeypatch, release_file, clock)
    service = runtime.get(LicensingService)
    instance = runtime.db.instance_id()
    signed = tool(
        "sign", "--private-key", str(private), "--plan", "team", "--licensee", "Acme Corp",
        "--instance-id", instance, "--expires", "2099-12-31", "--user-limit", "33", "--feature", "mcp",
    )  # fmt: skip
    assert signed.returncode == 0, signed.stderr

    # Keys of any other signer: another pair made by the script, and the tests' own pair.
    other = tmp_path / "other.key"
    assert tool("generate", "--private-key", str(other)).returncode == 0
    by_other = tool(
        "sign", "--private-key", str(other), "--plan", "enterprise", "--licensee", "Mallory",
        "--instance-id", instance, "--expires", "2099-12-31",
    )  # fmt: skip
    assert by_other.returncode == 0, by_other.stderr
    for foreign in (by_other.stdout.strip(), issue(instance)):
        with pytest.raises(InvalidInput) as refused:
            service.set_key(INTERNAL, foreign)
        assert refused.value.message.startswith("the license key's signature is not valid")
    assert service.status().source == "trial"

    status = service.set_key(INTERNAL, signed.stdout.strip())
    assert (status.plan.name, status.licensee, status.limits[plans.USERS]) == ("team", "Acme Corp", 33)
    assert status.release_key_problem == ""
    clock.offset = AFTER_TRIAL
    service.require_feature(plans.MCP)  # the key's extra feature, after the trial too

    admin_h = auth_headers(make_token(runtime, make_user(runtime, "root", site_admin=True)))
    body = client.get("/.api/license", headers=admin_h).json()
    assert body["releaseKey"] == {"present": True, "problem": None}
    assert (body["plan"], body["source"]) == ("team", "license")
    page = client.get("/site-admin/license", headers=admin_h).text
    assert '<td id="release-key">present</td>' in page
    assert "release-key-missing" not in page
    entries = runtime.get(AuditService).list(INTERNAL, entity="licensing.key")
    assert sorted((e.action, e.details.get("problem", "")) for e in entries) == [
        ("installed", ""),
        ("rejected", "invalid_signature"),
        ("rejected", "invalid_signature"),
    ]


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, keys.NO_RELEASE_KEY),
        ("", keys.NO_RELEASE_KEY),
        ("# set by the distributor\n\n", keys.NO_RELEASE_KEY),
        ("not base64 at all\n", "holds no Ed25519 public key"),
        ("QUJD\n", "holds no Ed25519 public key"),  # base64 of three bytes: not a 32-byte key
    ],
    ids=["absent", "empty", "comments-only", "garbage", "short"],
)
def test_a_build_without_a_release_key_says_so_everywhere_and_runs_the_trial_then_free(
    client: TestClient,
    runtime: Runtime,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    content: str | None,
    said: str,
) -> None:
    release_file = tmp_path / "release_key.pub"
    if content is not None:
        release_file.write_text(content)
    clock = Clock()
    build_with_release_key(runtime, monkeypatch, release_file, clock)
    service = runtime.get(LicensingService)
    status = service.status()
    assert status.release_key_problem.startswith(keys.NO_RELEASE_KEY)
    assert said in status.release_key_problem
    # The gate is the spec's: every feature in the trial, the tool server included.
    assert status.source == "trial"
    service.require_feature(plans.MCP)

    # No key can be installed, whoever signed it: one message naming the cause, audited.
    with pytest.raises(InvalidInput) as refused:
        service.set_key(INTERNAL, issue(runtime.db.instance_id()))
    assert refused.value.message == keys.NO_RELEASE_KEY_REFUSAL
    entries = runtime.get(AuditService).list(INTERNAL, entity="licensing.key")
    assert [(e.action, e.details["problem"]) for e in entries] == [("rejected", "no_release_key")]

    admin_h = auth_headers(make_token(runtime, make_user(runtime, "root", site_admin=True)))
    user_h = auth_headers(make_token(runtime, make_user(runtime, "alice")))
    body = client.get("/.api/license", headers=admin_h).json()
    assert body["releaseKey"] == {"present": False, "problem": status.release_key_problem}
    page = client.get("/site-admin/license", headers=admin_h).text
    missing = re.search(r'<p class="error" role="alert" id="release-key-missing">(.*?)</p>', page)
    assert missing, page
    assert html.unescape(missing.group(1)).startswith("This build has no release key: license keys cannot be verified")
    assert '<td id="release-key">none in this build</td>' in page

    # After the trial: the Free plan, and banners that do not send anyone to install a key that cannot verify.
    clock.offset = AFTER_TRIAL
    with pytest.raises(FeatureNotLicensed):
        service.require_feature(plans.MCP)
    [admin_note] = notices(client.get("/settings/tokens", headers=admin_h).text)
    assert "This build has no release key, so no license key can be installed." in admin_note
    assert "Install a license key" not in admin_note
    [user_note] = notices(client.get("/settings/tokens", headers=user_h).text)
    assert user_note.endswith("this instance runs the Free plan.")
    page = client.get("/site-admin/license", headers=admin_h).text
    assert "switched off. Nothing was deleted." in page  # no "until a license key is installed"

    # A key in site config is reported as unusable for the same reason, once.
    set_site_config(runtime, {"licenseKey": issue(runtime.db.instance_id())})
    assert service.status().problem is not None
    assert service.status().problem.kind == "no_release_key"  # type: ignore[union-attr]
    [key_note] = notices(client.get("/settings/tokens", headers=admin_h).text)
    assert key_note.startswith(
        f"The license key cannot be used: {keys.NO_RELEASE_KEY_REFUSAL}. This instance runs the Free plan."
    )
