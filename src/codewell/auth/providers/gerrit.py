"""Gerrit (beta, spec `codehost_d`): a signed-in user adds Gerrit HTTP credentials under account security;
they are checked against Gerrit's REST API (`GET <url>a/accounts/self`) and stored encrypted on the
identity, for repository-permission sync. Gerrit is never a sign-in method."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import requests

from codewell.accounts.service import AccountService
from codewell.auth.identities import ExternalAccount, Identity, IdentityService
from codewell.auth.providers.oauth import HTTP_TIMEOUT, ProviderError
from codewell.config.providers import GerritProvider
from codewell.core.actors import Actor
from codewell.core.errors import InvalidInput, NotFound, PermissionDenied

if TYPE_CHECKING:
    from codewell.auth.service import ClientInfo
    from codewell.runtime import Runtime

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


def add_credentials(
    runtime: Runtime, actor: Actor, provider_id: str, username: str, password: str, client: ClientInfo
) -> Identity:
    """Link the Gerrit account of these credentials to the signed-in user (credentials kept encrypted)."""
    from codewell.auth.providers.service import ExternalSignIn

    if not actor.is_user or actor.user_id is None:
        raise PermissionDenied("sign in to add Gerrit credentials")
    provider = runtime.get(ExternalSignIn).find(provider_id, "gerrit")
    if not isinstance(provider, GerritProvider):
        raise NotFound("This Gerrit provider is not configured.", hint="pick one listed on the page")
    if not username.strip() or not password:
        raise InvalidInput("Enter your Gerrit username and HTTP password.")
    found = check_credentials(provider, username.strip(), password)
    account = ExternalAccount(
        kind="gerrit",
        service_id=provider.service_id,
        client_id="",
        account_id=str(found["_account_id"]),
        username=str(found.get("username") or username),
        display_name=str(found.get("name") or ""),
        data={"username": found.get("username"), "name": found.get("name"), "email": found.get("email")},
        token={"username": username.strip(), "password": password},
    )
    user = runtime.get(AccountService).get_user(actor.user_id)
    return runtime.get(IdentityService).link(user, account, client)
