from __future__ import annotations

import json
import logging

import pytest
from starlette.testclient import TestClient

from codewell.core.logging import JsonFormatter, request_id_var
from codewell.runtime import Runtime


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


def test_metrics_count_requests(client: TestClient) -> None:
    client.get("/healthz")
    text = client.get("/metrics").text
    assert 'codewell_http_requests_total{method="GET",route="/healthz",status="200"}' in text


def test_request_id_is_echoed_or_generated(client: TestClient) -> None:
    assert client.get("/healthz", headers={"X-Request-ID": "abc-123"}).headers["x-request-id"] == "abc-123"
    generated = client.get("/healthz", headers={"X-Request-ID": "bad id\n"}).headers["x-request-id"]
    assert len(generated) == 32


def test_unknown_path_is_404(client: TestClient) -> None:
    assert client.get("/no/such/page").status_code == 404


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
