"""OAuth rules that need no HTTP: redirect URI policy, PKCE, scope."""

from __future__ import annotations

import pytest

from codewell.oauth.clients import check_redirect_uri, check_scope, redirect_matches
from codewell.oauth.errors import OAuthError
from codewell.oauth.grants import pkce_challenge


@pytest.mark.parametrize(
    "uri",
    [
        "https://client.example.com/cb",
        "http://127.0.0.1:33418/callback",
        "http://localhost:3334/oauth/callback",
        "http://[::1]:8080/cb",
        "cursor://anysphere.cursor-mcp/oauth/callback",
        "com.example.app:/oauth2redirect",
    ],
)
def test_allowed_redirect_uris(uri: str) -> None:
    check_redirect_uri(uri)


@pytest.mark.parametrize(
    "uri",
    [
        "http://client.example.com/cb",
        "javascript:alert(1)",
        "data:text/html,x",
        "https://x.example/cb#frag",
        "https://x.example/cb#",
        "https://user:pass@x.example/cb",
        "https://x.example/cb\r\nLocation: https://evil.example",
        "https://x.example/c b",
        "",
        "/cb",
    ],
)
def test_refused_redirect_uris(uri: str) -> None:
    with pytest.raises(OAuthError) as raised:
        check_redirect_uri(uri)
    assert raised.value.error == "invalid_redirect_uri"


def test_loopback_redirects_may_change_port_only() -> None:
    registered = ["http://127.0.0.1:1234/cb", "https://app.example/cb"]
    assert redirect_matches(registered, "http://127.0.0.1:5555/cb")
    assert not redirect_matches(registered, "http://127.0.0.1:5555/other")
    assert not redirect_matches(registered, "http://localhost:1234/cb")
    assert not redirect_matches(registered, "https://app.example/cb2")
    assert redirect_matches(registered, "https://app.example/cb")


def test_pkce_s256_matches_rfc7636_appendix_b() -> None:
    assert (
        pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk") == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    )


@pytest.mark.parametrize("scope", ["openid", "mcp offline_access", "MCP", "user:all"])
def test_only_the_mcp_scope(scope: str) -> None:
    with pytest.raises(OAuthError) as raised:
        check_scope(scope)
    assert raised.value.error == "invalid_scope"
    assert "request only the scope mcp" in raised.value.description
    assert check_scope(None) == "mcp"
    assert check_scope("mcp") == "mcp"
