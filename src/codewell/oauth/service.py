"""codewell as an OAuth 2 authorization server for MCP clients: the public API other capabilities call.

The work is split by concern: `codewell.oauth.clients` (registration, static clients, Client ID Metadata
Documents, redirect URI and scope policy) and `codewell.oauth.grants` (authorization, consent, codes, tokens,
introspection). This facade holds what callers outside oauth need (the MCP transport checks a token's
audience, request authentication resolves bearer tokens, tests pre-register clients), so they depend on one
module. The only scope is `mcp`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Self

from codewell.core.actors import Actor
from codewell.oauth.clients import SCOPE, ClientService, OAuthClient, check_scope
from codewell.oauth.grants import GrantService

if TYPE_CHECKING:
    from codewell.runtime import Runtime

__all__ = ["SCOPE", "OAuthClient", "OAuthService"]


class OAuthService:
    def __init__(self, runtime: Runtime) -> None:
        self.clients = runtime.get(ClientService)
        self.grants = runtime.get(GrantService)

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    @property
    def issuer(self) -> str:
        return self.grants.issuer

    check_scope = staticmethod(check_scope)

    def create_static_client(
        self, actor: Actor, name: str, redirect_uris: Sequence[str], *, confidential: bool = False
    ) -> tuple[OAuthClient, str | None]:
        """Pre-register a client (site admins only); returns it and its secret (None for public clients)."""
        return self.clients.create_static_client(actor, name, redirect_uris, confidential=confidential)

    def get_client(self, client_id: str) -> OAuthClient:
        return self.clients.get_client(client_id)

    def authenticate_access_token(self, token: str) -> Actor | None:
        """The user behind a live OAuth access token (a bearer resolver of request authentication)."""
        return self.grants.authenticate_access_token(token)

    def audience_problem(self, token: str, resource: str) -> str:
        """ "" when the access token may be used at `resource`, else why not."""
        return self.grants.audience_problem(token, resource)
