"""Wire the OAuth server into a runtime: its access tokens become bearer credentials of the instance."""

from __future__ import annotations

from codewell.auth.service import AuthService
from codewell.oauth.service import OAuthService
from codewell.runtime import Runtime


def setup(runtime: Runtime) -> None:
    """Register the resolver for OAuth access tokens with request authentication (idempotent)."""
    auth = runtime.get(AuthService)
    auth.add_bearer_resolver(runtime.get(OAuthService).authenticate_access_token)
    # OAuth tokens carry only the scope mcp; userinfo is part of what that scope reaches.
    auth.add_scope_path("mcp", "/.auth/idp/oauth/userinfo")
