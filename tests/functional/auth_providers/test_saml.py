"""SAML sign-in against a test IdP built with pysaml2; signed assertions are required."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from codewell.accounts.audit import AuditService
from codewell.accounts.service import AccountService
from codewell.core.actors import INTERNAL
from codewell.runtime import Runtime
from tests.fakes.saml_idp import SSO_URL, TestIdP
from tests.functional.auth_providers.conftest import configure, start

ALICE = {"mail": ["alice@corp.example"], "uid": ["alice"], "displayName": ["Alice S"], "groups": ["eng"]}


@pytest.fixture
def idp(tmp_path: Path) -> TestIdP:
    return TestIdP(tmp_path / "idp")


def saml(idp: TestIdP, **extra: object) -> dict[str, object]:
    return {"type": "saml", "identityProviderMetadata": idp.metadata(), **extra}


def failures(runtime: Runtime) -> list[str]:
    return [e.reason for e in runtime.get(AuditService).list(INTERNAL, entity="auth.signIn", action="failed")]


def post(client: TestClient, fields: dict[str, str]) -> Any:
    return client.post("/.auth/saml/acs", data=fields, follow_redirects=False)


def test_sp_metadata(runtime: Runtime, client: TestClient, idp: TestIdP) -> None:
    assert client.get("/.auth/saml/metadata").status_code == 404
    configure(runtime, saml(idp))
    response = client.get("/.auth/saml/metadata")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/samlmetadata+xml")
    assert f'entityID="{runtime.external_url}/.auth/saml/metadata"' in response.text
    assert f'Location="{runtime.external_url}/.auth/saml/acs"' in response.text
    assert 'WantAssertionsSigned="true"' in response.text


def test_signed_assertion_signs_up_and_links(runtime: Runtime, client: TestClient, idp: TestIdP) -> None:
    (provider,) = configure(runtime, saml(idp, allowGroups=["eng"]))
    redirect = start(client, provider, "/welcome")
    assert redirect.startswith(SSO_URL + "?SAMLRequest=")
    metadata = client.get("/.auth/saml/metadata").text
    response = post(client, idp.respond(metadata, redirect, user="alice", attributes=ALICE))
    assert response.status_code == 303, response.text
    assert response.headers["location"] == "/welcome"
    user = runtime.get(AccountService).get_by_username("alice")
    assert user.display_name == "Alice S"
    assert [e.email for e in runtime.get(AccountService).list_emails(INTERNAL, user.id)] == ["alice@corp.example"]


def test_unsigned_assertion_is_refused(runtime: Runtime, client: TestClient, idp: TestIdP) -> None:
    (provider,) = configure(runtime, saml(idp))
    metadata = client.get("/.auth/saml/metadata").text
    fields = idp.respond(metadata, start(client, provider), user="alice", attributes=ALICE, sign_assertion=False)
    response = post(client, fields)
    assert response.status_code == 403
    assert "SAML response was refused" in response.text or "not signed" in response.text
    assert runtime.get(AccountService).count_users() == 0
    assert any("SAML" in r for r in failures(runtime))


def test_tampered_assertion_is_refused(runtime: Runtime, client: TestClient, idp: TestIdP) -> None:
    (provider,) = configure(runtime, saml(idp))
    metadata = client.get("/.auth/saml/metadata").text
    fields = idp.respond(metadata, start(client, provider), user="alice", attributes=ALICE)
    xml = base64.b64decode(fields["SAMLResponse"]).decode()
    assert "alice@corp.example" in xml
    fields["SAMLResponse"] = base64.b64encode(xml.replace("alice@corp.example", "admin@corp.example").encode()).decode()
    response = post(client, fields)
    assert response.status_code == 403
    assert runtime.get(AccountService).count_users() == 0


def test_replayed_response_and_group_filter(runtime: Runtime, client: TestClient, idp: TestIdP) -> None:
    (provider,) = configure(runtime, saml(idp, allowGroups=["admins"]))
    metadata = client.get("/.auth/saml/metadata").text
    fields = idp.respond(metadata, start(client, provider), user="alice", attributes=ALICE)
    refused = post(client, fields)
    assert refused.status_code == 403
    assert "not in a group allowed to sign in" in refused.text
    assert post(client, fields).status_code == 403  # the flow was consumed: a replay is refused
    assert "unknown or already used state" in failures(runtime)


def test_response_from_another_idp_is_refused(
    runtime: Runtime, client: TestClient, idp: TestIdP, tmp_path: Path
) -> None:
    (provider,) = configure(runtime, saml(idp))
    metadata = client.get("/.auth/saml/metadata").text
    impostor = TestIdP(tmp_path / "impostor")  # same entity ID, different key
    fields = impostor.respond(metadata, start(client, provider), user="alice", attributes=ALICE)
    assert post(client, fields).status_code == 403
    assert runtime.get(AccountService).count_users() == 0
