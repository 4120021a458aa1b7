"""The http-header provider: an authenticating proxy names the user in trusted headers."""

from __future__ import annotations

from starlette.testclient import TestClient

from codewell.accounts.audit import AuditService
from codewell.accounts.service import AccountService
from codewell.core.actors import INTERNAL
from codewell.runtime import Runtime
from tests.factories import make_user
from tests.functional.auth_providers.conftest import configure

PROXY = {
    "type": "http-header",
    "usernameHeader": "X-Forwarded-User",
    "emailHeader": "X-Forwarded-Email",
    "stripUsernameHeaderPrefix": "accounts.example.com:",
}


def whoami(client: TestClient, headers: dict[str, str]) -> tuple[int, str]:
    response = client.get("/settings/tokens", headers=headers, follow_redirects=False)
    return response.status_code, response.text


def test_header_creates_then_signs_in_the_same_account(runtime: Runtime, client: TestClient) -> None:
    configure(runtime, PROXY)
    headers = {"X-Forwarded-User": "accounts.example.com:carol@corp", "X-Forwarded-Email": "carol@corp.example"}
    status, page = whoami(client, headers)
    assert status == 200
    assert ">carol</a>" in page  # prefix stripped, then normalized (one '@': the local part)
    assert whoami(client, headers)[0] == 200
    user = runtime.get(AccountService).get_by_username("carol")
    assert [e.email for e in runtime.get(AccountService).list_emails(INTERNAL, user.id)] == ["carol@corp.example"]
    linked = runtime.get(AuditService).list(INTERNAL, entity="auth.externalAccount", action="linked")
    assert len(linked) == 1  # the second request used the stored identity, no new link


def test_links_an_existing_account_by_username_as_a_last_resort(runtime: Runtime, client: TestClient) -> None:
    make_user(runtime, "dave")
    configure(runtime, PROXY)
    status, page = whoami(client, {"X-Forwarded-User": "dave"})
    assert status == 200
    assert ">dave</a>" in page
    assert runtime.get(AccountService).count_users() == 1


def test_missing_header_is_refused_and_audited_but_health_checks_pass(runtime: Runtime, client: TestClient) -> None:
    configure(runtime, PROXY)
    response = client.get("/settings/tokens", follow_redirects=False)
    assert response.status_code == 401
    assert "did not send the X-Forwarded-User header" in response.text
    api = client.get("/.api/users")
    assert api.status_code == 401
    assert client.get("/healthz").status_code == 200
    reasons = [e.reason for e in runtime.get(AuditService).list(INTERNAL, entity="auth.signIn", action="failed")]
    assert reasons.count("missing proxy header X-Forwarded-User") == 2


def test_headers_are_ignored_when_no_http_header_provider_is_configured(runtime: Runtime, client: TestClient) -> None:
    make_user(runtime, "root", site_admin=True)
    response = client.get("/settings/tokens", headers={"X-Forwarded-User": "root"}, follow_redirects=False)
    assert response.status_code == 302
    assert response.headers["location"].startswith("/sign-in")


def test_overlong_usernames_are_refused(runtime: Runtime, client: TestClient) -> None:
    configure(runtime, PROXY)
    status, page = whoami(client, {"X-Forwarded-User": "x" * 300})
    assert status == 400
    assert "longer than 255 characters" in page
    assert runtime.get(AccountService).count_users() == 0
