"""The licence as callers meet it: the MCP gate on the three endpoints, REST, the admin page and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime, timedelta

import pytest
from starlette.testclient import TestClient

from codewell.accounts.audit import AuditService
from codewell.analytics.credits import CreditService
from codewell.core.actors import INTERNAL
from codewell.core.settings import Settings
from codewell.core.tools import Endpoint
from codewell.licensing import keys, plans
from codewell.runtime import Runtime
from tests import cliprocess
from tests.factories import auth_headers, make_token, make_user, set_site_config
from tests.unit.licensing.testkeys import Clock, issue, licensing

pytestmark = pytest.mark.database

LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
ACCEPT = {"Accept": "application/json, text/event-stream"}
AFTER_TRIAL = timedelta(days=plans.TRIAL_DAYS, minutes=1)


def mcp_headers(runtime: Runtime, token: str) -> dict[str, str]:
    return {**ACCEPT, "Host": runtime.external_url.split("://", 1)[1], **auth_headers(token)}


@pytest.mark.parametrize("endpoint", list(Endpoint))
def test_mcp_endpoints_follow_the_plan(client: TestClient, runtime: Runtime, endpoint: Endpoint) -> None:
    clock = Clock()
    service = licensing(runtime, clock)
    headers = mcp_headers(runtime, make_token(runtime, make_user(runtime, "alice")))
    # Trial: every feature, the endpoint works.
    assert client.post(endpoint.value, json=LIST_TOOLS, headers=headers).status_code == 200

    clock.offset = AFTER_TRIAL  # the free plan has no mcp: refused with a JSON-RPC error a client can show
    refused = client.post(endpoint.value, json=LIST_TOOLS, headers=headers)
    assert refused.status_code == 403
    body = refused.json()
    assert body["jsonrpc"] == "2.0"
    assert body["id"] is None
    assert body["error"]["code"] == -32003
    assert body["error"]["message"].startswith("the MCP tool server needs the Enterprise plan")
    assert body["error"]["data"]["requiredPlan"] == "enterprise"
    assert body["error"]["data"]["currentPlan"] == "free"

    service.set_key(INTERNAL, issue(runtime.db.instance_id(), plan="team"))  # team lacks mcp
    assert client.post(endpoint.value, json=LIST_TOOLS, headers=headers).status_code == 403
    service.set_key(INTERNAL, issue(runtime.db.instance_id(), plan="team", features=frozenset({plans.MCP})))
    assert client.post(endpoint.value, json=LIST_TOOLS, headers=headers).status_code == 200


def test_unauthenticated_callers_still_get_the_challenge_after_the_trial(client: TestClient, runtime: Runtime) -> None:
    licensing(runtime, Clock(AFTER_TRIAL))
    response = client.post(
        "/.api/mcp", json=LIST_TOOLS, headers={**ACCEPT, "Host": runtime.external_url.split("://", 1)[1]}
    )
    assert response.status_code == 401  # the licence is not revealed before authentication


def test_rest_and_admin_page_show_plan_limits_usage_and_expiry(client: TestClient, runtime: Runtime) -> None:
    clock = Clock(AFTER_TRIAL)
    licensing(runtime, clock)
    admin = make_user(runtime, "root", site_admin=True)
    user = make_user(runtime, "alice")
    admin_h, user_h = auth_headers(make_token(runtime, admin)), auth_headers(make_token(runtime, user))
    set_site_config(runtime, {"licenseKey": issue("someone-else")})
    assert client.get("/.api/license").status_code == 401
    assert client.get("/.api/license", headers=user_h).status_code == 403
    body = client.get("/.api/license", headers=admin_h).json()
    assert (body["plan"], body["source"], body["expiresAt"]) == ("free", "free", None)
    assert body["key"]["source"] == "config"
    assert body["key"]["problem"]["code"] == "wrong_instance"
    assert body["usage"]["users"] == 2
    assert body["limits"]["users"] == 10
    assert [e.action for e in runtime.get(AuditService).list(INTERNAL, entity="licensing.key")] == ["wrong_instance"]

    set_site_config(runtime, {"licenseKey": issue(runtime.db.instance_id(), user_limit=77)})
    body = client.get("/.api/license", headers=admin_h).json()
    assert (body["plan"], body["licensee"], body["limits"]["users"]) == ("enterprise", "Acme Corp", 77)
    assert body["daysLeft"] in (333, 334)
    assert body["key"]["problem"] is None
    page = client.get("/site-admin/license", headers=admin_h)
    assert page.status_code == 200
    assert "Enterprise" in page.text
    assert "Acme Corp" in page.text
    assert "2 of 77" in page.text
    assert client.get("/site-admin/license", headers=user_h).status_code == 403


def run(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CODEWELL_DATA_DIR": str(settings.data_dir), "CODEWELL_DATABASE_URL": settings.database_url}
    return cliprocess.run(*args, env=env, timeout=120)


def test_license_cli_shows_the_trial_and_refuses_bad_keys(runtime: Runtime, settings: Settings) -> None:
    """This repository's build has no release key (a distributor sets it): the CLI says so first, runs the
    trial, and can install no key."""
    shown = run(settings, "license", "show")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0] == f"note: {keys.NO_RELEASE_KEY}"
    assert "release key: none in this build" in shown.stdout
    assert "plan: trial (trial)" in shown.stdout
    assert f"instance ID: {runtime.db.instance_id()}" in shown.stdout
    created = runtime.db.created_at()
    assert f"expires: {created + timedelta(days=30):%Y-%m-%d %H:%M} UTC" in shown.stdout
    as_json = json.loads(run(settings, "license", "show", "--json").stdout)
    assert as_json["plan"] == "trial"
    assert as_json["features"] == sorted(plans.FEATURES)
    assert as_json["releaseKey"] == {"present": False, "problem": keys.NO_RELEASE_KEY}
    # No key verifies in a build without a release key: one clear message, audited.
    refused = run(settings, "license", "set", issue(runtime.db.instance_id()))
    assert refused.returncode == 1
    assert f"error: {keys.NO_RELEASE_KEY_REFUSAL}" in refused.stderr
    assert "hint: run a release build of codewell" in refused.stderr
    entries = runtime.get(AuditService).list(INTERNAL, entity="licensing.key")
    assert [(e.action, e.details["problem"]) for e in entries] == [("rejected", "no_release_key")]
    garbage = run(settings, "license", "set", "not-a-key")
    assert "error: the license key is not a codewell license key" in garbage.stderr


def test_metered_consumption_appears_in_the_credits_api_at_once(client: TestClient, runtime: Runtime) -> None:
    service = licensing(runtime)
    admin_h = auth_headers(make_token(runtime, make_user(runtime, "root", site_admin=True)))
    today = datetime.now(UTC).date()
    runtime.get(CreditService).allocate(INTERNAL, 10, today, today)
    service.consume(INTERNAL, plans.CODE_FINDER, 7)
    host = runtime.external_url.split("://", 1)[1]
    body = client.get(f"/analytics/api/credits?instanceURL={host}", headers=admin_h).json()
    [bucket] = body["buckets"]
    assert (bucket["consumed"], bucket["remaining"], bucket["consumptionByFeature"]) == (7, 3, {"code_finder": 7})
