"""Gerrit (beta, spec `codehost_d`): a signed-in user adds Gerrit HTTP credentials under account security;
they are checked against Gerrit's REST API (`GET <url>a/accounts/self`) and stored encrypted on the
identity, for repository-permission sync. Gerrit is never a sign-in method."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import requests

from codewell.auth.providers.oauth import HTTP_TIMEOUT, ProviderError
from codewell.config.providers import GerritProvider
from codewell.core.errors import PermissionDenied

if TYPE_CHECKING:
    pass

XSSI_PREFIX = ")]}'"


def parse_gerrit_json(text: str) -> Any:
    """Gerrit's JSON body without the `)]}'` line it prefixes against cross-site script inclusion."""
    return json.loads(text.removeprefix(XSSI_PREFIX).lstrip())


def check_credentials(provider: GerritProvider, username: str, password: str) -> dict[str, Any]:
    """Gerrit's account for these HTTP credentials; PermissionDenied when Gerrit refuses them."""
    try:
        response = requests.get(f"{provider.url}a/accounts/self", auth=(username, password), timeout=HTTP_TIMEOUT)
    except requests.RequestException as exc:
        raise ProviderError(f"could not reach Gerrit at {provider.url}: {type(exc).__name__}") from None
    if response.status_code in (401, 403):
        raise PermissionDenied(
            "Gerrit did not accept these credentials.",
            hint="use your Gerrit username and the HTTP password from Gerrit's Settings → HTTP Credentials",
        )
    if response.status_code != 200:
        raise ProviderError(f"Gerrit answered {response.status_code}")
    account: dict[str, Any] = parse_gerrit_json(response.text)
    return account
