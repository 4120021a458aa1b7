"""Test data builders every capability's tests use: users and access tokens, through the real services."""

from __future__ import annotations

from collections.abc import Iterable

from codewell.accounts.service import AccountService, User
from codewell.accounts.tokens import TokenService
from codewell.config import SiteConfig
from codewell.core.actors import INTERNAL, Actor
from codewell.runtime import Runtime


def make_user(
    runtime: Runtime,
    username: str,
    *,
    site_admin: bool = False,
    password: str | None = None,
    email: str | None = None,
    service_account: bool = False,
) -> User:
    """Create a user exactly as asked (the first user is not promoted); `email` is stored verified."""
    return runtime.get(AccountService).create_user(
        INTERNAL,
        username,
        password=password,
        email=email,
        email_verified=email is not None,
        site_admin=site_admin,
        service_account=service_account,
    )


def make_token(runtime: Runtime, user: User, scopes: Iterable[str] = ("user:all",), note: str = "test") -> str:
    """A raw access token (`cwp_...`) for `user`, without expiry; send it as `Authorization: token <raw>`."""
    raw, _ = runtime.get(TokenService).create_token(INTERNAL, user.id, note, tuple(scopes), None)
    return raw


def actor_of_user(runtime: Runtime, user: User) -> Actor:
    """The Actor a session of `user` would act as (for calling services directly)."""
    return runtime.get(AccountService).actor_for(user, via="session")


def auth_headers(token: str) -> dict[str, str]:
    return {"Authorization": f"token {token}"}


def set_site_config(runtime: Runtime, changes: dict[str, object]) -> None:
    """Change site config options by their dotted names (`{"auth.public": True}`), as an admin editing the file."""
    merged = {**runtime.config.model_dump(by_alias=True), **changes}
    runtime.site_config.write(SiteConfig.model_validate(merged))
