"""The sign-in page lists the providers by `order`; sign-out with OAuth as the only method starts a new sign-in."""

from __future__ import annotations

import re

from starlette.testclient import TestClient

from codewell.runtime import Runtime
from tests.fakes.codehosts import FakeCodeHost, HostUser
from tests.functional.auth_providers.conftest import configure, sign_in

OAUTH = {"clientID": "id", "clientSecret": "secret"}


def test_providers_are_listed_by_order_and_hidden_ones_are_not(runtime: Runtime, client: TestClient) -> None:
    gh, gl, _, oidc, _ = configure(
        runtime,
        {"type": "github", **OAUTH, "order": 3},
        {"type": "gitlab", **OAUTH, "displayName": "Corp GitLab", "order": 1},
        {"type": "bitbucketcloud", "clientKey": "k", "clientSecret": "s", "hidden": True},
        {"type": "openidconnect", "issuer": "https://idp.example", "clientID": "c", "displayPrefix": "Use "},
        {"type": "builtin", "allowSignup": False},
    )
    page = client.get("/sign-in?returnTo=/repos").text
    labels = re.findall(r'class="provider provider-[a-z]+" href="([^"]+)">([^<]+)</a>', page)
    assert [label for _, label in labels] == ["Continue with Corp GitLab", "Continue with GitHub", "Use OpenID Connect"]
    assert labels[0][0] == f"/.auth/gitlab/login?pc={gl.id}&amp;returnTo=%2Frepos"
    assert gh.id in labels[1][0]
    assert oidc.id in labels[2][0]
    assert 'name="password"' in page  # builtin stays available


def test_sign_out_with_oauth_as_the_only_method_redirects_into_a_new_sign_in(
    runtime: Runtime, client: TestClient
) -> None:
    with FakeCodeHost() as host:
        host.add(HostUser(1, "solo", emails=[("solo@x.example", True)]))
        host.signed_in = "solo"
        (provider,) = configure(
            runtime,
            {
                "type": "github",
                "url": host.url,
                "clientID": host.client_id,
                "clientSecret": host.client_secret,
                "allowSignup": True,
            },
        )
        assert sign_in(client, provider).status_code == 303
        page = client.get("/settings/tokens").text
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)
        assert csrf is not None
        response = client.post("/sign-out", data={"csrf_token": csrf.group(1)}, follow_redirects=False)
        assert response.status_code == 303
        assert response.headers["location"].startswith(f"/.auth/github/login?pc={provider.id}")
        # With builtin enabled too, the sign-in page persists.
        configure(runtime, {"type": "builtin"}, {"type": "github", "url": host.url, **OAUTH})
        client.cookies.clear()
        assert sign_in_page_after_sign_out(client) == "/sign-in"


def sign_in_page_after_sign_out(client: TestClient) -> str:
    client.get("/sign-in")  # sets the pre-session CSRF cookie
    token = client.cookies.get("cw_csrf")
    response = client.post("/sign-out", data={"csrf_token": token}, follow_redirects=False)
    return response.headers["location"]


def test_hidden_providers_still_sign_in_and_no_sign_in_providers_never_do(runtime: Runtime, client: TestClient) -> None:
    with FakeCodeHost() as host:
        host.add(HostUser(2, "quiet", emails=[("q@x.example", True)]))
        host.signed_in = "quiet"
        entry = {"url": host.url, "clientID": host.client_id, "clientSecret": host.client_secret, "allowSignup": True}
        hidden, identity_only = configure(
            runtime, {"type": "github", **entry, "hidden": True}, {"type": "gitlab", **entry, "noSignIn": True}
        )
        assert "provider-github" not in client.get("/sign-in").text
        assert sign_in(client, hidden).status_code == 303
        refused = client.get(f"/.auth/gitlab/login?pc={identity_only.id}", follow_redirects=False)
        assert refused.status_code == 403
        assert "not a sign-in method here (noSignIn)" in refused.text
