"""GitLab connections: groups and projects through API v4, Reporter vs Guest, internal projects, admins."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from codewell.core.actors import INTERNAL
from codewell.runtime import Runtime
from tests.factories import actor_of_user, make_user
from tests.fakes.codehosts import FakeCodeHost, HostUser
from tests.functional.codehosts.conftest import add_repo, connect, service, sign_in_at_host, visible

pytestmark = pytest.mark.database

GUEST, REPORTER = 10, 20


@pytest.fixture
def group(host: FakeCodeHost, tmp_path: Path) -> FakeCodeHost:
    host.add(HostUser(21, "rita", "Rita", emails=[("rita@example.com", True)]))
    host.add(HostUser(22, "gus", "Gus", emails=[("gus@example.com", True)]))
    host.add(HostUser(23, "root", "Root", emails=[("root@example.com", True)]))
    host.admins.add("root")  # a GitLab administrator: sees everything, member of nothing
    add_repo(host, tmp_path, 301, "grp/open", visibility="public")
    add_repo(host, None, 302, "grp/sub/closed", visibility="private", members={"rita": REPORTER, "gus": GUEST})
    add_repo(host, None, 303, "grp/inner", visibility="internal", members={"rita": REPORTER})
    add_repo(host, None, 304, "other/elsewhere", visibility="private", members={"rita": 50})
    host.gitlab_link_header = False  # X-Next-Page only
    return host


def test_reporter_sees_private_project_guest_and_admin_do_not(
    runtime: Runtime, client: TestClient, group: FakeCodeHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    connect(runtime, group, monkeypatch, kind="gitlab", groups=["grp"])
    rita = make_user(runtime, "rita", email="rita@example.com")
    gus = make_user(runtime, "gus", email="gus@example.com")
    root = make_user(runtime, "root", email="root@example.com")
    report = service(runtime).sync_connection(INTERNAL, "main")
    # Subgroups included; the project outside the group is not discovered.
    assert sorted(report.added) == [f"127.0.0.1/grp/{p}" for p in ("inner", "open", "sub/closed")]
    for login in ("rita", "gus", "root"):
        sign_in_at_host(client, runtime, login, group)
    assert visible(runtime, actor_of_user(runtime, rita)) == {"grp/open", "grp/sub/closed", "grp/inner"}
    assert visible(runtime, actor_of_user(runtime, gus)) == {"grp/open"}
    # min_access_level=20: the administrator gets only projects where they hold Reporter or above.
    assert visible(runtime, actor_of_user(runtime, root)) == {"grp/open"}
    assert any("min_access_level=20" in r for r in group.api_requests)

    # Demoted to Guest upstream: gone after the next sync.
    group.repos["grp/sub/closed"].members["rita"] = GUEST
    service(runtime).sync_connection(INTERNAL, "main")
    assert visible(runtime, actor_of_user(runtime, rita)) == {"grp/open", "grp/inner"}


@pytest.mark.parametrize("switch", [True, False])
def test_internal_projects_follow_sync_internal_repo_permissions(
    runtime: Runtime, client: TestClient, group: FakeCodeHost, monkeypatch: pytest.MonkeyPatch, switch: bool
) -> None:
    connect(runtime, group, monkeypatch, kind="gitlab", groups=["grp"], syncInternalRepoPermissions=switch)
    rita = make_user(runtime, "rita", email="rita@example.com")
    service(runtime).sync_connection(INTERNAL, "main")
    sign_in_at_host(client, runtime, "rita", group)
    assert ("grp/inner" in visible(runtime, actor_of_user(runtime, rita))) is switch
    # Internal projects are never public here, whatever the switch.
    assert "grp/inner" not in visible(runtime, actor_of_user(runtime, make_user(runtime, "nobody")))


def test_rate_limited_gitlab_waits_for_retry_after(
    runtime: Runtime, group: FakeCodeHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    connect(runtime, group, monkeypatch, kind="gitlab", groups=["grp"])
    group.rate_limited, group.rate_limit_reset_seconds = 1, 1
    report = service(runtime).sync_connection(INTERNAL, "main", permissions=False)
    assert report.error is None
    assert report.found == 3
