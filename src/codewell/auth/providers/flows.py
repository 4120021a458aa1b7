"""Pending sign-in flows: the `state` (and nonce, PKCE verifier) of each redirect to a provider.

A flow is single-use (the callback deletes it before anything else), short-lived and bound to the browser
that started it (a random cookie whose hash is stored with the flow), so a stolen or replayed callback URL,
or one started in another browser, is refused.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Self

from sqlalchemy import delete

from codewell.auth.models import AuthFlowRow
from codewell.core.errors import PermissionDenied
from codewell.db.base import utcnow

if TYPE_CHECKING:
    from codewell.runtime import Runtime

FLOW_COOKIE = "cw_auth_flow"
FLOW_LIFETIME = timedelta(minutes=10)
MAX_RETURN_TO = 2000  # the column size


@dataclass(frozen=True, slots=True)
class Flow:
    state: str
    provider_id: str
    nonce: str
    code_verifier: str
    return_to: str
    # The signed-in user connecting an identity (account settings), None for a sign-in.
    link_user_id: int | None = None


class FlowRefused(PermissionDenied):
    """A callback whose flow is unknown, used, expired or from another browser; `reason` is for the audit log."""

    def __init__(self, reason: str) -> None:
        super().__init__("This sign-in link is invalid, expired or was already used.", hint="start the sign-in again")
        self.reason = reason


def _sha(value: str) -> bytes:
    return hashlib.sha256(value.encode()).digest()


def new_browser_token() -> str:
    return secrets.token_urlsafe(32)


class AuthFlows:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    def begin(
        self,
        provider_id: str,
        return_to: str,
        browser_token: str,
        *,
        pkce: bool = True,
        link_user_id: int | None = None,
    ) -> Flow:
        """Record a new flow; returns its fresh state, nonce and (with `pkce`) code verifier. With `link_user_id`
        the flow connects the identity to that signed-in user instead of signing in."""
        if len(return_to) > MAX_RETURN_TO:
            return_to = "/"  # an absurdly long returnTo is not worth failing the sign-in for
        flow = Flow(
            state=secrets.token_urlsafe(32),
            provider_id=provider_id,
            nonce=secrets.token_urlsafe(32),
            code_verifier=secrets.token_urlsafe(64) if pkce else "",
            return_to=return_to,
            link_user_id=link_user_id,
        )
        now = utcnow()
        with self.runtime.db.session() as session:
            session.execute(delete(AuthFlowRow).where(AuthFlowRow.expires_at < now))  # keep the table small
            session.add(
                AuthFlowRow(
                    state_sha256=_sha(flow.state),
                    browser_sha256=_sha(browser_token),
                    provider_id=provider_id,
                    nonce=flow.nonce,
                    code_verifier=flow.code_verifier,
                    return_to=return_to,
                    link_user_id=link_user_id,
                    created_at=now,
                    expires_at=now + FLOW_LIFETIME,
                )
            )
        return flow

    def finish(self, state: str, browser_token: str) -> Flow:
        """Consume the flow of `state`; FlowRefused when it is missing, used, expired or from another browser."""
        if not state:
            raise FlowRefused("callback without state")
        with self.runtime.db.session() as session:
            row = session.get(AuthFlowRow, _sha(state))
            if row is None:
                raise FlowRefused("unknown or already used state")
            session.delete(row)  # single use, whatever happens next
            flow = Flow(state, row.provider_id, row.nonce, row.code_verifier, row.return_to, row.link_user_id)
            expired = row.expires_at <= utcnow()
            same_browser = bool(browser_token) and secrets.compare_digest(row.browser_sha256, _sha(browser_token))
        if expired:
            raise FlowRefused("state expired")
        if not same_browser:
            raise FlowRefused("state not bound to this browser session")
        return flow
