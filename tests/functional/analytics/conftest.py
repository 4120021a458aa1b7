"""Fixtures for the analytics API: an instance with a known externalURL, an admin, a user and their tokens."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from codewell.accounts.service import User
from codewell.analytics.events import UsageEvent, UsageRecorder, record_usage
from codewell.analytics.tokens import AnalyticsTokenService
from codewell.core.actors import INTERNAL
from codewell.runtime import Runtime
from tests.factories import make_user, set_site_config

INSTANCE = "code.example.com"


@dataclass
class Instance:
    runtime: Runtime
    admin: User
    user: User
    admin_token: str
    user_token: str

    def bearer(self, token: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {token or self.admin_token}"}


def analytics_token(runtime: Runtime, user: User, name: str = "export", expires: datetime | None = None) -> str:
    raw, _ = runtime.get(AnalyticsTokenService).create_token(INTERNAL, name, expires, user_id=user.id)
    return raw


@pytest.fixture
def instance(runtime: Runtime) -> Instance:
    set_site_config(runtime, {"externalURL": f"https://{INSTANCE.upper()}"})
    admin = make_user(runtime, "ada", site_admin=True, email="ada@example.com")
    user = make_user(runtime, "bob", email="=HYPERLINK(1)@evil.example")
    return Instance(runtime, admin, user, analytics_token(runtime, admin), analytics_token(runtime, user))


def at(day: str, hour: int = 12) -> datetime:
    return datetime.fromisoformat(day).replace(hour=hour, tzinfo=UTC)


def record(runtime: Runtime, events: list[UsageEvent]) -> None:
    """Record through the real recorder and flush, as a running server would within a second."""
    for event in events:
        record_usage(runtime, event)
    runtime.get(UsageRecorder).flush()
