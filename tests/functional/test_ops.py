from __future__ import annotations

import json
import logging

import pytest
from starlette.testclient import TestClient

from codewell.app import create_app
from codewell.capabilities import CAPABILITIES
from codewell.core.logging import JsonFormatter, request_id_var
from codewell.core.settings import Settings
from codewell.runtime import Runtime
from tests.factories import auth_headers, make_token, make_user

pytestmark = pytest.mark.database


def test_healthz(client: TestClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.text == "ok"


def test_readyz_reports_each_check(client: TestClient) -> None:
    response = client.get("/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ready"
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["site_config"] == "ok"


def test_readyz_fails_while_the_site_config_is_invalid(client: TestClient, runtime: Runtime) -> None:
    runtime.settings.site_config_path.write_text('{"mcp.enabled": "yes please"}')
    response = client.get("/readyz")
    assert response.status_code == 503
    assert "mcp.enabled" in response.json()["checks"]["site_config"]
    # The running config is unchanged.
    assert runtime.config.mcp_enabled is True


def test_readyz_fails_when_migrations_are_pending(client: TestClient, runtime: Runtime) -> None:
    runtime.db.downgrade_all()
    response = client.get("/readyz")
    assert response.status_code == 503
    assert "codewell db upgrade" in response.json()["checks"]["database"]


@pytest.fixture
def admin_headers(runtime: Runtime) -> dict[str, str]:
    return auth_headers(make_token(runtime, make_user(runtime, "root", site_admin=True)))


def series(text: str) -> set[str]:
    return {line.split(" ")[0] for line in text.splitlines() if line.startswith("codewell_http_requests_total{")}


def test_metrics_count_requests(client: TestClient, admin_headers: dict[str, str]) -> None:
    client.get("/healthz")
    text = client.get("/metrics", headers=admin_headers).text
    assert 'codewell_http_requests_total{method="GET",route="/healthz",status="200"}' in text


def test_metrics_label_requests_by_route_template_never_by_raw_path(
    client: TestClient, runtime: Runtime, admin_headers: dict[str, str]
) -> None:
    alice = make_user(runtime, "alice-in-a-label")
    # A probe for a private repository's file (anonymous: sent to sign in), a path no route matches (404) and a
    # refused request on a real route.
    assert client.get("/acme/secret-plans@0123abc/-/blob/launch.go", follow_redirects=False).status_code == 302
    assert client.get("/-/no/such/page").status_code == 404
    assert client.get(f"/.api/users/{alice.username}").status_code == 401
    assert client.get(f"/.api/users/{alice.username}", headers=admin_headers).status_code == 200
    assert client.request("BREW", "/healthz").status_code == 405
    before = series(client.get("/metrics", headers=admin_headers).text)
    assert 'codewell_http_requests_total{method="GET",route="unmatched",status="404"}' in before
    assert 'codewell_http_requests_total{method="GET",route="/{repo}/-/blob/{path}",status="302"}' in before
    assert 'codewell_http_requests_total{method="GET",route="/.api/users/{username}",status="401"}' in before
    assert 'codewell_http_requests_total{method="GET",route="/.api/users/{username}",status="200"}' in before
    assert 'codewell_http_requests_total{method="other",route="/healthz",status="405"}' in before
    for n in range(50):
        client.get(f"/private-{n}@{n:040x}/-/blob/x{n}.go", follow_redirects=False)
        client.get(f"/.api/users/nobody-{n}", headers=admin_headers)
    text = client.get("/metrics", headers=admin_headers).text
    assert "secret-plans" not in text
    assert "alice-in-a-label" not in text
    assert "private-" not in text
    assert "nobody-" not in text
    # 100 new paths add at most the two series of their (route, status) pairs, not one per path.
    assert len(series(text) - before) <= 2


def test_metrics_need_a_site_admin_or_the_metrics_token(client: TestClient, runtime: Runtime) -> None:
    anonymous = client.get("/metrics")
    assert anonymous.status_code == 401
    assert "CODEWELL_METRICS_TOKEN" in anonymous.text
    assert "codewell_http_requests_total" not in anonymous.text
    user = auth_headers(make_token(runtime, make_user(runtime, "alice")))
    assert client.get("/metrics", headers=user).status_code == 403
    # Without CODEWELL_METRICS_TOKEN no bearer value opens it (an unknown bearer is an invalid access token).
    assert client.get("/metrics", headers={"Authorization": "Bearer "}).status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer guess"}).status_code == 401
    # The health checks stay anonymous.
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200


def test_the_metrics_token_lets_a_scraper_read_metrics_and_nothing_else(settings: Settings) -> None:
    runtime = Runtime.open(settings.with_changes(metrics_token="scrape-" + "x" * 32))
    runtime.capabilities = CAPABILITIES
    try:
        with TestClient(create_app(runtime, background=False)) as client:
            scraper = {"Authorization": "Bearer scrape-" + "x" * 32}
            response = client.get("/metrics", headers=scraper)
            assert response.status_code == 200
            assert "codewell_http_requests_total" in response.text
            assert client.get("/metrics", headers={"Authorization": "Bearer scrape-wrong"}).status_code == 401
            assert client.get("/metrics", headers={"Authorization": "token scrape-" + "x" * 32}).status_code == 401
            # The secret is no access token anywhere else.
            assert client.get("/.api/users", headers=scraper).status_code == 401
    finally:
        runtime.close()


def test_request_id_is_echoed_or_generated(client: TestClient) -> None:
    assert client.get("/healthz", headers={"X-Request-ID": "abc-123"}).headers["x-request-id"] == "abc-123"
    generated = client.get("/healthz", headers={"X-Request-ID": "bad id\n"}).headers["x-request-id"]
    assert len(generated) == 32


def test_unknown_path_is_404(client: TestClient) -> None:
    # Paths under a `-` segment are never repository pages (web/): no route matches them.
    assert client.get("/-/no/such/page").status_code == 404


@pytest.mark.parametrize("with_id", [True, False])
def test_json_log_lines_carry_the_request_id(with_id: bool) -> None:
    token = request_id_var.set("req-1" if with_id else "")
    try:
        record = logging.LogRecord("codewell.x", logging.INFO, "f", 1, "hello %s", ("world",), None)
        record.repo = "github.com/a/b"
        line = json.loads(JsonFormatter().format(record))
    finally:
        request_id_var.reset(token)
    assert line["message"] == "hello world"
    assert line["repo"] == "github.com/a/b"
    assert ("request_id" in line) is with_id
