"""The analytics reports over HTTP: CSV shape per granularity, date rules, access rules, error envelopes."""

from __future__ import annotations

import csv
import io

import pytest
from sqlalchemy import func, select
from starlette.testclient import TestClient

from codewell.accounts.service import AccountService
from codewell.analytics.events import UsageEvent, UsageRecorder, record_usage
from codewell.analytics.models import UsageEventRow
from codewell.app import create_app
from codewell.core.actors import INTERNAL
from codewell.runtime import Runtime
from tests.factories import make_token, make_user
from tests.functional.analytics.conftest import INSTANCE, Instance, analytics_token, at, record

pytestmark = pytest.mark.database

REPORT = "/analytics/api/reports/by-user-client-date"
REGISTRY = "/analytics/api/reports/user-registry"
COUNTERS = [
    "Events",
    "Searches",
    "Code Navigation Events",
    "Deep Search Questions",
    "Code Finder Calls",
    "MCP Tool Calls",
    "Errors",
]


def rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


@pytest.fixture
def usage(instance: Instance) -> Instance:
    admin, user = instance.admin.id, instance.user.id
    record(
        instance.runtime,
        [
            UsageEvent(
                user, "claude-code/2.1.3", "mcp", tool="keyword_search", language="Go", created_at=at("2026-03-01")
            ),
            UsageEvent(
                user, "Claude-Code/2.2", "mcp", tool="go_to_definition", language="Go", created_at=at("2026-03-01", 20)
            ),
            UsageEvent(user, "web", "search", language="Go", error="timeout", created_at=at("2026-03-01")),
            UsageEvent(user, "web", "deepsearch", created_at=at("2026-03-02")),
            UsageEvent(user, "cursor", "mcp", tool="code_finder", language="=cmd|x", created_at=at("2026-04-10")),
            UsageEvent(admin, "web", "codenav", language="Python", created_at=at("2026-02-28", 23)),
            UsageEvent(None, "web", "search", created_at=at("2026-03-01")),  # anonymous: not attributed
        ],
    )
    return instance


def get(client: TestClient, instance: Instance, path: str = REPORT, token: str | None = None, **params: str):  # type: ignore[no-untyped-def]
    query = {"instanceURL": INSTANCE, **params}
    return client.get(path, params=query, headers=instance.bearer(token))


def test_finest_report_has_the_documented_columns_and_counts(client: TestClient, usage: Instance) -> None:
    response = get(client, usage)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/csv; charset=utf-8"
    assert response.text.endswith("\r\n")
    table = rows(response.text)
    assert table[0] == [
        "Instance user ID",
        "User Email",
        "Username",
        "Active User",
        "Client Name",
        "Timestamp Date",
        "Language",
        *COUNTERS,
    ]
    admin, bob = str(usage.admin.id), str(usage.user.id)
    assert table[1:] == [
        [admin, "ada@example.com", "ada", "true", "web", "2026-02-28", "Python", "1", "0", "1", "0", "0", "0", "0"],
        # Versions are dropped and names lower-cased: both claude-code calls share one row.
        [
            bob,
            "'=hyperlink(1)@evil.example",
            "bob",
            "true",
            "claude-code",
            "2026-03-01",
            "Go",
            "2",
            "1",
            "1",
            "0",
            "0",
            "2",
            "0",
        ],
        [
            bob,
            "'=hyperlink(1)@evil.example",
            "bob",
            "true",
            "web",
            "2026-03-01",
            "Go",
            "1",
            "1",
            "0",
            "0",
            "0",
            "0",
            "1",
        ],
        [bob, "'=hyperlink(1)@evil.example", "bob", "true", "web", "2026-03-02", "", "1", "0", "0", "1", "0", "0", "0"],
        [
            bob,
            "'=hyperlink(1)@evil.example",
            "bob",
            "true",
            "cursor",
            "2026-04-10",
            "cmdx",
            "1",
            "0",
            "0",
            "0",
            "1",
            "1",
            "0",
        ],
    ]


def test_coarser_grains_drop_the_columns_they_aggregate(client: TestClient, usage: Instance) -> None:
    bob = str(usage.user.id)
    by_day = rows(get(client, usage, granularity="by_user_day").text)
    assert by_day[0][4:6] == ["Timestamp Date", "Events"]
    assert [r[0:1] + r[4:6] for r in by_day[1:] if r[0] == bob] == [
        [bob, "2026-03-01", "3"],
        [bob, "2026-03-02", "1"],
        [bob, "2026-04-10", "1"],
    ]
    by_month = rows(get(client, usage, granularity="by_user_month").text)
    assert by_month[0][4] == "Timestamp Month"
    assert [r[4:6] for r in by_month[1:] if r[0] == bob] == [["2026-03", "4"], ["2026-04", "1"]]
    by_user = rows(get(client, usage, granularity="by_user").text)
    assert by_user[0] == ["Instance user ID", "User Email", "Username", "Active User", *COUNTERS]
    assert by_user[2] == [bob, "'=hyperlink(1)@evil.example", "bob", "true", "5", "2", "1", "1", "1", "3", "1"]


def test_date_bounds_are_inclusive_and_independent(client: TestClient, usage: Instance) -> None:
    bob = str(usage.user.id)

    def days(**params: str) -> list[str]:
        return [r[4] for r in rows(get(client, usage, granularity="by_user_day", **params).text)[1:] if r[0] == bob]

    assert days(startDate="2026-03-02") == ["2026-03-02", "2026-04-10"]
    assert days(endDate="2026-03-02") == ["2026-03-01", "2026-03-02"]
    assert days(startDate="2026-03-02", endDate="2026-03-02") == ["2026-03-02"]
    assert days(startDate="", endDate="") == ["2026-03-01", "2026-03-02", "2026-04-10"]


def test_nothing_in_range_gives_the_header_only(client: TestClient, usage: Instance) -> None:
    response = get(client, usage, startDate="2030-01-01")
    assert response.status_code == 200
    assert rows(response.text) == [rows(get(client, usage).text)[0]]


def test_deleted_users_keep_their_usage_and_read_as_inactive(client: TestClient, usage: Instance) -> None:
    usage.runtime.get(AccountService).delete_user(INTERNAL, usage.user.id)
    table = rows(get(client, usage, granularity="by_user").text)
    assert table[2][:4] == [str(usage.user.id), "", "", "false"]


def test_user_registry_is_the_current_snapshot(client: TestClient, instance: Instance) -> None:
    robot = make_user(instance.runtime, "robot", service_account=True)
    response = get(client, instance, REGISTRY)
    assert response.status_code == 200
    assert response.text.split("\r\n")[0] == "Instance user ID,Service Account,Site Admin"
    assert rows(response.text)[1:] == [
        [str(instance.admin.id), "false", "true"],
        [str(instance.user.id), "false", "false"],
        [str(robot.id), "true", "false"],
    ]


@pytest.mark.parametrize(
    "instance_url",
    [INSTANCE, "Code.Example.COM", "https://code.example.com", "http://code.example.com/", "code.example.com:443"],
)
def test_instance_url_forms_naming_this_instance_are_accepted(
    client: TestClient, instance: Instance, instance_url: str
) -> None:
    response = client.get(REGISTRY, params={"instanceURL": instance_url}, headers=instance.bearer())
    assert response.status_code == 200


@pytest.mark.parametrize("instance_url", ["other.example.com", "code.example.com.evil.net", "code.example.com:8443"])
@pytest.mark.parametrize("path", [REPORT, REGISTRY, "/analytics/api/credits"])
def test_another_instance_is_forbidden(client: TestClient, instance: Instance, instance_url: str, path: str) -> None:
    response = client.get(path, params={"instanceURL": instance_url}, headers=instance.bearer())
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({}, "instanceURL"),
        ({"instanceURL": ""}, "instanceURL"),
        ({"instanceURL": INSTANCE, "granularity": "by_week"}, "granularity"),
        ({"instanceURL": INSTANCE, "startDate": "2026-13-01"}, "startDate"),
        ({"instanceURL": INSTANCE, "endDate": "yesterday"}, "endDate"),
        ({"instanceURL": INSTANCE, "startDate": "2026-3-1"}, "startDate"),
        ({"instanceURL": INSTANCE, "startDate": "2026-05-02", "endDate": "2026-05-01"}, "startDate"),
    ],
)
def test_bad_parameters_are_400_naming_the_parameter(
    client: TestClient, instance: Instance, params: dict[str, str], named: str
) -> None:
    response = client.get(REPORT, params=params, headers=instance.bearer())
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_input"
    assert named in error["message"]


@pytest.mark.parametrize("instance_url", ["[127.0.0.1]:7080", "[nonsense]", "code.example.com:99999", "a:b:c"])
@pytest.mark.parametrize("path", [REPORT, REGISTRY, "/analytics/api/credits"])
def test_malformed_instance_urls_are_400_not_500(
    client: TestClient, instance: Instance, instance_url: str, path: str
) -> None:
    response = client.get(path, params={"instanceURL": instance_url}, headers=instance.bearer())
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_input"
    assert "instanceURL is not a host name or URL" in error["message"]


@pytest.mark.parametrize("params", [{}, {"instanceURL": "[127.0.0.1]:7080"}, {"instanceURL": "other.example.com"}])
def test_the_permission_check_comes_before_the_instance_check(
    client: TestClient, instance: Instance, params: dict[str, str]
) -> None:
    # A user who may not read the reports learns nothing from instanceURL answers (the missing-instanceURL
    # hint names this instance's host).
    response = client.get(REGISTRY, params=params, headers=instance.bearer(instance.user_token))
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"
    assert "site admin" in response.json()["error"]["message"]
    assert "code.example.com" not in response.text


def test_missing_and_unknown_tokens_are_401_with_the_json_envelope(client: TestClient, instance: Instance) -> None:
    missing = client.get(REPORT, params={"instanceURL": INSTANCE})
    assert missing.status_code == 401
    assert missing.json()["error"]["code"] == "unauthenticated"
    unknown = client.get(REPORT, params={"instanceURL": INSTANCE}, headers={"Authorization": "Bearer cwa_" + "0" * 40})
    assert unknown.status_code == 401
    assert unknown.json()["error"]["code"] == "unauthenticated"


def test_a_users_token_cannot_read_instance_wide_reports(client: TestClient, instance: Instance) -> None:
    for path in (REPORT, REGISTRY, "/analytics/api/credits"):
        response = get(client, instance, path, token=instance.user_token)
        assert response.status_code == 403, path


def test_a_creator_who_loses_site_admin_loses_access_at_once(client: TestClient, instance: Instance) -> None:
    second = make_user(instance.runtime, "cleo", site_admin=True)
    token = analytics_token(instance.runtime, second)
    assert get(client, instance, REGISTRY, token=token).status_code == 200
    instance.runtime.get(AccountService).set_site_admin(INTERNAL, second.id, False)
    assert get(client, instance, REGISTRY, token=token).status_code == 403
    instance.runtime.get(AccountService).delete_user(INTERNAL, second.id)
    assert get(client, instance, REGISTRY, token=token).status_code == 401


def test_analytics_tokens_reach_nothing_but_the_analytics_api(client: TestClient, instance: Instance) -> None:
    response = client.get("/.api/users", headers=instance.bearer())
    assert response.status_code == 403
    assert "analytics" in response.json()["error"]["message"]


def test_instance_access_tokens_of_site_admins_work_too(client: TestClient, instance: Instance) -> None:
    token = make_token(instance.runtime, instance.admin)
    assert get(client, instance, REGISTRY, token=token).status_code == 200


def test_a_stopping_server_writes_buffered_events(runtime: Runtime) -> None:
    """The serve lifespan flushes the recorder when its background loops stop (no Runtime.close needed)."""
    recorder = runtime.get(UsageRecorder)
    with TestClient(create_app(runtime, background=True)):
        recorder._stop.set()  # keep the writer thread from flushing: only the shutdown flush may write
        record_usage(runtime, UsageEvent(3, "web", "search"))
    with runtime.db.session() as session:
        assert session.scalar(select(func.count()).select_from(UsageEventRow)) == 1
