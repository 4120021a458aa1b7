"""Gerrit (beta): credentials added under account security are checked against Gerrit's REST API."""

from __future__ import annotations

import re

from starlette.testclient import TestClient

from codewell.auth.identities import IdentityService
from codewell.core.actors import INTERNAL
from codewell.runtime import Runtime
from tests.factories import make_user
from tests.fakes.codehosts import FakeCodeHost, HostUser
from tests.functional.auth_providers.conftest import configure


def test_gerrit_credentials_are_checked_and_linked(runtime: Runtime, client: TestClient, host: FakeCodeHost) -> None:
    host.add(HostUser(1000, "gerrit-user", "G User", emails=[("g@x.example", True)], http_password="http-pass"))
    (gerrit,) = configure(runtime, {"type": "codehost_d", "url": host.url}, {"type": "builtin"})[:1]
    user = make_user(runtime, "gina", password="correct horse battery", email="g@x.example")
    page = client.get("/sign-in")
    token = client.cookies.get("cw_csrf")
    assert page.status_code == 200
    credentials = {"username": "gina", "password": "correct horse battery", "csrf_token": token}
    signed = client.post("/sign-in", data=credentials, follow_redirects=False)
    assert signed.status_code == 303
    form = client.get("/.auth/gerrit/credentials").text
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', form)
    assert csrf is not None
    assert gerrit.id in form
    wrong = client.post(
        "/.auth/gerrit/credentials",
        data={"csrf_token": csrf.group(1), "pc": gerrit.id, "username": "gerrit-user", "password": "nope"},
    )
    assert wrong.status_code == 403
    assert "Gerrit did not accept these credentials." in wrong.text
    ok = client.post(
        "/.auth/gerrit/credentials",
        data={"csrf_token": csrf.group(1), "pc": gerrit.id, "username": "gerrit-user", "password": "http-pass"},
    )
    assert ok.status_code == 200
    assert "Gerrit credentials added." in ok.text
    (identity,) = runtime.get(IdentityService).list_identities(INTERNAL, user.id)
    assert (identity.kind, identity.account_id) == ("gerrit", "1000")
    stored = runtime.get(IdentityService).token_of(INTERNAL, identity.id)
    assert stored == {"username": "gerrit-user", "password": "http-pass"}
    assert client.get(f"/.auth/gerrit/login?pc={gerrit.id}").status_code == 404  # never a sign-in method
