"""E-mail verification links sent through a real SMTP server on loopback (aiosmtpd), followed over HTTP."""

from __future__ import annotations

import email
import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from email.message import Message
from typing import Any
from urllib.parse import urlsplit

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from sqlalchemy import update
from starlette.testclient import TestClient

from codewell.accounts.audit import AuditService
from codewell.accounts.models import EmailVerificationRow
from codewell.core.actors import INTERNAL
from codewell.db.base import utcnow
from codewell.runtime import Runtime
from tests.factories import auth_headers, make_token, make_user, set_site_config
from tests.functional.accounts.test_pages import PASSWORD, csrf_of, sign_in

pytestmark = pytest.mark.database

SENDER = "codewell@example.org"


@dataclass
class Inbox:
    """What the loopback SMTP server accepted: (envelope recipients, parsed message) per delivery."""

    messages: list[tuple[list[str], Message]] = field(default_factory=list)
    logins: list[tuple[bytes, bytes]] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append((list(envelope.rcpt_tos), email.message_from_bytes(envelope.content)))
        return "250 Message accepted for delivery"

    def link(self, index: int = -1) -> str:
        """The path + query of the verification link in a delivered message."""
        body = self.messages[index][1].get_payload(decode=True)
        assert isinstance(body, bytes)
        match = re.search(r"(https?://\S+/\.auth/verify-email\?code=\S+)", body.decode())
        assert match, body
        parts = urlsplit(match.group(1))
        return f"{parts.path}?{parts.query}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(inbox: Inbox, **options: Any) -> Controller:
    controller = Controller(inbox, hostname="127.0.0.1", port=_free_port(), **options)
    controller.start()
    return controller


@pytest.fixture
def inbox() -> Iterator[tuple[Inbox, int]]:
    box = Inbox()
    controller = _start(box)
    yield box, controller.port
    controller.stop()


def _smtp(runtime: Runtime, port: int, **extra: object) -> None:
    smtp = {"host": "127.0.0.1", "port": port, "tls": "none", **extra}
    set_site_config(runtime, {"email.smtp": smtp, "email.senderAddress": SENDER})


def _audit(runtime: Runtime, action: str) -> list[Any]:
    return runtime.get(AuditService).list(INTERNAL, entity="accounts.email", action=action)


def test_adding_an_email_sends_a_link_that_verifies_it_once(
    client: TestClient, runtime: Runtime, inbox: tuple[Inbox, int]
) -> None:
    box, port = inbox
    _smtp(runtime, port)
    alice = make_user(runtime, "alice", password=PASSWORD)
    token = auth_headers(make_token(runtime, alice))
    added = client.post("/.api/users/alice/emails", json={"email": "Alice@Example.com"}, headers=token)
    assert added.status_code == 201
    assert added.json() == {"email": "alice@example.com", "verified": False, "primary": True, "verification": "sent"}
    assert len(box.messages) == 1
    recipients, message = box.messages[0]
    assert recipients == ["alice@example.com"]
    assert message["From"] == SENDER
    assert message["Subject"] == "Verify your e-mail address"

    link = box.link()
    sign_in(client, "alice")
    page = client.get(link)
    assert page.status_code == 200
    assert "Verified alice@example.com." in page.text
    me = client.get("/.api/users/me").json()
    assert me["emails"] == [{"email": "alice@example.com", "verified": True, "primary": True}]
    assert me["emailVerificationByLink"] is True
    assert [e.details for e in _audit(runtime, "verified")] == [{"userID": alice.id, "email": "alice@example.com"}]

    replay = client.get(link)
    assert replay.status_code == 400
    assert "already used" in replay.text
    assert [e.reason for e in _audit(runtime, "verifyFailed")] == ["replayed code"]
    # The code itself is never written to the audit log.
    code = link.split("code=", 1)[1]
    assert all(code not in repr(e) for e in runtime.get(AuditService).list(INTERNAL, limit=1000))


def test_wrong_and_expired_codes_are_refused_and_audited(
    client: TestClient, runtime: Runtime, inbox: tuple[Inbox, int]
) -> None:
    box, port = inbox
    _smtp(runtime, port)
    make_user(runtime, "alice", password=PASSWORD)
    sign_in(client, "alice")
    page = client.get("/settings/emails")
    assert "Resend" not in page.text
    added = client.post("/settings/emails", data={"email": "alice@example.com", "csrf_token": csrf_of(page.text)})
    assert "We sent a verification link to alice@example.com" in added.text
    link = box.link()

    assert client.get("/.auth/verify-email?code=short").status_code == 400
    unknown = client.get("/.auth/verify-email?code=" + "A" * 43)
    assert unknown.status_code == 400
    assert "not valid" in unknown.text
    with runtime.db.session() as session:
        session.execute(update(EmailVerificationRow).values(expires_at=utcnow() - timedelta(seconds=1)))
    expired = client.get(link)
    assert expired.status_code == 400
    assert "expired" in expired.text
    reasons = [e.reason for e in _audit(runtime, "verifyFailed")]
    assert sorted(reasons) == ["expired code", "malformed code", "unknown code"]
    assert client.get("/.api/users/me").json()["emails"][0]["verified"] is False


def test_resend_is_throttled_and_only_the_owner_can_use_the_link(
    client: TestClient, runtime: Runtime, inbox: tuple[Inbox, int]
) -> None:
    box, port = inbox
    _smtp(runtime, port)
    alice = make_user(runtime, "alice", password=PASSWORD)
    make_user(runtime, "mallory", password=PASSWORD)
    token = auth_headers(make_token(runtime, alice))
    client.post("/.api/users/alice/emails", json={"email": "alice@example.com"}, headers=token)
    resend = "/.api/users/alice/emails/alice@example.com/verification"
    too_soon = client.post(resend, headers=token)
    assert too_soon.status_code == 429
    assert len(box.messages) == 1
    with runtime.db.session() as session:  # a minute later
        session.execute(update(EmailVerificationRow).values(created_at=utcnow() - timedelta(minutes=2)))
    assert client.post(resend, headers=token).status_code == 201
    assert len(box.messages) == 2
    first, second = box.link(0), box.link(1)
    assert first != second

    anonymous = client.get(second, follow_redirects=False)
    assert anonymous.status_code == 303
    assert anonymous.headers["location"].startswith("/sign-in?returnTo=%2F.auth%2Fverify-email%3Fcode%3D")

    sign_in(client, "mallory")
    foreign = client.get(second)
    assert foreign.status_code == 400
    assert "belongs to another account" in foreign.text
    assert "alice" not in foreign.text
    client.cookies.clear()
    sign_in(client, "alice")
    assert client.get(second).status_code == 200  # not consumed by mallory's attempt
    assert client.get(first).status_code == 400  # the older link was spent with the verification
    reasons = [e.reason for e in _audit(runtime, "verifyFailed")]
    assert sorted(reasons) == ["replayed code", "signed in as another user"]
    # Verified addresses get no more links.
    assert client.post(resend, headers=token).status_code == 400


def test_without_smtp_the_ui_and_rest_say_so_and_admins_verify(client: TestClient, runtime: Runtime) -> None:
    admin = auth_headers(make_token(runtime, make_user(runtime, "root", site_admin=True)))
    alice = make_user(runtime, "alice", password=PASSWORD)
    token = auth_headers(make_token(runtime, alice))
    added = client.post("/.api/users/alice/emails", json={"email": "alice@example.com"}, headers=token)
    assert added.json()["verification"] == "notConfigured"
    assert "no SMTP relay is configured" in added.json()["verificationMessage"]
    resend = client.post("/.api/users/alice/emails/alice@example.com/verification", headers=token)
    assert resend.status_code == 400
    assert "no SMTP relay is configured" in resend.json()["error"]["message"]
    assert resend.json()["error"]["hint"] == "ask a site admin to mark the address verified"
    sign_in(client, "alice")
    page = client.get("/settings/emails")
    assert 'id="smtp-not-configured"' in page.text
    assert "Resend" not in page.text
    client.cookies.clear()
    marked = client.patch("/.api/users/alice/emails/alice@example.com", json={"verified": True}, headers=admin)
    assert marked.status_code == 200
    assert client.get("/.api/users/alice", headers=token).json()["emails"][0]["verified"] is True


# Plain-text AUTH is fine on loopback; aiosmtpd warns about it on every connection.
@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")
def test_smtp_auth_with_password_env(client: TestClient, runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    box = Inbox()

    def authenticator(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
        assert isinstance(data, LoginPassword)
        box.logins.append((data.login, data.password))
        return AuthResult(success=(data.login, data.password) == (b"relay", b"s3cret"))

    controller = _start(box, authenticator=authenticator, auth_required=True, auth_require_tls=False)
    try:
        _smtp(runtime, controller.port, username="relay", passwordEnv="CODEWELL_TEST_SMTP_PASSWORD")
        alice = make_user(runtime, "alice", password=PASSWORD)
        token = auth_headers(make_token(runtime, alice))
        monkeypatch.setenv("CODEWELL_TEST_SMTP_PASSWORD", "wrong")
        failed = client.post("/.api/users/alice/emails", json={"email": "a@example.com"}, headers=token)
        assert failed.json()["verification"] == "failed"
        assert box.messages == []
        monkeypatch.setenv("CODEWELL_TEST_SMTP_PASSWORD", "s3cret")
        with runtime.db.session() as session:
            session.execute(update(EmailVerificationRow).values(created_at=utcnow() - timedelta(minutes=2)))
        sent = client.post("/.api/users/alice/emails/a@example.com/verification", headers=token)
        assert sent.status_code == 201, sent.text
        assert box.logins == [(b"relay", b"wrong"), (b"relay", b"s3cret")]
        assert box.messages[0][0] == ["a@example.com"]
    finally:
        controller.stop()


def test_starttls_is_required_when_configured(client: TestClient, runtime: Runtime, inbox: tuple[Inbox, int]) -> None:
    box, port = inbox
    _smtp(runtime, port, tls="starttls")  # the loopback server does not offer STARTTLS
    alice = make_user(runtime, "alice", password=PASSWORD)
    token = auth_headers(make_token(runtime, alice))
    assert (
        client.post("/.api/users/alice/emails", json={"email": "a@example.com"}, headers=token).json()["verification"]
        == "failed"
    )
    with runtime.db.session() as session:
        session.execute(update(EmailVerificationRow).values(created_at=utcnow() - timedelta(minutes=2)))
    resend = client.post("/.api/users/alice/emails/a@example.com/verification", headers=token)
    assert resend.status_code == 503
    assert "STARTTLS" in resend.json()["error"]["message"]
    assert box.messages == []


def test_sign_up_with_an_email_sends_a_link(client: TestClient, runtime: Runtime, inbox: tuple[Inbox, int]) -> None:
    box, port = inbox
    _smtp(runtime, port)
    page = client.get("/sign-up")
    response = client.post(
        "/sign-up",
        data={
            "username": "first",
            "password": PASSWORD,
            "email": "first@example.com",
            "csrf_token": csrf_of(page.text),
        },
        follow_redirects=False,
    )
    assert response.status_code == 303, response.text
    assert box.messages[0][0] == ["first@example.com"]
    assert client.get(box.link()).status_code == 200
    assert client.get("/.api/users/me").json()["emails"][0]["verified"] is True


def test_admin_created_users_get_a_link_unless_marked_verified(
    client: TestClient, runtime: Runtime, inbox: tuple[Inbox, int]
) -> None:
    box, port = inbox
    _smtp(runtime, port)
    admin = auth_headers(make_token(runtime, make_user(runtime, "root", site_admin=True)))
    client.post("/.api/users", json={"username": "carol", "email": "carol@example.com"}, headers=admin)
    client.post(
        "/.api/users", json={"username": "dave", "email": "d@example.com", "emailVerified": True}, headers=admin
    )
    assert [to for to, _ in box.messages] == [["carol@example.com"]]
