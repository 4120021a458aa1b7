"""What a license entitles, as callers meet it: credit buckets from a key, the user limit, the SAML and
analytics API gates, and the banners on every page."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from codewell.accounts.audit import AuditService
from codewell.accounts.service import AccountService
from codewell.analytics.credits import CreditService
from codewell.core.actors import INTERNAL
from codewell.core.errors import QuotaExceeded
from codewell.jobs.runner import JobRunner
from codewell.jobs.service import JobService
from codewell.licensing import plans
from codewell.licensing.service import PERMISSION_SYNC_FEATURE, LicensingService, UserLimitReached
from codewell.runtime import Runtime
from tests.factories import auth_headers, make_token, make_user, set_site_config
from tests.fakes.saml_idp import SSO_URL, TestIdP
from tests.functional.auth_providers.conftest import configure, start
from tests.unit.licensing.testkeys import TEST_PUBLIC_KEY, Clock, issue, licensing

pytestmark = pytest.mark.database

AFTER_TRIAL = timedelta(days=plans.TRIAL_DAYS, minutes=1)
PASSWORD = "correct horse battery staple"
LIMITS = {plans.CODE_FINDER_CALLS: 3, plans.DEEPSEARCH_CREDITS: 5}


def credits_api(client: TestClient, runtime: Runtime, headers: dict[str, str]) -> Any:
    host = runtime.external_url.split("://", 1)[1]
    return client.get(f"/analytics/api/credits?instanceURL={host}", headers=headers)


def buckets(runtime: Runtime) -> list[tuple[str, int, str, str]]:
    """(feature, amount, start, end) of every bucket, oldest first."""
    found = runtime.get(CreditService).list_buckets(INTERNAL)
    return [(b.feature, b.amount, str(b.starts_on), str(b.ends_on)) for b in found]


def month_of(moment: datetime) -> tuple[str, str]:
    first = moment.date().replace(day=1)
    following = (first + timedelta(days=32)).replace(day=1)
    return str(first), str(following - timedelta(days=1))


# -- credits allocated from a license key ------------------------------------------------------------------
def test_a_key_allocates_one_bucket_per_metered_feature_and_month_once(client: TestClient, runtime: Runtime) -> None:
    clock = Clock()
    service = licensing(runtime, clock)
    admin_h = auth_headers(make_token(runtime, make_user(runtime, "root", site_admin=True)))
    key = issue(runtime.db.instance_id(), plan="team", limits=LIMITS)
    service.set_key(INTERNAL, key)
    start, end = month_of(clock())
    expected = [("code_finder", 3, start, end), ("deepsearch", 5, start, end)]
    assert buckets(runtime) == expected
    body = credits_api(client, runtime, admin_h).json()
    assert [(b["feature"], b["allocation"], b["activePeriod"]["endDate"]) for b in body["buckets"]] == [
        ("code_finder", 3, end),
        ("deepsearch", 5, end),
    ]

    # Idempotent: the same key again, another call, another process (a fresh service, no memory).
    service.set_key(INTERNAL, key)
    assert service.allocate_credits() == []
    other = LicensingService(runtime, clock=clock, public_key=TEST_PUBLIC_KEY)
    assert other.allocate_credits() == []
    assert buckets(runtime) == expected

    # A key entitling more this month allocates the difference only.
    service.set_key(
        INTERNAL, issue(runtime.db.instance_id(), plan="team", limits={**LIMITS, "codeFinderCallsPerMonth": 10})
    )
    assert buckets(runtime) == [*expected, ("code_finder", 7, start, end)]

    # A new month allocates new buckets.
    clock.offset = timedelta(days=32)
    made = service.allocate_credits()
    next_start, next_end = month_of(clock())
    assert [(b.feature, b.amount, str(b.starts_on), str(b.ends_on)) for b in made] == [
        ("code_finder", 10, next_start, next_end),
        ("deepsearch", 5, next_start, next_end),
    ]
    assert len(buckets(runtime)) == 5


def test_license_buckets_meter_each_feature_separately(client: TestClient, runtime: Runtime) -> None:
    service = licensing(runtime, Clock())
    set_site_config(runtime, {"licenseKey": issue(runtime.db.instance_id(), plan="team", limits=LIMITS)})
    # The key comes from site config: the first metered call allocates this month's buckets.
    for _ in range(3):
        assert service.consume(INTERNAL, plans.CODE_FINDER, 1).metered
    with pytest.raises(QuotaExceeded):
        service.consume(INTERNAL, plans.CODE_FINDER, 1)
    assert service.consume(INTERNAL, plans.DEEPSEARCH, 5).metered  # its own bucket, untouched by code_finder
    with pytest.raises(QuotaExceeded):
        service.consume(INTERNAL, plans.DEEPSEARCH, 1)
    used = {
        b.feature: (b.consumed, b.consumption_by_feature) for b in runtime.get(CreditService).list_buckets(INTERNAL)
    }
    assert used == {"code_finder": (3, {"code_finder": 3}), "deepsearch": (5, {"deepsearch": 5})}


def test_a_periodic_job_allocates_the_credits_of_a_key_in_site_config(client: TestClient, runtime: Runtime) -> None:
    licensing(runtime, Clock())
    # No loop of its own in `codewell serve`: a job, run by whichever process claims it.
    assert "licensing-credits" not in [name for name, _ in runtime.background]
    set_site_config(runtime, {"licenseKey": issue(runtime.db.instance_id(), plan="team", limits=LIMITS)})
    assert buckets(runtime) == []
    jobs = runtime.get(JobService)
    jobs.ensure_periodic([jobs.kind("licensing.allocate_credits")])
    runner = JobRunner(runtime, role="test", kinds=frozenset({"licensing.allocate_credits"}))
    assert runner.run_one()
    assert [(feature, amount) for feature, amount, _, _ in buckets(runtime)] == [("code_finder", 3), ("deepsearch", 5)]
    assert not runner.run_one()  # queued again 10 minutes later, not now
    (row,) = jobs.list_jobs(INTERNAL, kind="licensing.allocate_credits")
    assert (row.state, row.last_error) == ("queued", None)
    assert 590 < (row.run_after - row.finished_at).total_seconds() <= 600  # type: ignore[operator]
    # Another process (its own service, nothing cached) allocating the same month adds nothing.
    other = LicensingService(runtime, clock=Clock(), public_key=TEST_PUBLIC_KEY)
    assert other.allocate_credits() == []
    assert len(buckets(runtime)) == 2


def test_unlimited_plans_and_the_trial_allocate_nothing(client: TestClient, runtime: Runtime) -> None:
    service = licensing(runtime, Clock())
    assert service.allocate_credits() == []  # the trial
    assert not service.consume(INTERNAL, plans.CODE_FINDER, 1).metered
    service.set_key(INTERNAL, issue(runtime.db.instance_id(), plan="enterprise"))  # unlimited
    assert service.allocate_credits() == []
    assert buckets(runtime) == []
    assert not service.consume(INTERNAL, plans.DEEPSEARCH, 100).metered


# -- the user limit ----------------------------------------------------------------------------------------
def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found, "no CSRF field"
    return found.group(1)


def test_user_limit_refuses_new_accounts_everywhere_and_keeps_existing_ones(
    client: TestClient, runtime: Runtime
) -> None:
    service = licensing(runtime, Clock(AFTER_TRIAL))
    admin = make_user(runtime, "root", site_admin=True)
    alice = make_user(runtime, "alice")
    service.set_key(INTERNAL, issue(runtime.db.instance_id(), user_limit=3))
    admin_h = auth_headers(make_token(runtime, admin))
    alice_h = auth_headers(make_token(runtime, alice))
    created = client.post("/.api/users", json={"username": "bob"}, headers=admin_h)
    assert created.status_code == 201, created.text

    # Site admins (REST).
    refused = client.post("/.api/users", json={"username": "carol"}, headers=admin_h)
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "user_limit_reached"
    assert "licensed for at most 3 users (Enterprise plan)" in refused.json()["error"]["message"]
    # Sign-up (turned on in the site config: it is off by default).
    configure(runtime, {"type": "builtin", "allowSignup": True})
    page = client.get("/sign-up")
    signup = client.post("/sign-up", data={"username": "dave", "password": PASSWORD, "csrf_token": csrf_of(page.text)})
    assert signup.status_code == 403
    assert "licensed for at most 3 users" in signup.text
    # External sign-in creating an account (an authenticating proxy here).
    configure(runtime, {"type": "http-header", "usernameHeader": "X-Forwarded-User"})
    proxied = client.get("/settings/tokens", headers={"X-Forwarded-User": "erin"})
    assert proxied.status_code == 403
    assert "licensed for at most 3 users" in proxied.text
    configure(runtime, {"type": "builtin", "allowSignup": True})
    assert runtime.get(AccountService).count_users() == 3
    # Existing accounts keep working.
    assert client.get("/.api/users", headers=alice_h).status_code == 200
    audited = runtime.get(AuditService).list(INTERNAL, entity="licensing.userLimit")
    assert len(audited) == 3


def test_the_free_plan_allows_ten_users_the_trial_any(client: TestClient, runtime: Runtime) -> None:
    clock = Clock()
    licensing(runtime, clock)
    for n in range(12):  # the trial: no limit
        make_user(runtime, f"user{n}")
    clock.offset = AFTER_TRIAL
    with pytest.raises(UserLimitReached) as refused:
        make_user(runtime, "one-more")
    assert refused.value.limit == 10
    assert "(Free plan)" in refused.value.message


# -- the SAML gate -----------------------------------------------------------------------------------------
def test_saml_sign_in_needs_the_saml_feature(client: TestClient, runtime: Runtime, tmp_path: Path) -> None:
    clock = Clock()
    licensing(runtime, clock)
    idp = TestIdP(tmp_path / "idp")
    (provider,) = configure(runtime, {"type": "saml", "identityProviderMetadata": idp.metadata()})
    redirect = start(client, provider)  # the trial: SAML works
    assert redirect.startswith(SSO_URL)
    metadata = client.get("/.auth/saml/metadata").text

    clock.offset = AFTER_TRIAL  # the trial ends between the redirect and the IdP's answer: refused at the ACS
    posted = client.post(
        "/.auth/saml/acs",
        data=idp.respond(metadata, redirect, user="alice", attributes={"mail": ["alice@corp.example"]}),
        follow_redirects=False,
    )
    assert posted.status_code == 403
    assert "SAML sign-in needs the Enterprise plan" in posted.text
    assert runtime.get(AccountService).count_users() == 0
    login = client.get(f"/.auth/saml/login?pc={provider.id}", follow_redirects=False)
    assert login.status_code == 403
    assert "SAML sign-in needs the Enterprise plan; this instance runs the Free plan" in login.text
    assert client.get("/.auth/saml/metadata").status_code == 200  # the providers config still loads
    reasons = [e.reason for e in runtime.get(AuditService).list(INTERNAL, entity="auth.signIn", action="failed")]
    assert sum("SAML sign-in needs" in r for r in reasons) == 2

    runtime.get(LicensingService).set_key(
        INTERNAL, issue(runtime.db.instance_id(), plan="team", features=frozenset({plans.SAML}))
    )
    assert start(client, provider).startswith(SSO_URL)


# -- the analytics API gate --------------------------------------------------------------------------------
def test_analytics_api_needs_the_analytics_api_feature(client: TestClient, runtime: Runtime) -> None:
    clock = Clock()
    service = licensing(runtime, clock)
    admin_h = auth_headers(make_token(runtime, make_user(runtime, "root", site_admin=True)))
    host = runtime.external_url.split("://", 1)[1]
    paths = [
        f"/analytics/api/credits?instanceURL={host}",
        f"/analytics/api/reports/user-registry?instanceURL={host}",
        f"/analytics/api/reports/by-user-client-date?instanceURL={host}",
        "/analytics/api/service-access-tokens",
    ]
    assert [client.get(p, headers=admin_h).status_code for p in paths] == [200] * 4  # the trial

    clock.offset = AFTER_TRIAL
    for path in paths:
        refused = client.get(path, headers=admin_h)
        assert refused.status_code == 403, path
        error = refused.json()["error"]
        assert error["code"] == "feature_not_licensed"
        assert error["message"].startswith("the analytics API needs the Team plan; this instance runs the Free plan")
    assert client.get(paths[0]).status_code == 401  # nothing revealed before authentication
    assert client.post("/analytics/api/credits", json={}, headers=admin_h).status_code == 403

    service.set_key(INTERNAL, issue(runtime.db.instance_id(), plan="team"))
    assert [client.get(p, headers=admin_h).status_code for p in paths] == [200] * 4


# -- banners on every page ---------------------------------------------------------------------------------
def notices(page: str) -> list[str]:
    """The banners of a page, as text."""
    found = re.findall(r'<p class="page-notice[^"]*"[^>]*>(.*?)</p>', page)
    return [html.unescape(re.sub(r"<[^>]+>", "", n)).strip() for n in found]


def test_banners_for_the_trial_keys_and_unlicensed_pages(client: TestClient, runtime: Runtime) -> None:
    clock = Clock()
    licensing(runtime, clock)
    admin_h = auth_headers(make_token(runtime, make_user(runtime, "root", site_admin=True)))
    user_h = auth_headers(make_token(runtime, make_user(runtime, "alice")))
    page = "/settings/tokens"
    assert notices(client.get(page, headers=user_h).text) == []  # early in the trial: nothing to say

    clock.offset = timedelta(days=plans.TRIAL_DAYS - 3)
    ends = f"{runtime.db.created_at() + timedelta(days=plans.TRIAL_DAYS):%Y-%m-%d}"
    [admin_note] = notices(client.get(page, headers=admin_h).text)
    assert admin_note.startswith(f"The trial ends on {ends} (2 days left); then this instance runs the Free plan.")
    assert admin_note.endswith("License")  # the link to the license page
    assert 'href="/site-admin/license"' in client.get(page, headers=admin_h).text
    [user_note] = notices(client.get(page, headers=user_h).text)
    assert user_note.endswith("A site admin can install a license key.")
    assert notices(client.get("/sign-in").text) == []  # anonymous visitors learn nothing of the license
    assert notices(client.get("/site-admin/license", headers=admin_h).text) == []  # it shows it all itself

    clock.offset = AFTER_TRIAL
    assert notices(client.get(page, headers=user_h).text) == [
        f"The trial ended on {ends}: this instance runs the Free plan. A site admin can install a license key."
    ]
    # A page using a feature the plan lacks says so.
    analytics = notices(client.get("/analytics/tokens", headers=admin_h).text)
    assert any(
        n.startswith("the analytics API needs the Team plan; this instance runs the Free plan") for n in analytics
    )

    set_site_config(runtime, {"licenseKey": issue(runtime.db.instance_id(), expires_in=timedelta(days=-1))})
    [expired] = notices(client.get(page, headers=admin_h).text)
    assert expired.startswith("The license key cannot be used: the license key expired on")
    assert notices(client.get(page, headers=user_h).text) == [
        "This instance's license key cannot be used; it runs the Free plan. A site admin can fix it."
    ]

    set_site_config(
        runtime, {"licenseKey": issue(runtime.db.instance_id(), expires_in=timedelta(days=AFTER_TRIAL.days + 10))}
    )
    [expiring] = notices(client.get(page, headers=admin_h).text)
    assert expiring.startswith(
        f"The license key expires on {datetime.now(UTC) + timedelta(days=AFTER_TRIAL.days + 10):%Y-%m-%d}"
    )
    assert notices(client.get(page, headers=user_h).text) == []  # only site admins hear of the key's expiry
    assert notices(client.get("/analytics/tokens", headers=admin_h).text) == [expiring]  # enterprise has it


# -- permission sync ---------------------------------------------------------------------------------------
def test_permission_sync_follows_the_plan(runtime: Runtime) -> None:
    clock = Clock()
    service = licensing(runtime, clock)
    assert service.has_feature(PERMISSION_SYNC_FEATURE)  # the trial
    clock.offset = AFTER_TRIAL
    assert not service.has_feature(PERMISSION_SYNC_FEATURE)
    service.set_key(INTERNAL, issue(runtime.db.instance_id(), plan="team"))
    assert not service.has_feature(PERMISSION_SYNC_FEATURE)
    service.set_key(INTERNAL, issue(runtime.db.instance_id(), plan="team", features=frozenset({plans.PERMISSION_SYNC})))
    assert service.has_feature(PERMISSION_SYNC_FEATURE)
