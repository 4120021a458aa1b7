"""Wire the OAuth server into a runtime: its access tokens become bearer credentials of the instance."""

from __future__ import annotations

from codewell.runtime import Runtime


def _mcp_challenge(runtime: Runtime, path: str) -> str | None:
    from codewell.mcp.http import challenge, endpoint_for_path

    endpoint = endpoint_for_path(path)
    return challenge(runtime, endpoint, "invalid_token") if endpoint is not None else None


def setup(runtime: Runtime) -> None:
    """Register the resolver for OAuth access tokens with request authentication (idempotent)."""
    from codewell.auth.service import AuthService
    from codewell.oauth.service import OAuthService

    auth = runtime.get(AuthService)
    auth.add_bearer_resolver(runtime.get(OAuthService).authenticate_access_token)
    # The MCP endpoints answer unauthenticated callers themselves, with the OAuth challenge; a rejected
    # credential (unknown, expired or revoked token) is refused by request authentication with the same one.
    auth.add_anonymous_path("/.api/mcp")
    auth.add_challenger(lambda path: _mcp_challenge(runtime, path))
    # OAuth tokens carry only the scope mcp; userinfo is part of what that scope reaches.
    auth.add_scope_path("mcp", "/.auth/idp/oauth/userinfo")
