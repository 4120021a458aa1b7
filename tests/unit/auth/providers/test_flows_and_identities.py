"""Sign-in flows (single use, browser-bound, expiring), token encryption and linking rules, on the real database."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from cryptography.exceptions import InvalidTag
from sqlalchemy import update

from codewell.accounts.service import AccountService
from codewell.auth.identities import ExternalAccount, IdentityService, LinkPolicy, TokenCipher
from codewell.auth.models import AuthFlowRow
from codewell.auth.providers.flows import AuthFlows, FlowRefused
from codewell.auth.providers.github import unauthorized_sso_orgs
from codewell.auth.service import ClientInfo
from codewell.core.actors import INTERNAL, Actor
from codewell.core.errors import PermissionDenied
from codewell.db.base import utcnow
from codewell.runtime import Runtime
from tests.factories import make_user

pytestmark = pytest.mark.database

CLIENT = ClientInfo(ip="127.0.0.1", user_agent="test")


def account(account_id: str = "1", username: str = "ext", *emails: str) -> ExternalAccount:
    return ExternalAccount("github", "https://github.com/", "cid", account_id, username, verified_emails=emails)


def test_flow_is_single_use_and_bound_to_the_browser(runtime: Runtime) -> None:
    flows = runtime.get(AuthFlows)
    flow = flows.begin("p1", "/x", "browser-a")
    assert len(flow.code_verifier) >= 43  # RFC 7636 minimum
    with pytest.raises(FlowRefused) as info:
        flows.finish(flow.state, "browser-b")
    assert info.value.reason == "state not bound to this browser session"
    with pytest.raises(FlowRefused):  # spent by the failed attempt
        flows.finish(flow.state, "browser-a")
    fresh = flows.begin("p1", "/y", "browser-a")
    assert flows.finish(fresh.state, "browser-a").return_to == "/y"


def test_expired_flows_are_refused(runtime: Runtime) -> None:
    flows = runtime.get(AuthFlows)
    flow = flows.begin("p1", "/", "b")
    with runtime.db.session() as session:
        session.execute(update(AuthFlowRow).values(expires_at=utcnow() - timedelta(seconds=1)))
    with pytest.raises(FlowRefused) as info:
        flows.finish(flow.state, "b")
    assert info.value.reason == "state expired"


def test_token_cipher_round_trip_and_tamper_detection() -> None:
    cipher = TokenCipher(b"k" * 32)
    blob = cipher.encrypt({"access_token": "gho_secret"})
    assert b"gho_secret" not in blob
    assert cipher.decrypt(blob) == {"access_token": "gho_secret"}
    with pytest.raises(InvalidTag):
        cipher.decrypt(blob[:-1] + bytes([blob[-1] ^ 1]))
    with pytest.raises(InvalidTag):
        TokenCipher(b"other" * 8).decrypt(blob)


def test_provider_tokens_are_only_readable_by_the_service(runtime: Runtime) -> None:
    identities = runtime.get(IdentityService)
    user = identities.sign_in(
        ExternalAccount("github", "s", "c", "9", "tok", verified_emails=("t@x.example",), token={"access_token": "a"}),
        LinkPolicy("GitHub", allow_signup=True),
        CLIENT,
    )
    (identity,) = identities.list_identities(INTERNAL, user.id)
    with pytest.raises(PermissionDenied):
        identities.token_of(Actor.user(user.id, user.username, site_admin=True), identity.id)
    assert identities.token_of(INTERNAL, identity.id) == {"access_token": "a"}


def test_single_identity_per_user(runtime: Runtime) -> None:
    make_user(runtime, "owner", email="o@x.example")
    identities = runtime.get(IdentityService)
    policy = LinkPolicy("IdP", allow_signup=True, single_identity_per_user=True)
    identities.sign_in(account("a", "one", "o@x.example"), policy, CLIENT)
    with pytest.raises(PermissionDenied, match="already linked to another identity"):
        identities.sign_in(account("b", "two", "o@x.example"), policy, CLIENT)
    # Without the option, a second identity links to the same account.
    identities.sign_in(account("b", "two", "o@x.example"), LinkPolicy("IdP", allow_signup=True), CLIENT)
    assert runtime.get(AccountService).count_users() == 1


def test_unverified_email_on_the_account_does_not_link(runtime: Runtime) -> None:
    runtime.get(AccountService).create_user(INTERNAL, "victim", email="v@x.example", email_verified=False)
    with pytest.raises(Exception, match="already used \\(unverified\\)"):
        runtime.get(IdentityService).sign_in(account("z", "attacker", "v@x.example"), LinkPolicy("G", True), CLIENT)
    assert runtime.get(IdentityService).list_identities(INTERNAL, 1) == []


def test_unnormalizable_login_falls_back_to_the_email(runtime: Runtime) -> None:
    user = runtime.get(IdentityService).sign_in(account("q", "..", "fallback@x.example"), LinkPolicy("G", True), CLIENT)
    assert user.username == "fallback"


def test_second_clash_uses_a_fresh_suffix(runtime: Runtime) -> None:
    make_user(runtime, "same")
    first = runtime.get(IdentityService).sign_in(account("1", "same", "a@x.example"), LinkPolicy("G", True), CLIENT)
    second = runtime.get(IdentityService).sign_in(account("2", "same", "b@x.example"), LinkPolicy("G", True), CLIENT)
    assert re.fullmatch(r"same-[a-z]{5}", first.username)
    assert re.fullmatch(r"same-[a-z]{5}", second.username)
    assert first.username != second.username


@pytest.mark.parametrize(
    ("header", "ids"),
    [
        ("partial-results; organizations=21955855,20582480", {"21955855", "20582480"}),
        ("required; url=https://github.com/orgs/x/sso", set()),
        ("", set()),
    ],
)
def test_sso_header_parsing(header: str, ids: set[str]) -> None:
    assert unauthorized_sso_orgs(header) == ids


def test_overlong_return_to_falls_back_to_the_root(runtime: Runtime) -> None:
    flows = runtime.get(AuthFlows)
    flow = flows.begin("p1", "/" + "x" * 5000, "b")
    assert flows.finish(flow.state, "b").return_to == "/"
