"""The external sign-in service: which providers are configured, starting a sign-in, finishing a callback.

Routes (codewell.auth.providers.routes) stay thin: every refusal (forged, replayed or foreign state, a
provider removed from the config, a wrong issuer or audience, filters not met) is raised here as a
`codewell.core.errors` exception and recorded in the audit log under `auth.signIn` / `failed`.
"""

from __future__ import annotations

import base64
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urlencode

from codewell.accounts.audit import AuditService
from codewell.accounts.service import AccountService, User
from codewell.auth.identities import ExternalAccount, Identity, IdentityService, LinkPolicy
from codewell.auth.providers.bitbucketcloud import BitbucketCloudSignIn
from codewell.auth.providers.bitbucketserver import BitbucketServerSignIn
from codewell.auth.providers.flows import AuthFlows, Flow, FlowRefused
from codewell.auth.providers.gerrit import check_credentials
from codewell.auth.providers.github import GitHubSignIn
from codewell.auth.providers.gitlab import GitLabSignIn
from codewell.auth.providers.oauth import CodeHostSignIn
from codewell.auth.providers.openidconnect import OpenIDConnectClient
from codewell.auth.providers.saml import client_for
from codewell.auth.service import CONNECT_KINDS, AuthService, ClientInfo
from codewell.authz import Action, UserRef, ensure
from codewell.config.providers import (
    BitbucketCloudProvider,
    BitbucketServerProvider,
    GerritProvider,
    GitHubProvider,
    GitLabProvider,
    HTTPHeaderProvider,
    OpenIDConnectProvider,
    Provider,
    SAMLProvider,
)
from codewell.core.actors import ANONYMOUS, Actor
from codewell.core.errors import CodewellError, Conflict, InvalidInput, NotFound, PermissionDenied, Unauthenticated

if TYPE_CHECKING:
    from codewell.runtime import Runtime

log = logging.getLogger(__name__)
CODE_HOST_KINDS = ("github", "gitlab", "bitbucketcloud", "bitbucketserver")
REDIRECT_KINDS = (*CODE_HOST_KINDS, "openidconnect", "saml")
OIDC_CALLBACK = "/.auth/callback"
CONNECT_RETURN = "/settings/accounts?done=connected"  # where a connection from account settings comes back to


@dataclass(frozen=True, slots=True)
class SignInOption:
    """One button on the sign-in page."""

    provider_id: str
    kind: str
    label: str
    url: str


class ProviderGone(PermissionDenied):
    """A login or callback names a provider that is not (or no longer) in `auth.providers`."""

    def __init__(self) -> None:
        super().__init__(
            "This sign-in provider is not configured on this instance.",
            hint="it may have been removed from auth.providers; sign in from the sign-in page",
        )


def callback_path(kind: str) -> str:
    return OIDC_CALLBACK if kind == "openidconnect" else f"/.auth/{kind}/callback"


def login_path(provider: Provider, return_to: str) -> str:
    return f"/.auth/{provider.kind}/login?" + urlencode({"pc": provider.id, "returnTo": return_to})


def link_policy(provider: Provider) -> LinkPolicy:
    return LinkPolicy(
        label=provider.display_name or provider.label.removeprefix(provider.display_prefix),
        allow_signup=provider.signup_allowed,
        link_by_username=isinstance(provider, HTTPHeaderProvider),
        single_identity_per_user=isinstance(provider, OpenIDConnectProvider) and provider.single_identity_per_user,
    )


class ExternalSignIn:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.flows = runtime.get(AuthFlows)
        self.identities = runtime.get(IdentityService)
        self.audit = runtime.get(AuditService)

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    # -- configuration ------------------------------------------------------------------------------------
    def providers(self) -> list[Provider]:
        return self.runtime.config.providers

    def find(self, provider_id: str, kind: str | None = None) -> Provider | None:
        for provider in self.providers():
            if provider.id == provider_id and (kind is None or provider.kind == kind):
                return provider
        return None

    def first_of_kind(self, kind: str) -> Provider | None:
        return next((p for p in self.providers() if p.kind == kind), None)

    def options(self, return_to: str) -> list[SignInOption]:
        """The redirect-based providers to list on the sign-in page, by `order` (unset last), then file order."""
        listed = [
            (index, p)
            for index, p in enumerate(self.providers())
            if p.kind in REDIRECT_KINDS and not p.hidden and not p.no_sign_in
        ]
        listed.sort(key=lambda item: (item[1].order is None, item[1].order or 0, item[0]))
        return [SignInOption(p.id, p.kind, p.label, login_path(p, return_to)) for _, p in listed]

    def sole_redirect_login(self, return_to: str = "/") -> str | None:
        """The login URL to go straight to when one redirect provider is the only sign-in method (spec
        "Linking accounts" rule 4: sign-out then starts a new OAuth sign-in), else None."""
        if any(p.kind == "builtin" for p in self.providers()):
            return None
        options = self.options(return_to)
        return options[0].url if len(options) == 1 else None

    # -- starting -----------------------------------------------------------------------------------------
    def begin(self, kind: str, provider_id: str, return_to: str, browser_token: str, client: ClientInfo) -> str:
        """The provider URL to send the browser to (a new single-use flow is recorded)."""
        provider = self._provider(kind, provider_id, client)
        try:
            return self._redirect(provider, return_to, browser_token)
        except CodewellError as exc:
            self.refuse(kind, exc.message, client)
            raise

    def _redirect(self, provider: Provider, return_to: str, browser_token: str) -> str:
        if provider.no_sign_in:
            raise PermissionDenied(f"{provider.label} is not a sign-in method here (noSignIn).")
        self.runtime.get(AuthService).check_provider(provider.kind)
        if isinstance(provider, SAMLProvider):
            flow = self.flows.begin(provider.id, return_to, browser_token, pkce=False)
            return client_for(self.runtime, provider).authorization_url(flow)
        if isinstance(provider, OpenIDConnectProvider):
            flow = self.flows.begin(provider.id, return_to, browser_token, pkce=True)
            return self._oidc(provider).authorization_url(flow)
        host = self._code_host(provider)
        flow = self.flows.begin(provider.id, return_to, browser_token, pkce=host.pkce)
        return host.authorization_url(flow)

    def _provider(self, kind: str, provider_id: str, client: ClientInfo) -> Provider:
        provider = self.find(provider_id, kind)
        if provider is None:
            self.refuse(kind, "login for a provider that is not configured", client)
            raise ProviderGone
        return provider

    def begin_connect(self, actor: Actor, kind: str, provider_id: str, browser_token: str, client: ClientInfo) -> str:
        """The provider URL that connects an identity there to the signed-in `actor` (account settings): the
        flow records the user, and its callback links the identity instead of signing in. noSignIn providers
        may be connected (they exist for linking); the sign-up filters apply only to sign-ins."""
        if not actor.is_user or actor.user_id is None:
            raise Unauthenticated(
                "Sign in to connect an external account.", hint="sign in, then use /settings/accounts"
            )
        ensure(actor, Action.USER_MANAGE, UserRef(actor.user_id))
        provider = self._provider(kind, provider_id, client)
        if kind not in CONNECT_KINDS:
            raise NotFound(f"{provider.label.removeprefix(provider.display_prefix)} accounts cannot be connected here.")
        try:
            self.runtime.get(AuthService).check_provider(kind)
            if isinstance(provider, OpenIDConnectProvider):
                flow = self.flows.begin(
                    provider.id, CONNECT_RETURN, browser_token, pkce=True, link_user_id=actor.user_id
                )
                return self._oidc(provider).authorization_url(flow)
            host = self._code_host(provider)
            flow = self.flows.begin(
                provider.id, CONNECT_RETURN, browser_token, pkce=host.pkce, link_user_id=actor.user_id
            )
            return host.authorization_url(flow)
        except CodewellError as exc:
            self.refuse(kind, exc.message, client)
            raise

    # -- finishing ----------------------------------------------------------------------------------------
    def finish(
        self, kind: str, params: dict[str, str], browser_token: str, client: ClientInfo, actor: Actor = ANONYMOUS
    ) -> tuple[User, str, bool]:
        """Complete a code-flow callback (code hosts and OpenID Connect): (the user, returnTo, connected).

        `connected` is True when the flow was started from account settings: the identity was linked to the
        signed-in `actor` (who must still be the user who started it) and no new session is needed."""
        flow = self.consume_flow(kind, params.get("state", ""), browser_token, client)
        provider = self.find(flow.provider_id)
        if provider is None or provider.kind != kind:
            self.refuse(kind, "callback for a provider removed from the config", client)
            raise ProviderGone
        if flow.link_user_id is not None and actor.user_id != flow.link_user_id:
            self.refuse(kind, "connect callback without the session of the user who started it", client)
            raise PermissionDenied(
                "You are no longer signed in as the user who started connecting this account.",
                hint="sign in again and connect it from /settings/accounts",
            )
        if params.get("error"):
            reason = f"provider error {params['error'][:100]}"
            self.refuse(kind, reason, client)
            detail = params.get("error_description", "")[:200]
            raise PermissionDenied(
                f"{provider.label.removeprefix(provider.display_prefix)} did not sign you in"
                + (f": {detail}" if detail else f" ({params['error'][:100]})."),
                hint="try again, or ask a site admin",
            )
        code = params.get("code", "")
        if not code:
            self.refuse(kind, "callback without code", client)
            raise InvalidInput("The sign-in response has no authorization code.", hint="start the sign-in again")
        try:
            account = self._account(provider, code, flow, params.get("iss"), filters=flow.link_user_id is None)
        except CodewellError as exc:
            self.refuse(kind, exc.message, client)
            raise
        if flow.link_user_id is not None:
            return self.connect(provider, account, flow.link_user_id, client), flow.return_to, True
        return self.complete(provider, account, client), flow.return_to, False

    def connect(self, provider: Provider, account: ExternalAccount, user_id: int, client: ClientInfo) -> User:
        """Link an authenticated external identity to a signed-in user (audited `auth.externalAccount` /
        `linked`, how `connected`); refused (audited) when another account holds it or the provider allows one
        identity per user and this user has another."""
        user = self.runtime.get(AccountService).get_user(user_id)
        try:
            self.runtime.get(AuthService).check_provider(provider.kind)
            self.identities.check_single_identity(user, account, link_policy(provider))
            self.identities.link(user, account, client, how="connected")
        except Conflict as exc:
            self.refuse(provider.kind, exc.message, client)
            raise Conflict(
                f"This {provider.label.removeprefix(provider.display_prefix)} account is already linked to another "
                "user here.",
                hint="sign in with it to use that account, or ask a site admin",
            ) from None
        except CodewellError as exc:
            self.refuse(provider.kind, exc.message, client)
            raise
        return user

    def complete(self, provider: Provider, account: ExternalAccount, client: ClientInfo) -> User:
        """Link or create the account of an authenticated external identity (IdentityService audits)."""
        try:
            self.runtime.get(AuthService).check_provider(provider.kind)
        except CodewellError as exc:
            self.refuse(provider.kind, exc.message, client)
            raise
        return self.identities.sign_in(account, link_policy(provider), client)

    def consume_flow(self, kind: str, state: str, browser_token: str, client: ClientInfo) -> Flow:
        """The flow of a callback's state, consumed; FlowRefused (audited) when it may not be used."""
        try:
            return self.flows.finish(state, browser_token)
        except FlowRefused as exc:
            self.refuse(kind, exc.reason, client)
            raise

    def _account(
        self, provider: Provider, code: str, flow: Flow, iss: str | None, *, filters: bool = True
    ) -> ExternalAccount:
        if isinstance(provider, OpenIDConnectProvider):
            return self._oidc(provider).finish(code, flow, iss)
        host = self._code_host(provider)
        http, token = host.exchange(code, flow)
        # The filters are checked at every provider sign-in: sign-up and new sign-ins.
        return host.account(http, token, filters=filters)

    def _oidc(self, provider: OpenIDConnectProvider) -> OpenIDConnectClient:
        return OpenIDConnectClient(provider, self.runtime.external_url + OIDC_CALLBACK)

    def _code_host(self, provider: Provider) -> CodeHostSignIn[Any]:
        redirect = self.runtime.external_url + callback_path(provider.kind)
        if isinstance(provider, GitHubProvider):
            return GitHubSignIn(provider, redirect)
        if isinstance(provider, GitLabProvider):
            return GitLabSignIn(provider, redirect)
        if isinstance(provider, BitbucketCloudProvider):
            return BitbucketCloudSignIn(provider, redirect)
        if isinstance(provider, BitbucketServerProvider):
            return BitbucketServerSignIn(provider, redirect)
        raise NotFound(f"{provider.kind} has no OAuth sign-in")

    def refuse(self, kind: str, reason: str, client: ClientInfo) -> None:
        """Record a refused sign-in step in the audit log (`auth.signIn` / `failed`)."""
        self.audit.record(
            "auth.signIn",
            "failed",
            reason=reason[:500],
            ip=client.ip,
            user_agent=client.user_agent,
            details={"provider": kind},
        )


# SAML and Gerrit steps that need the sign-in service (their protocol clients live in saml.py and gerrit.py).


def _provider(runtime: Runtime) -> SAMLProvider:
    provider = runtime.get(ExternalSignIn).first_of_kind("saml")
    if not isinstance(provider, SAMLProvider):
        raise NotFound("SAML sign-in is not configured on this instance.", hint="add a saml entry to auth.providers")
    return provider


def sp_metadata(runtime: Runtime) -> str:
    """The service provider metadata XML of the configured SAML provider (NotFound without one)."""
    return client_for(runtime, _provider(runtime)).metadata()


def finish_saml(runtime: Runtime, fields: dict[str, str], browser_token: str, client: ClientInfo) -> tuple[User, str]:
    """Complete a POST to the ACS: (the signed-in user, returnTo). Every refusal is audited."""
    service = runtime.get(ExternalSignIn)
    flow = service.consume_flow("saml", fields.get("RelayState", ""), browser_token, client)
    provider = service.find(flow.provider_id, "saml")
    if not isinstance(provider, SAMLProvider):
        service.refuse("saml", "callback for a provider removed from the config", client)
        raise ProviderGone
    saml_response = fields.get("SAMLResponse", "")
    try:
        if not saml_response:
            raise InvalidInput("The SAML response is missing.", hint="start the sign-in again")
        base64.b64decode(saml_response, validate=True)
        account = client_for(runtime, provider).finish(saml_response, flow)
    except CodewellError as exc:
        service.refuse("saml", exc.message, client)
        raise
    except ValueError:
        service.refuse("saml", "SAMLResponse is not base64", client)
        raise InvalidInput("The SAML response is malformed.") from None
    return service.complete(provider, account, client), flow.return_to


def add_credentials(
    runtime: Runtime, actor: Actor, provider_id: str, username: str, password: str, client: ClientInfo
) -> Identity:
    """Link the Gerrit account of these credentials to the signed-in user (credentials kept encrypted)."""
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
