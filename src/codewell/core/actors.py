"""The acting principal that every service call receives and enforces permissions for."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class ActorKind(StrEnum):
    ANONYMOUS = "anonymous"
    USER = "user"
    # Background work of the service itself (sync, indexing); never reachable from a request.
    INTERNAL = "internal"


@dataclass(frozen=True, slots=True)
class Actor:
    """Who is calling: an anonymous visitor, a signed-in user, or the service itself."""

    kind: ActorKind
    user_id: int | None = None
    username: str = ""
    site_admin: bool = False
    service_account: bool = False
    # Scopes of the credential used (token scopes, OAuth scopes); empty for sessions and internal work.
    scopes: frozenset[str] = field(default_factory=frozenset)
    # How the actor authenticated: "session", "access_token", "oauth", "sudo", "" for none.
    via: str = ""
    # Client that made the call (MCP client name, "web", "cli"); used by analytics only.
    client: str = ""

    @property
    def is_anonymous(self) -> bool:
        return self.kind is ActorKind.ANONYMOUS

    @property
    def is_internal(self) -> bool:
        return self.kind is ActorKind.INTERNAL

    @property
    def is_user(self) -> bool:
        return self.kind is ActorKind.USER

    @classmethod
    def user(cls, user_id: int, username: str, *, site_admin: bool = False, **extra: object) -> Actor:
        return cls(ActorKind.USER, user_id, username, site_admin, **extra)  # type: ignore[arg-type]


ANONYMOUS = Actor(ActorKind.ANONYMOUS)
INTERNAL = Actor(ActorKind.INTERNAL, username="codewell-internal", site_admin=True)
