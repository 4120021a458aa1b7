"""`allowed` and `ensure`: every permission decision of the house, with a per-request cache.

A decision is (1) anonymous callers are refused where the rule needs a user, (2) the credential table
(`codewell.authz.credentials`), (3) the action's rule (`codewell.authz.actions.RULES`). Role permissions
(`MCP#ACCESS`) are looked up through `RolePermissions`, which the accounts capability provides at wiring time
(`runtime.provide(RolePermissions, ...)`), and remembered per user while no access data changes (`RoleCache`).

Decisions are cached per request: the HTTP request middleware and the MCP transport open a `scope(runtime)`;
inside it, the same question is answered once. Outside a scope (CLI, background work, direct service calls)
nothing is cached, and role permissions are not consulted (only site admins and internal work hold them).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol, Self

from codewell.authz.actions import RULES, Action, IssuedTo, Resource, UserRef, Who
from codewell.authz.credentials import CREDENTIAL_REFUSALS, Refusal, credential_allows, credential_of
from codewell.core.actors import Actor
from codewell.core.errors import PermissionDenied, Unauthenticated
from codewell.db.epochs import CacheEpochs, per_request
from codewell.runtime import Runtime

log = logging.getLogger(__name__)

SIGN_IN_HINT = "sign in, or send an access token: Authorization: token <token>"


class SignInRequired(Unauthenticated, PermissionDenied):
    """An anonymous caller was refused: answered as 401 (Unauthenticated comes first in the MRO, so the
    code and status are `unauthenticated`/401), and still a PermissionDenied for callers that treat every
    refusal alike."""


class RolePermissions(Protocol):
    """The role permissions a user holds right now (accounts' roles; site admins' implied ones included)."""

    def permissions_of(self, user_id: int) -> frozenset[str]: ...

    def add_change_listener(self, listener: Callable[[], None]) -> None:
        """Call `listener()` after any role, permission or assignment change made in this process."""
        ...


class RoleCache:
    """Role permissions per user while the `accounts` cache epoch stays the same (codewell/db/epochs.py): the
    lookup costs two queries, an MCP call should not. Any role, permission, assignment or user change, made by
    any process, bumps the epoch in its transaction, so the next request reads the lookup again."""

    MAX_ENTRIES = 10_000

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._entries: dict[int, tuple[int | None, frozenset[str]]] = {}
        self._lock = threading.Lock()
        self._lookup: RolePermissions | None = None

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    def lookup(self) -> RolePermissions | None:
        if self._lookup is None:
            found: RolePermissions | None = self.runtime.provided(RolePermissions)
            if found is not None:
                found.add_change_listener(self.clear)
                self._lookup = found
        return self._lookup

    def permissions_of(self, user_id: int) -> frozenset[str]:
        # The epoch is read before the lookup: an entry is never newer than the epoch it is filed under.
        epoch = self.runtime.get(CacheEpochs).current().accounts
        with self._lock:
            entry = self._entries.get(user_id)
        if entry is not None and entry[0] == epoch:
            return entry[1]
        lookup = self.lookup()
        # No lookup provided (accounts not wired): nobody but site admins holds a role permission.
        held = lookup.permissions_of(user_id) if lookup is not None else frozenset()
        with self._lock:
            if len(self._entries) >= self.MAX_ENTRIES:
                self._entries.clear()
            self._entries[user_id] = (epoch, held)
        return held

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


@dataclass
class _Scope:
    runtime: Runtime | None
    decisions: dict[tuple[Actor, Action, Resource | None], bool] = field(default_factory=dict)


_current: ContextVar[_Scope | None] = ContextVar("codewell_authz_scope", default=None)


@contextmanager
def scope(runtime: Runtime | None) -> Iterator[None]:
    """Cache decisions until the block ends (one HTTP request, one MCP call); `runtime` gives access to role
    permissions. Nested scopes start empty and end with their block. The cache epochs that validate cached
    access answers (tokens, readable repositories, roles) are read once per outermost scope, on first need."""
    token = _current.set(_Scope(runtime))
    try:
        with per_request():
            yield
    finally:
        _current.reset(token)


def _is_self(actor: Actor, resource: Resource | None) -> bool:
    return isinstance(resource, UserRef) and actor.is_user and actor.user_id == resource.user_id


def _own_client(resource: Resource | None) -> bool:
    return (
        isinstance(resource, IssuedTo)
        and bool(resource.caller_client)
        and resource.token_client == (resource.caller_client)
    )


def _holds(actor: Actor, permission: str, current: _Scope | None) -> bool:
    if not actor.is_user or actor.user_id is None or current is None or current.runtime is None:
        return False
    return permission in current.runtime.get(RoleCache).permissions_of(actor.user_id)


def _rule_allows(actor: Actor, action: Action, resource: Resource | None, current: _Scope | None) -> bool:
    rule = RULES[action]
    if actor.is_internal:
        return True
    if rule.who is Who.CLIENT_OR_ADMIN and _own_client(resource):
        return True  # the client authenticated itself; the user behind the request (often none) does not decide
    if rule.who is Who.INTERNAL or actor.is_anonymous:
        return False
    if rule.who is Who.SIGNED_IN or actor.site_admin:
        return True
    if rule.who is Who.SELF_OR_ADMIN:
        return _is_self(actor, resource)
    if rule.who is Who.ROLE:
        return _holds(actor, rule.permission, current)
    return False  # Who.SITE_ADMIN or Who.CLIENT_OR_ADMIN, and the actor is not a site admin


def _decide(actor: Actor, action: Action, resource: Resource | None) -> bool:
    current = _current.get()
    key = (actor, action, resource)
    if current is not None:
        cached = current.decisions.get(key)
        if cached is not None:
            if log.isEnabledFor(logging.DEBUG):  # _who() formats; most processes do not log at debug
                log.debug("authz %s %s %s: %s (cached)", _who(actor), action, resource or "", cached)
            return cached
    decision = credential_allows(actor, action) and _rule_allows(actor, action, resource, current)
    if current is not None:
        current.decisions[key] = decision
    if log.isEnabledFor(logging.DEBUG):
        log.debug("authz %s %s %s: %s", _who(actor), action, resource or "", decision)
    return decision


def _who(actor: Actor) -> str:
    if actor.is_user:
        return f"user {actor.user_id} via {actor.via or '?'}"
    return str(actor.kind)


def allowed(actor: Actor, action: Action, resource: Resource | None = None) -> bool:
    """Whether `actor` may do `action` (on `resource`, for actions that depend on the object)."""
    return _decide(actor, action, resource)


def ensure(actor: Actor, action: Action, resource: Resource | None = None) -> None:
    """Return when `allowed`; else raise SignInRequired (401) for anonymous callers and PermissionDenied
    (403) for everyone else, with the action's message, or the credential's when the credential is why."""
    if _decide(actor, action, resource):
        return
    rule = RULES[action]
    if actor.is_anonymous:
        raise SignInRequired(rule.message, hint=rule.hint or SIGN_IN_HINT)
    if not credential_allows(actor, action):
        refusal = CREDENTIAL_REFUSALS.get(credential_of(actor), Refusal(rule.message, rule.hint))
        raise PermissionDenied(refusal.message, hint=refusal.hint)
    raise PermissionDenied(rule.message, hint=rule.hint)
