"""Analytics access tokens (REST and page) and credit buckets (REST, page, consumption) over HTTP."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

import pytest
from starlette.testclient import TestClient

from codewell.analytics.credits import CreditService
from codewell.analytics.models import AnalyticsTokenRow
from codewell.auth.service import AuthService, ClientInfo
from codewell.core.actors import INTERNAL
from codewell.core.errors import QuotaExceeded
from codewell.http.sessions import SESSION_COOKIE
from tests.factories import make_token
from tests.functional.analytics.conftest import INSTANCE, Instance, analytics_token

pytestmark = pytest.mark.database

TOKENS = "/analytics/api/service-access-tokens"
CREDITS = "/analytics/api/credits"
REGISTRY = "/analytics/api/reports/user-registry"


def instance_token_headers(instance: Instance) -> dict[str, str]:
    return {"Authorization": f"token {make_token(instance.runtime, instance.admin)}"}


def sign_in(client: TestClient, instance: Instance) -> str:
    """Give the client a session of the admin (as the sign-in page would); returns its CSRF token."""

    cookie, session = instance.runtime.get(AuthService).start_session(instance.admin, ClientInfo())
    client.cookies.set(SESSION_COOKIE, cookie)
    return session.csrf_token


def test_token_rest_api_follows_the_older_shape(client: TestClient, instance: Instance) -> None:
    headers = instance_token_headers(instance)
    expires = (datetime.now(UTC) + timedelta(days=30)).replace(microsecond=0)
    created = client.post(TOKENS, json={"displayName": "BI export", "expiresAt": expires.isoformat()}, headers=headers)
    assert created.status_code == 201
    body = created.json()
    assert set(body) == {"id", "displayName", "secret", "createdAt", "expiresAt"}
    assert body["displayName"] == "BI export"
    assert body["secret"].startswith("cwa_")
    assert datetime.fromisoformat(body["expiresAt"]) == expires
    # The new token works, and its listing never shows the secret.
    assert (
        client.get(
            REGISTRY, params={"instanceURL": INSTANCE}, headers={"Authorization": f"Bearer {body['secret']}"}
        ).status_code
        == 200
    )
    listed = client.get(TOKENS, headers=headers).json()["tokens"]
    mine = [t for t in listed if t["id"] == body["id"]]
    assert mine
    assert mine[0]["isExpired"] is False
    assert "secret" not in mine[0]
    assert {"id", "displayName", "createdAt", "expiresAt", "isExpired"} <= set(mine[0])
    assert client.delete(f"{TOKENS}/{body['id']}", headers=headers).status_code == 204
    revoked = client.get(
        REGISTRY, params={"instanceURL": INSTANCE}, headers={"Authorization": f"Bearer {body['secret']}"}
    )
    assert revoked.status_code == 401
    assert client.delete(f"{TOKENS}/{body['id']}", headers=headers).status_code == 404


def test_expired_tokens_stop_working(client: TestClient, instance: Instance) -> None:

    token = analytics_token(instance.runtime, instance.admin, "short")
    with instance.runtime.db.session() as session:
        row = session.query(AnalyticsTokenRow).filter_by(display_name="short").one()
        row.expires_at = datetime.now(UTC) - timedelta(seconds=1)
    response = client.get(REGISTRY, params={"instanceURL": INSTANCE}, headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401


def test_bad_token_requests_are_refused(client: TestClient, instance: Instance) -> None:
    headers = instance_token_headers(instance)
    assert client.post(TOKENS, json={"displayName": ""}, headers=headers).status_code == 400
    past = client.post(TOKENS, json={"displayName": "x", "expiresAt": "2020-01-01T00:00:00Z"}, headers=headers)
    assert past.status_code == 400
    assert "expiresAt" in past.json()["error"]["message"]
    # An analytics token can read but not mint or list tokens: revoking it must end the access it grants.
    minted = client.post(TOKENS, json={"displayName": "child"}, headers=instance.bearer())
    assert minted.status_code == 403
    assert client.post(TOKENS, json={"displayName": "x"}).status_code == 401
    # Someone else's token reads as not found.
    other = client.post(
        TOKENS,
        json={"displayName": "bob's"},
        headers={"Authorization": f"token {make_token(instance.runtime, instance.user)}"},
    )
    assert other.status_code == 201
    assert client.delete(f"{TOKENS}/{other.json()['id']}", headers=instance_token_headers(instance)).status_code == 204
    bobs = {"Authorization": f"token {make_token(instance.runtime, instance.user)}"}
    mine = client.post(TOKENS, json={"displayName": "mine"}, headers=headers).json()
    assert client.delete(f"{TOKENS}/{mine['id']}", headers=bobs).status_code == 404


def test_cookie_writes_need_the_csrf_header(client: TestClient, instance: Instance) -> None:
    sign_in(client, instance)
    refused = client.post(TOKENS, json={"displayName": "x"})
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["error"]["message"]


def test_token_page_creates_shows_metadata_and_revokes(client: TestClient, instance: Instance) -> None:
    csrf = sign_in(client, instance)
    created = client.post(
        "/analytics/tokens", data={"displayName": "Looker", "expiresInDays": "never", "csrf_token": csrf}
    )
    assert created.status_code == 201
    secret = re.search(r'data-testid="new-token">(cwa_[0-9a-f]{40})<', created.text)
    assert secret is not None
    page = client.get("/analytics/tokens")
    assert "Looker" in page.text
    assert secret.group(1) not in page.text
    token_id = re.search(r'data-token-id="(\d+)"', page.text)
    assert token_id is not None
    revoked = client.post(
        f"/analytics/tokens/{token_id.group(1)}/revoke", data={"csrf_token": csrf}, follow_redirects=False
    )
    assert revoked.status_code == 303
    assert "Looker" not in client.get("/analytics/tokens").text
    forged = client.post("/analytics/tokens", data={"displayName": "x", "expiresInDays": "never", "csrf_token": "nope"})
    assert forged.status_code == 403


def test_credits_are_allocated_listed_and_filtered_by_active_period(client: TestClient, instance: Instance) -> None:
    headers = instance_token_headers(instance)
    today = datetime.now(UTC).date()
    current = {
        "amount": 100,
        "startDate": str(today - timedelta(days=10)),
        "endDate": str(today + timedelta(days=10)),
        "note": "Q",
    }
    assert client.post(CREDITS, json=current, headers=headers).status_code == 201
    old = {"amount": 50, "startDate": "2025-01-01", "endDate": "2025-01-31"}
    assert client.post(CREDITS, json=old, headers=headers).status_code == 201
    credits = instance.runtime.get(CreditService)
    credits.consume(INTERNAL, "deepsearch", 30)
    credits.consume(INTERNAL, "code_finder", 5)

    def buckets(**params: str) -> list[dict[str, object]]:
        response = client.get(CREDITS, params={"instanceURL": INSTANCE, **params}, headers=instance.bearer())
        assert response.status_code == 200
        body = response.json()
        assert body["instanceURL"] == INSTANCE
        return list(body["buckets"])

    everything = buckets()
    assert [b["allocation"] for b in everything] == [50, 100]
    active = everything[1]
    assert active["consumed"] == 35
    assert active["remaining"] == 65
    assert active["active"] is True
    assert active["consumptionByFeature"] == {"code_finder": 5, "deepsearch": 30}
    assert active["activePeriod"] == {"startDate": current["startDate"], "endDate": current["endDate"]}
    assert [b["allocation"] for b in buckets(startDate="2025-01-31")] == [50, 100]
    assert [b["allocation"] for b in buckets(startDate="2025-02-01")] == [100]
    assert [b["allocation"] for b in buckets(endDate="2025-01-01")] == [50]
    assert buckets(startDate="2025-02-01", endDate="2025-02-28") == []
    # Analytics tokens read credits but cannot allocate them.
    assert client.post(CREDITS, json=current, headers=instance.bearer()).status_code == 403
    bad = client.post(CREDITS, json={**current, "endDate": "2000-01-01"}, headers=headers)
    assert bad.status_code == 400


def test_consumption_spills_over_and_stops_at_zero(client: TestClient, instance: Instance) -> None:
    credits = instance.runtime.get(CreditService)
    assert credits.consume(INTERNAL, "deepsearch", 1000).metered is False  # nothing allocated: unmetered
    today = datetime.now(UTC).date()
    soon = credits.allocate(INTERNAL, 10, today, today + timedelta(days=1))
    later = credits.allocate(INTERNAL, 10, today, today + timedelta(days=30))
    taken = credits.consume(INTERNAL, "deepsearch", 15)
    assert taken.taken == ((soon.id, 10), (later.id, 5))
    with pytest.raises(QuotaExceeded):
        credits.consume(INTERNAL, "deepsearch", 6)
    credits.consume(INTERNAL, "code_finder", 5)
    with pytest.raises(QuotaExceeded):
        credits.consume(INTERNAL, "code_finder", 1)
    by_id = {b.id: b for b in credits.list_buckets(INTERNAL)}
    assert by_id[soon.id].remaining == 0
    assert by_id[later.id].remaining == 0
    assert by_id[later.id].consumption_by_feature == {"deepsearch": 5, "code_finder": 5}


def test_credits_page_is_for_site_admins(client: TestClient, instance: Instance) -> None:
    csrf = sign_in(client, instance)
    today = date.today()
    response = client.post(
        "/analytics/credits",
        data={"amount": "500", "startDate": str(today), "endDate": str(today), "note": "trial", "csrf_token": csrf},
    )
    assert response.status_code == 201
    assert "Allocated 500 credits" in response.text
    assert "trial" in response.text
    bad = client.post("/analytics/credits", data={"amount": "x", "startDate": "", "endDate": "", "csrf_token": csrf})
    assert bad.status_code == 400
    assert "amount" in bad.text
