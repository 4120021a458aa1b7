"""Wire the OAuth server into a runtime: its access tokens become bearer credentials of the instance."""

from __future__ import annotations

from codewell.auth.service import AuthService
from codewell.config import SiteConfig
from codewell.oauth.grants import GrantService
from codewell.oauth.routes import CLIENT_AUTH_PATHS
from codewell.oauth.service import OAuthService
from codewell.runtime import Runtime


def setup(runtime: Runtime) -> None:
    """Register the resolver for OAuth access tokens with request authentication (idempotent), and revoke dynamic
    clients' tokens whenever dynamic registration is (or is found) switched off."""
    auth = runtime.get(AuthService)
    auth.add_bearer_resolver(runtime.get(OAuthService).authenticate_access_token)
    # OAuth tokens carry only the scope mcp; userinfo is part of what that scope reaches.
    auth.add_scope_path("mcp", "/.auth/idp/oauth/userinfo")
    # Confidential clients authenticate with HTTP Basic (client_secret_basic) where RFC 6749, 7009 and 7662 allow
    # it: those routes read the header themselves, so it is no invalid header there.
    for path in CLIENT_AUTH_PATHS:
        auth.add_basic_auth_path(path)
    grants = runtime.get(GrantService)

    def config_changed(config: SiteConfig) -> None:
        if not config.auth_idp_dynamic_client_registration_enabled:
            grants.revoke_dynamic_tokens()

    runtime.site_config.on_change(config_changed)
