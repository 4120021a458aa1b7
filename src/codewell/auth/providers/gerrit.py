"""Gerrit (beta, spec `codehost_d`): a signed-in user adds Gerrit HTTP credentials under account security;
they are checked against Gerrit's REST API (`GET <url>a/accounts/self`, through the code-host API kit, which
strips Gerrit's `)]}'` prefix) and stored encrypted on the identity, for repository-permission sync. Gerrit is
never a sign-in method."""

from __future__ import annotations

from typing import Any

from codewell.auth.providers.oauth import MAX_WAIT, ProviderError
from codewell.config.providers import GerritProvider
from codewell.core.errors import PermissionDenied
from codewell.hostapi.hosts import GerritAPI
from codewell.hostapi.http import Forbidden, HostError, Unauthorized


def check_credentials(provider: GerritProvider, username: str, password: str) -> dict[str, Any]:
    """Gerrit's account for these HTTP credentials; PermissionDenied when Gerrit refuses them."""
    http = GerritAPI.connect(provider.url, basic=(username, password), max_wait=MAX_WAIT, retries=1)
    try:
        account = http.get("accounts/self").body
    except (Unauthorized, Forbidden):
        raise PermissionDenied(
            "Gerrit did not accept these credentials.",
            hint="use your Gerrit username and the HTTP password from Gerrit's Settings → HTTP Credentials",
        ) from None
    except HostError as exc:
        raise ProviderError(f"gerrit: {exc.message}") from None
    if not isinstance(account, dict):
        raise ProviderError(f"gerrit: {provider.url}a/accounts/self answered something other than an account")
    return account
