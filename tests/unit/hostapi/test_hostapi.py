"""The code-host API kit (codewell.hostapi) that sign-in's providers and code host connections share: each
kind's API address, paging in every host's style (and never to another origin), the page limit a sign-in reads,
Gerrit's `)]}'` prefix, plain-text answers, and the error kinds. Served by a real HTTP server on loopback."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest

from codewell.hostapi.hosts import APIS, BitbucketCloudAPI, GerritAPI, GitHubAPI, GitLabAPI
from codewell.hostapi.http import Forbidden, HostError, HostHTTP, Missing, Page, Unauthorized, next_url


class _Host(BaseHTTPRequestHandler):
    """Three pages of numbers in each host's paging style, a Gerrit account, a text servlet, errors."""

    seen: ClassVar[list[str]] = []

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        type(self).seen.append(self.path)
        page = int(query.get("page", "1"))
        headers: dict[str, str] = {}
        body: Any
        if parts.path == "/link":  # GitHub: Link rel="next"
            body = [page]
            if page < 3:
                headers["Link"] = f'<http://{self.headers["Host"]}/link?page={page + 1}>; rel="next"'
        elif parts.path == "/gitlab":  # GitLab: X-Next-Page
            body = [page]
            headers["X-Next-Page"] = str(page + 1) if page < 3 else ""
        elif parts.path == "/cloud":  # Bitbucket Cloud: `next` in the body
            body = {"values": [page]}
            if page < 3:
                body["next"] = f"http://{self.headers['Host']}/cloud?page={page + 1}"
        elif parts.path == "/server":  # Bitbucket Server: isLastPage / nextPageStart
            start = int(query.get("start", "0"))
            body = {"values": [start], "isLastPage": start >= 2, "nextPageStart": start + 1}
        elif parts.path == "/elsewhere":
            body = [1]
            headers["Link"] = '<http://evil.example/elsewhere?page=2>; rel="next"'
        elif parts.path == "/a/accounts/self":
            self._send(200, ")]}'\n" + json.dumps({"_account_id": 1000, "username": "g"}), {})
            return
        elif parts.path == "/whoami":
            self._send(200, "alice\n", {"Content-Type": "text/plain"})
            return
        elif parts.path in ("/401", "/403", "/404"):
            self._send(int(parts.path[1:]), json.dumps({"message": "no"}), {})
            return
        else:
            self._send(404, "", {})
            return
        self._send(200, json.dumps(body), headers)

    def _send(self, status: int, text: str, headers: dict[str, str]) -> None:
        data = text.encode()
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", **headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def host() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Host)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Host.seen = []
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_each_kind_has_one_api_address() -> None:
    assert GitHubAPI.base("https://github.com/") == "https://api.github.com/"
    assert GitHubAPI.base("https://ghe.example/") == "https://ghe.example/api/v3/"
    assert GitLabAPI.base("https://gitlab.example/") == "https://gitlab.example/api/v4/"
    assert BitbucketCloudAPI.base("https://bitbucket.org/") == "https://api.bitbucket.org/2.0/"
    assert BitbucketCloudAPI.base("https://bb.example/") == "https://bb.example/api/2.0/"
    assert APIS["bitbucketserver"].base("https://bbs.example/") == "https://bbs.example/rest/api/1.0/"
    assert GerritAPI.base("https://review.example/") == "https://review.example/a/"
    assert sorted(APIS) == ["bitbucketcloud", "bitbucketserver", "gerrit", "github", "gitlab"]
    assert (GitLabAPI.git_user, BitbucketCloudAPI.git_user, GitHubAPI.git_user) == (
        "oauth2",
        "x-token-auth",
        "x-access-token",
    )


@pytest.mark.parametrize("path", ["link", "gitlab", "cloud", "server"])
def test_every_paging_style_is_followed_to_the_last_page(host: str, path: str) -> None:
    http = HostHTTP(host, bearer="t")
    assert list(http.items(path)) == ([0, 1, 2] if path == "server" else [1, 2, 3])


def test_a_limit_leaves_the_rest_unread_and_without_one_too_many_pages_fail(
    host: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    http = HostHTTP(host, bearer="t")
    assert list(http.items("link", limit=2)) == [1, 2]  # a sign-in's bound: the rest is not read...
    assert [p for p in _Host.seen if p.startswith("/link")] == ["/link", "/link?page=2"]
    assert any("more than 2 pages; the rest is not read" in r.getMessage() for r in caplog.records)
    monkeypatch.setattr("codewell.hostapi.http.MAX_PAGES", 2)
    with pytest.raises(HostError, match="has more than 2 pages"):  # ...a sync's: an error, never a silent cut
        list(http.items("link"))
    assert list(http.items("link", limit=3)) == [1, 2, 3]  # exactly the limit: nothing left, nothing logged


def test_a_next_link_to_another_origin_is_never_followed(host: str) -> None:
    with pytest.raises(HostError, match="points at another host"):
        list(HostHTTP(host, bearer="t").items("elsewhere"))
    assert not [p for p in _Host.seen if "page=2" in p]
    page = Page("http://a/x", 200, {}, [], {"next": "http://a/x?page=2"})
    assert next_url(page, "http://a/x") == "http://a/x?page=2"


def test_gerrit_json_loses_its_prefix_and_text_answers_are_text(host: str) -> None:
    account = GerritAPI.connect(host, basic=("g", "secret")).get("accounts/self").body
    assert account == {"_account_id": 1000, "username": "g"}
    assert HostHTTP(host, bearer="t").text("whoami") == "alice\n"
    with pytest.raises(HostError, match="something other than JSON"):
        HostHTTP(host, bearer="t").get("a/accounts/self")  # the prefix is Gerrit's only


@pytest.mark.parametrize(("status", "kind"), [(401, Unauthorized), (403, Forbidden), (404, Missing)])
def test_errors_name_the_address_without_token_or_body(host: str, status: int, kind: type[HostError]) -> None:
    with pytest.raises(kind) as raised:
        HostHTTP(host, bearer="very-secret").get(f"{status}", {"q": "x"})
    assert raised.value.status == status
    assert f"{host}{status}" in raised.value.message
    assert "very-secret" not in raised.value.message
    assert "q=x" not in raised.value.message
    with pytest.raises(kind):
        HostHTTP(host, bearer="t").text(f"{status}")
