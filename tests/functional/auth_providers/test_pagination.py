"""Organization, team and group lists are read across every page the code host returns (issue #8)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from starlette.testclient import TestClient

from codewell.auth.providers import oauth
from codewell.runtime import Runtime
from tests.fakes.codehosts import FakeCodeHost, HostUser
from tests.functional.auth_providers.conftest import configure, sign_in
from tests.functional.auth_providers.test_codehosts import github, gitlab


def _pages(host: FakeCodeHost, path: str) -> list[int]:
    """The `page` parameter of each REST call to `path` (1 when absent)."""
    calls = [urlsplit(c) for c in host.api_requests if urlsplit(c).path == path]
    return [int(parse_qs(c.query).get("page", ["1"])[0]) for c in calls]


def test_github_org_number_150_passes_allow_orgs(runtime: Runtime, client: TestClient, host: FakeCodeHost) -> None:
    orgs = [(1000 + i, f"org{i:03d}") for i in range(1, 151)]  # the allowed one is #150, on page 2
    host.add(HostUser(50, "many", emails=[("many@x.example", True)], orgs=orgs))
    host.add(HostUser(51, "almost", emails=[("al@x.example", True)], orgs=orgs[:149]))
    host.signed_in = "many"
    (provider,) = configure(runtime, github(host, allowSignup=True, allowOrgs=["ORG150"]))
    assert sign_in(client, provider).status_code == 303
    assert _pages(host, "/api/v3/user/orgs") == [1, 2]
    host.signed_in = "almost"
    client.cookies.clear()
    assert sign_in(client, provider).status_code == 403  # read to the end, not found


def test_github_team_number_150_passes_allow_orgs_map(runtime: Runtime, client: TestClient, host: FakeCodeHost) -> None:
    teams = [("acme", f"Team {i}") for i in range(1, 151)]
    host.add(HostUser(52, "teams", emails=[("tm@x.example", True)], orgs=[(7, "other")], teams=teams))
    host.signed_in = "teams"
    (provider,) = configure(runtime, github(host, allowSignup=True, allowOrgsMap={"acme": ["Team 150"]}))
    assert sign_in(client, provider).status_code == 303
    assert _pages(host, "/api/v3/user/teams") == [1, 2]


def test_github_sso_header_is_collected_from_every_page(
    runtime: Runtime, client: TestClient, host: FakeCodeHost
) -> None:
    orgs = [(2000 + i, f"o{i}") for i in range(1, 151)]
    host.add(HostUser(53, "sso", emails=[("s@x.example", True)], orgs=orgs, sso_unauthorized=[2150]))
    host.signed_in = "sso"
    (provider,) = configure(runtime, github(host, allowSignup=True, requiredSsoOrgs=["2150"], allowOrgs=["o1"]))
    response = sign_in(client, provider)
    assert response.status_code == 403
    assert "organization(s) 2150" in response.text


@pytest.mark.parametrize("link_header", [True, False], ids=["link", "x-next-page"])
def test_gitlab_group_number_150_passes_allow_groups(
    runtime: Runtime, client: TestClient, host: FakeCodeHost, link_header: bool
) -> None:
    host.gitlab_link_header = link_header
    groups = {f"eng/team-{i:03d}": 30 for i in range(1, 150)}
    groups["eng/backend"] = 10  # group #150, Guest: on page 2
    host.add(HostUser(60, "deep", emails=[("d@x.example", True)], groups=groups))
    host.signed_in = "deep"
    (provider,) = configure(runtime, gitlab(host, allowGroups=["eng/backend"]))
    assert sign_in(client, provider).status_code == 303
    assert _pages(host, "/api/v4/groups") == [1, 2]
    # The min_access_level filter travels with every page.
    calls = [c for c in host.api_requests if c.startswith("/api/v4/groups")]
    assert all("min_access_level=10" in c and "per_page=100" in c for c in calls)


def test_gitlab_minimal_access_on_a_later_page_is_still_refused(
    runtime: Runtime, client: TestClient, host: FakeCodeHost
) -> None:
    groups = {f"g/{i:03d}": 10 for i in range(1, 150)}
    groups["eng/backend"] = 5
    host.add(HostUser(61, "minimal", emails=[("m@x.example", True)], groups=groups))
    host.signed_in = "minimal"
    (provider,) = configure(runtime, gitlab(host, allowGroups=["eng/backend"]))
    assert sign_in(client, provider).status_code == 403
    assert _pages(host, "/api/v4/groups") == [1, 2]


def test_pages_are_bounded(
    runtime: Runtime, client: TestClient, host: FakeCodeHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(oauth, "MAX_PAGES", 2)
    groups = {f"g/{i:03d}": 10 for i in range(1, 301)}
    groups["eng/backend"] = 10  # #301, on page 4 at per_page=100
    host.add(HostUser(62, "huge", emails=[("h@x.example", True)], groups=groups))
    host.signed_in = "huge"
    (provider,) = configure(runtime, gitlab(host, allowGroups=["eng/backend"]))
    assert sign_in(client, provider).status_code == 403
    assert _pages(host, "/api/v4/groups") == [1, 2]
