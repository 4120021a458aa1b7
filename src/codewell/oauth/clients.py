"""OAuth clients: dynamic registration (RFC 7591), static clients pre-registered by admins, and Client ID
Metadata Documents (an HTTPS URL as client_id), with the redirect URI and scope policy they must satisfy.

Client secrets are stored as SHA-256 hashes only. The grants (codes, tokens) are in `codewell.oauth.grants`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urlsplit

from sqlalchemy import delete, select, update

from codewell.authz import Action, ensure
from codewell.core.actors import Actor
from codewell.core.errors import InvalidInput, NotFound
from codewell.db.base import utcnow
from codewell.oauth.cimd import fetch_client_metadata
from codewell.oauth.errors import OAuthError
from codewell.oauth.models import OAuthClientRow

if TYPE_CHECKING:
    from codewell.runtime import Runtime

SCOPE = "mcp"
METADATA_CACHE_TTL = timedelta(minutes=10)
CLIENT_PREFIX = "cwc_"
SECRET_PREFIX = "cwcs_"
AUTH_METHODS = ("none", "client_secret_post", "client_secret_basic")
GRANT_TYPES = frozenset({"authorization_code", "refresh_token"})
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})
MAX_REDIRECT_URI = 2048
# Schemes a browser would execute or read locally instead of handing to an app.
UNSAFE_SCHEMES = frozenset(
    {"javascript", "data", "file", "vbscript", "about", "blob", "filesystem", "ftp", "ws", "wss"}
)


def sha256(value: str) -> bytes:
    return hashlib.sha256(value.encode()).digest()


def check_scope(scope: str | None) -> str:
    """Only `mcp` may be requested or registered (absent means `mcp`); anything else is invalid_scope."""
    requested = set((scope or SCOPE).split())
    if requested != {SCOPE}:
        extra = sorted(requested - {SCOPE})
        raise OAuthError(
            "invalid_scope", f"scope {' '.join(extra) or repr(scope)} is not allowed; request only the scope mcp"
        )
    return SCOPE


@dataclass(frozen=True, slots=True)
class OAuthClient:
    pk: int
    client_id: str
    kind: str  # "dynamic" | "static" | "metadata"
    client_name: str
    client_uri: str
    redirect_uris: tuple[str, ...]
    token_endpoint_auth_method: str
    scope: str
    created_at: datetime
    has_secret: bool

    @property
    def public(self) -> bool:
        return self.token_endpoint_auth_method == "none"

    def as_json(self) -> dict[str, Any]:
        return {
            "client_id": self.client_id,
            "kind": self.kind,
            "client_name": self.client_name,
            "client_uri": self.client_uri or None,
            "redirect_uris": list(self.redirect_uris),
            "token_endpoint_auth_method": self.token_endpoint_auth_method,
            "grant_types": sorted(GRANT_TYPES),
            "response_types": ["code"],
            "scope": self.scope,
            "created_at": self.created_at.isoformat(),
        }


def to_client(row: OAuthClientRow) -> OAuthClient:
    return OAuthClient(
        pk=row.id,
        client_id=row.client_id,
        kind=row.kind,
        client_name=row.client_name,
        client_uri=row.client_uri,
        redirect_uris=tuple(json.loads(row.redirect_uris)),
        token_endpoint_auth_method=row.token_endpoint_auth_method,
        scope=row.scope,
        created_at=row.created_at,
        has_secret=row.client_secret_sha256 is not None,
    )


def is_loopback_redirect(uri: str) -> bool:
    parts = urlsplit(uri)
    return parts.scheme == "http" and (parts.hostname or "") in LOOPBACK_HOSTS


def check_redirect_uri(uri: str) -> None:
    """Accept https, loopback http (RFC 8252 §7.3) and private-use schemes (RFC 8252 §7.1). Refuse fragments
    (RFC 6749 §3.1.2), userinfo (`https://user:pass@host/` shows a misleading host on the consent page) and
    control characters or spaces (CR/LF would split the Location header)."""
    if not isinstance(uri, str) or not uri or len(uri) > MAX_REDIRECT_URI:
        raise OAuthError(
            "invalid_redirect_uri", f"redirect URIs must be non-empty strings of at most {MAX_REDIRECT_URI} characters"
        )
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in uri):
        raise OAuthError("invalid_redirect_uri", "redirect URIs must not contain spaces or control characters")
    if "#" in uri:
        raise OAuthError("invalid_redirect_uri", f"redirect URI {uri!r} must not contain a fragment")
    parts = urlsplit(uri)
    if "@" in parts.netloc:
        raise OAuthError(
            "invalid_redirect_uri", f"redirect URI {uri!r} must not contain a user name or password (user@host)"
        )
    if parts.scheme == "https" and parts.hostname:
        return
    if is_loopback_redirect(uri):
        return
    if parts.scheme and parts.scheme not in {"http", "https", *UNSAFE_SCHEMES}:
        return  # private-use URI scheme of a native app (RFC 8252 §7.1): cursor://..., com.example.app:/cb
    raise OAuthError(
        "invalid_redirect_uri",
        f"redirect URI {uri!r} is not allowed: use https, http on a loopback address (127.0.0.1, localhost, [::1]) "
        "or an app's private-use scheme (cursor://..., com.example.app:/cb)",
    )


def redirect_matches(registered: Sequence[str], given: str) -> bool:
    """Exact match, except that loopback redirect URIs may use any port (RFC 8252 §7.3)."""
    if given in registered:
        return True
    if not is_loopback_redirect(given):
        return False
    g = urlsplit(given)
    for uri in registered:
        r = urlsplit(uri)
        if is_loopback_redirect(uri) and (r.hostname, r.path, r.query) == (g.hostname, g.path, g.query):
            return True
    return False


class ClientService:
    """Registration, lookup and authentication of OAuth clients."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    def dynamic_registration_enabled(self) -> bool:
        return self.runtime.config.mcp_dynamic_client_registration_enabled

    def register_dynamic(self, metadata: Mapping[str, Any]) -> tuple[OAuthClient, str | None]:
        """RFC 7591 registration; returns the client and its secret (None for public clients)."""
        if not self.dynamic_registration_enabled():
            raise OAuthError("access_denied", "dynamic client registration is disabled", status=404)
        fields = self._validate_metadata(metadata)
        return self._insert_client("dynamic", fields, created_by=None)

    def create_static_client(
        self, actor: Actor, name: str, redirect_uris: Sequence[str], *, confidential: bool = False
    ) -> tuple[OAuthClient, str | None]:
        """Pre-register a client (site admins only); public PKCE clients by default."""
        ensure(actor, Action.OAUTH_CLIENTS_MANAGE)
        if not name.strip():
            raise InvalidInput("the client needs a name", hint="pass a name such as 'Claude Code'")
        try:
            fields = self._validate_metadata(
                {
                    "client_name": name.strip(),
                    "redirect_uris": list(redirect_uris),
                    "token_endpoint_auth_method": "client_secret_basic" if confidential else "none",
                }
            )
        except OAuthError as exc:
            raise InvalidInput(exc.description, hint="use https or loopback http redirect URIs") from None
        return self._insert_client("static", fields, created_by=actor.user_id)

    def list_clients(self, actor: Actor, kind: str | None = None) -> list[OAuthClient]:
        ensure(actor, Action.OAUTH_CLIENTS_MANAGE)
        with self.runtime.db.session() as session:
            query = select(OAuthClientRow).order_by(OAuthClientRow.id)
            if kind:
                query = query.where(OAuthClientRow.kind == kind)
            return [to_client(r) for r in session.scalars(query)]

    def delete_client(self, actor: Actor, client_id: str) -> None:
        """Delete a client and (by cascade) its codes and tokens."""
        ensure(actor, Action.OAUTH_CLIENTS_MANAGE)
        with self.runtime.db.session() as session:
            deleted = session.execute(delete(OAuthClientRow).where(OAuthClientRow.client_id == client_id))
            if not deleted.rowcount:  # type: ignore[attr-defined]
                raise NotFound(f"no OAuth client {client_id!r}", hint="list clients with `codewell oauth clients list`")

    def get_client(self, client_id: str) -> OAuthClient:
        """A usable client (metadata-document clients fetched and cached); invalid_client otherwise."""
        if not client_id:
            raise OAuthError("invalid_client", "client_id is required", status=401, redirectable=False)
        if client_id.startswith("https://"):
            return self._metadata_client(client_id)
        with self.runtime.db.session() as session:
            row = session.scalar(select(OAuthClientRow).where(OAuthClientRow.client_id == client_id))
            client = to_client(row) if row is not None else None
        if client is None or not self.client_usable(client):
            raise OAuthError("invalid_client", f"unknown client {client_id!r}", status=401, redirectable=False)
        return client

    def client_usable(self, client: OAuthClient) -> bool:
        """Dynamic clients (and their tokens) stop working while dynamic registration is off."""
        return client.kind != "dynamic" or self.dynamic_registration_enabled()

    def authenticate_client(self, client_id: str, secret: str | None) -> OAuthClient:
        """The client of a token-endpoint request; confidential clients must present their secret."""
        client = self.get_client(client_id)
        if client.public:
            return client
        with self.runtime.db.session() as session:
            stored = session.scalar(select(OAuthClientRow.client_secret_sha256).where(OAuthClientRow.id == client.pk))
        if not secret or stored is None or not hmac.compare_digest(stored, sha256(secret)):
            raise OAuthError("invalid_client", "client authentication failed", status=401, redirectable=False)
        return client

    def _validate_metadata(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(metadata, Mapping):
            raise OAuthError("invalid_client_metadata", "the registration request must be a JSON object")
        uris = metadata.get("redirect_uris")
        if not isinstance(uris, list) or not uris or len(uris) > 20:
            raise OAuthError("invalid_redirect_uri", "redirect_uris must be a non-empty array (at most 20 URIs)")
        for uri in uris:
            check_redirect_uri(uri)
        scope = metadata.get("scope")
        if scope is not None and not isinstance(scope, str):
            raise OAuthError("invalid_client_metadata", "scope must be a string of space-separated scopes")
        # The client may only ever hold `mcp`: registering for more (e.g. "admin") must not look accepted.
        check_scope(scope)
        method = metadata.get("token_endpoint_auth_method", "none")
        if method not in AUTH_METHODS:
            raise OAuthError(
                "invalid_client_metadata",
                f"token_endpoint_auth_method {method!r} is not supported; use one of {', '.join(AUTH_METHODS)}",
            )
        grants = metadata.get("grant_types", ["authorization_code", "refresh_token"])
        if not isinstance(grants, list) or not set(grants) <= GRANT_TYPES or "authorization_code" not in grants:
            raise OAuthError(
                "invalid_client_metadata", "grant_types must include authorization_code and only add refresh_token"
            )
        responses = metadata.get("response_types", ["code"])
        if responses != ["code"]:
            raise OAuthError("invalid_client_metadata", 'response_types must be ["code"]')
        return {
            "client_name": str(metadata.get("client_name") or "")[:255],
            "client_uri": str(metadata.get("client_uri") or "")[:512],
            "redirect_uris": list(uris),
            "token_endpoint_auth_method": method,
            "software_id": str(metadata.get("software_id") or "")[:255],
            "software_version": str(metadata.get("software_version") or "")[:100],
        }

    def _insert_client(
        self, kind: str, fields: dict[str, Any], *, created_by: int | None, client_id: str | None = None
    ) -> tuple[OAuthClient, str | None]:
        secret = None if fields["token_endpoint_auth_method"] == "none" else SECRET_PREFIX + secrets.token_hex(24)
        row = OAuthClientRow(
            client_id=client_id or CLIENT_PREFIX + secrets.token_hex(16),
            kind=kind,
            client_name=fields["client_name"],
            client_uri=fields["client_uri"],
            redirect_uris=json.dumps(fields["redirect_uris"]),
            token_endpoint_auth_method=fields["token_endpoint_auth_method"],
            client_secret_sha256=sha256(secret) if secret else None,
            scope=SCOPE,
            software_id=fields["software_id"],
            software_version=fields["software_version"],
            created_by_user_id=created_by,
            created_at=utcnow(),
            fetched_at=utcnow() if kind == "metadata" else None,
        )
        with self.runtime.db.session() as session:
            session.add(row)
            session.flush()
            return to_client(row), secret

    def _metadata_client(self, url: str) -> OAuthClient:
        """A Client ID Metadata Document client: cached row, re-fetched when stale."""
        with self.runtime.db.session() as session:
            row = session.scalar(select(OAuthClientRow).where(OAuthClientRow.client_id == url))
            cached = to_client(row) if row is not None else None
            fetched_at = row.fetched_at if row is not None else None
        if cached is not None and fetched_at is not None and utcnow() - fetched_at < METADATA_CACHE_TTL:
            return cached
        try:
            document = fetch_client_metadata(url)
            fields = self._validate_metadata(document)
        except OAuthError as exc:
            raise OAuthError("invalid_client", exc.description, status=401, redirectable=False) from None
        if fields["token_endpoint_auth_method"] != "none":
            raise OAuthError(
                "invalid_client",
                "metadata-document clients must be public (token_endpoint_auth_method none)",
                status=401,
                redirectable=False,
            )
        if cached is None:
            return self._insert_client("metadata", fields, created_by=None, client_id=url)[0]
        with self.runtime.db.session() as session:
            session.execute(
                update(OAuthClientRow)
                .where(OAuthClientRow.id == cached.pk)
                .values(
                    client_name=fields["client_name"],
                    client_uri=fields["client_uri"],
                    redirect_uris=json.dumps(fields["redirect_uris"]),
                    fetched_at=utcnow(),
                )
            )
            row = session.get(OAuthClientRow, cached.pk)
            assert row is not None
            return to_client(row)
