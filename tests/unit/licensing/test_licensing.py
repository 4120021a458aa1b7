"""Plans, key verification, the trial, the fallback on bad keys and metering, on the real database."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from codewell.accounts.audit import AuditService
from codewell.analytics.credits import CreditService
from codewell.core.actors import INTERNAL
from codewell.core.errors import InvalidInput, PermissionDenied, QuotaExceeded
from codewell.licensing import keys, plans
from codewell.licensing.service import FeatureNotLicensed
from codewell.runtime import Runtime
from tests.factories import actor_of_user, make_user, set_site_config
from tests.unit.licensing.testkeys import TEST_PUBLIC_KEY, Clock, issue, license_tool, licensing

pytestmark = pytest.mark.database

AFTER_TRIAL = timedelta(days=plans.TRIAL_DAYS, minutes=1)


def audit_actions(runtime: Runtime) -> list[str]:
    return [e.action for e in runtime.get(AuditService).list(INTERNAL, entity="licensing.key")]


def test_every_feature_is_in_enterprise_and_refusals_name_the_cheapest_plan() -> None:
    assert plans.ENTERPRISE.features == set(plans.FEATURES) == plans.TRIAL.features
    assert plans.FREE.features == frozenset()
    assert plans.cheapest_plan_with(plans.MCP) is plans.ENTERPRISE
    assert plans.cheapest_plan_with(plans.CODE_FINDER) is plans.TEAM


def test_a_fresh_install_runs_the_trial_then_falls_back_to_free(runtime: Runtime) -> None:
    clock = Clock()
    service = licensing(runtime, clock)
    status = service.status()
    assert (status.plan.name, status.source) == ("trial", "trial")
    assert status.features == set(plans.FEATURES)
    created = runtime.db.created_at()
    assert status.expires_at == created + timedelta(days=30)
    service.require_feature(plans.MCP)

    clock.offset = AFTER_TRIAL
    status = service.status()
    assert (status.plan.name, status.source, status.expires_at) == ("free", "free", None)
    with pytest.raises(FeatureNotLicensed) as refused:
        service.require_feature(plans.MCP)
    assert isinstance(refused.value, PermissionDenied)
    assert refused.value.message.startswith(
        "the MCP tool server needs the Enterprise plan; this instance runs the Free"
    )
    assert f"trial ended on {created + timedelta(days=30):%Y-%m-%d}" in refused.value.message
    assert refused.value.data()["requiredPlan"] == "enterprise"


def test_a_valid_key_sets_plan_limits_and_expiry_and_is_audited(runtime: Runtime) -> None:
    clock = Clock(AFTER_TRIAL)
    service = licensing(runtime, clock)
    key = issue(runtime.db.instance_id(), plan="team", user_limit=42, features=frozenset({plans.MCP}))
    status = service.set_key(INTERNAL, key)
    assert (status.plan.name, status.source, status.licensee, status.key_source) == (
        "team",
        "license",
        "Acme Corp",
        "cli",
    )
    assert status.limits[plans.USERS] == 42
    assert status.has(plans.MCP)
    assert status.has(plans.CODE_FINDER)
    assert not status.has(plans.SAML)
    assert "installed" in audit_actions(runtime)
    report = service.report(INTERNAL).as_json()
    assert report["plan"] == "team"
    assert report["usage"]["users"] == 0
    assert report["key"]["problem"] is None


def _foreign_key(runtime: Runtime) -> str:
    return issue("another-instance")


def _expired_key(runtime: Runtime) -> str:
    return issue(runtime.db.instance_id(), expires_in=timedelta(days=-1))


def _tampered_key(runtime: Runtime) -> str:
    head, _payload, signature = issue(runtime.db.instance_id(), plan="team").split(".")
    forged = keys.LicenseDocument("enterprise", "Acme Corp", runtime.db.instance_id(), None,
                                  datetime.now(UTC), datetime.now(UTC) + timedelta(days=999))  # fmt: skip
    forged_payload = license_tool.sign(forged, Ed25519PrivateKey.generate()).split(".")[1]
    return f"{head}.{forged_payload}.{signature}"


def _other_signer_key(runtime: Runtime) -> str:
    return issue(runtime.db.instance_id(), private_key=Ed25519PrivateKey.generate())


@pytest.mark.parametrize(
    ("make_key", "kind", "message"),
    [
        (_tampered_key, "invalid_signature", "the license key's signature is not valid"),
        (_other_signer_key, "invalid_signature", "the license key's signature is not valid"),
        (_foreign_key, "wrong_instance", "the license key was issued for another instance"),
        (_expired_key, "expired", "the license key expired on"),
    ],
)
def test_bad_keys_are_refused_with_one_message_and_audited(
    runtime: Runtime, make_key: object, kind: str, message: str
) -> None:
    service = licensing(runtime)
    key = make_key(runtime)  # type: ignore[operator]
    with pytest.raises(InvalidInput) as refused:
        service.set_key(INTERNAL, key)
    assert refused.value.message.startswith(message)
    assert refused.value.hint
    entries = runtime.get(AuditService).list(INTERNAL, entity="licensing.key")
    assert [(e.action, e.details["problem"]) for e in entries] == [("rejected", kind)]
    assert service.status().plan.name == "trial"  # nothing installed


def test_this_repositorys_build_trusts_no_key_and_the_verifier_trusts_only_its_own(runtime: Runtime) -> None:
    """The source tree's release key file holds no key (a distributor sets it), so this build verifies no
    license key, the test pair's included; a verifier with a key trusts that key only."""
    release = keys.load_release_key()
    assert (release.public_key, release.problem) == (None, keys.NO_RELEASE_KEY)
    with pytest.raises(keys.KeyProblem) as refused:
        keys.verify_signature(issue("x"), release.public_key)
    assert (refused.value.kind, refused.value.message) == ("no_release_key", keys.NO_RELEASE_KEY_REFUSAL)
    with pytest.raises(keys.KeyProblem) as foreign:
        keys.verify_signature(issue("x"), Ed25519PrivateKey.generate().public_key())
    assert foreign.value.kind == "invalid_signature"
    assert keys.verify_signature(issue("x"), TEST_PUBLIC_KEY).instance_id == "x"


def test_config_key_that_expires_falls_back_keeps_data_and_audits_once(runtime: Runtime) -> None:
    clock = Clock(AFTER_TRIAL)
    service = licensing(runtime, clock)
    credits = runtime.get(CreditService)
    today = datetime.now(UTC).date()
    credits.allocate(INTERNAL, 100, today - timedelta(days=400), today + timedelta(days=400))
    set_site_config(runtime, {"licenseKey": issue(runtime.db.instance_id(), expires_in=timedelta(days=40))})
    assert (service.status().plan.name, service.status().key_source) == ("enterprise", "config")
    service.consume(INTERNAL, plans.CODE_FINDER, 3)

    clock.offset = timedelta(days=41)  # past the key's expiry and the trial's end
    for _ in range(3):
        status = service.status()
    assert (status.plan.name, status.source) == ("free", "free")
    assert status.problem is not None
    assert status.problem.kind == "expired"
    assert audit_actions(runtime) == ["expired"]  # once, not once per request
    with pytest.raises(FeatureNotLicensed):
        service.consume(INTERNAL, plans.CODE_FINDER, 1)
    # Nothing was lost: the consumption stays, and a renewed key restores the plan at once.
    assert credits.list_buckets(INTERNAL)[0].consumed == 3
    set_site_config(runtime, {"licenseKey": issue(runtime.db.instance_id(), expires_in=timedelta(days=400))})
    assert service.status().plan.name == "enterprise"


def test_only_site_admins_see_or_change_the_license(runtime: Runtime) -> None:
    service = licensing(runtime)
    user = actor_of_user(runtime, make_user(runtime, "ursula"))
    with pytest.raises(PermissionDenied):
        service.report(user)
    with pytest.raises(PermissionDenied):
        service.set_key(user, issue(runtime.db.instance_id()))
    admin = actor_of_user(runtime, make_user(runtime, "ada", site_admin=True))
    assert service.report(admin).users == 2


def test_consume_needs_the_feature_and_charges_all_or_nothing(runtime: Runtime) -> None:
    clock = Clock(AFTER_TRIAL)
    service = licensing(runtime, clock)
    today = datetime.now(UTC).date()
    runtime.get(CreditService).allocate(INTERNAL, 5, today - timedelta(days=40), today + timedelta(days=40))
    with pytest.raises(FeatureNotLicensed) as refused:
        service.consume(INTERNAL, plans.DEEPSEARCH, 1)
    assert refused.value.data()["requiredPlan"] == "team"
    service.set_key(INTERNAL, issue(runtime.db.instance_id(), plan="team"))
    assert service.consume(INTERNAL, plans.DEEPSEARCH, 4).taken[0][1] == 4
    with pytest.raises(QuotaExceeded):
        service.consume(INTERNAL, plans.DEEPSEARCH, 2)
    assert runtime.get(CreditService).list_buckets(INTERNAL)[0].consumed == 4  # nothing half charged


def test_32_concurrent_consumers_of_10_credits_exactly_10_succeed(runtime: Runtime) -> None:
    service = licensing(runtime)
    today = datetime.now(UTC).date()
    credits = runtime.get(CreditService)
    bucket = credits.allocate(INTERNAL, 15, today, today)
    service.consume(INTERNAL, plans.CODE_FINDER, 5)  # 10 left
    outcomes: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(32)

    def worker() -> None:
        barrier.wait()
        try:
            service.consume(INTERNAL, plans.CODE_FINDER, 1)
            outcome = "ok"
        except QuotaExceeded:
            outcome = "exhausted"
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=worker) for _ in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["exhausted"] * 22 + ["ok"] * 10
    [after] = credits.list_buckets(INTERNAL)
    assert (after.id, after.consumed, after.consumption_by_feature) == (bucket.id, 15, {plans.CODE_FINDER: 15})


def test_maintainer_commands_generate_a_pair_and_sign_keys_it_verifies(tmp_path: Path) -> None:
    private, public_file = tmp_path / "release.key", tmp_path / "release_key.pub"
    runner = CliRunner()
    generated = runner.invoke(
        license_tool.main, ["generate", "--private-key", str(private), "--public-key-file", str(public_file)]
    )
    assert generated.exit_code == 0, generated.output
    assert private.stat().st_mode & 0o777 == 0o600
    public_text = generated.output.strip()
    assert public_file.read_text().strip() == public_text
    again = runner.invoke(license_tool.main, ["public-key", "--private-key", str(private)])
    assert again.output.strip() == public_text
    assert runner.invoke(license_tool.main, ["generate", "--private-key", str(private)]).exit_code != 0  # no overwrite
    signed = runner.invoke(
        license_tool.main,
        ["sign", "--private-key", str(private), "--plan", "team", "--licensee", "Acme", "--instance-id", "i-1",
         "--expires", "2099-01-01", "--feature", "mcp"],
    )  # fmt: skip
    assert signed.exit_code == 0, signed.output
    release = keys.load_release_key(public_file)
    document = keys.verify(signed.output.strip(), release.public_key, "i-1", datetime.now(UTC))
    assert (document.plan, document.licensee, document.features) == ("team", "Acme", {"mcp"})
    assert document.expires_at == datetime(2099, 1, 1, tzinfo=UTC)
    bad_expiry = runner.invoke(
        license_tool.main,
        ["sign", "--private-key", str(private), "--plan", "team", "--licensee", "Acme", "--instance-id", "i-1",
         "--expires", "next year"],
    )  # fmt: skip
    assert bad_expiry.exit_code == 2
    assert "--expires" in bad_expiry.output
