"""The webhook dialects of each host (codehosts/webhooks.py): proofs, events and repository keys, no I/O."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from codewell.codehosts.webhooks import HOSTS, Delivery, Event, RepoKeys, payload, sign, signature_ok
from codewell.core.errors import InvalidInput

BODY = b'{"ref": "refs/heads/main"}'


def delivery(
    headers: dict[str, str] | None = None, query: dict[str, str] | None = None, body: bytes = BODY
) -> Delivery:
    return Delivery({k.lower(): v for k, v in (headers or {}).items()}, query or {}, body)


def test_signatures_are_hmac_sha256_of_the_raw_body() -> None:
    expected = hmac.new(b"key", BODY, hashlib.sha256).hexdigest()
    assert sign("key", BODY) == f"sha256={expected}"
    assert signature_ok("key", BODY, f"sha256={expected}")
    assert signature_ok("key", BODY, f"SHA256={expected.upper()}")  # hex digits in either case
    assert not signature_ok("key", BODY + b" ", f"sha256={expected}")  # any byte of the body changes it
    assert not signature_ok("other", BODY, f"sha256={expected}")
    sha1 = hmac.new(b"key", BODY, hashlib.sha1).hexdigest()
    assert not signature_ok("key", BODY, f"sha1={sha1}")  # GitHub's legacy header is not enough
    for junk in ("", "sha256=", "sha256", expected, "sha256=é", "sha256=" + expected[:-1]):
        assert not signature_ok("key", BODY, junk)


def test_each_host_accepts_only_its_own_proof() -> None:
    signed = sign("key", BODY)
    assert HOSTS["github"].verify(delivery({"X-Hub-Signature-256": signed}), "key")
    assert not HOSTS["github"].verify(delivery({"X-Hub-Signature": signed}), "key")
    assert HOSTS["bitbucket-server"].verify(delivery({"X-Hub-Signature": signed}), "key")
    assert not HOSTS["bitbucket-server"].verify(delivery(query={"secret": "key"}), "key")
    assert HOSTS["gitlab"].verify(delivery({"X-Gitlab-Token": "key"}), "key")
    assert not HOSTS["gitlab"].verify(delivery({"X-Gitlab-Token": "key2"}), "key")
    assert not HOSTS["gitlab"].verify(delivery({"X-Gitlab-Token": "ké"}), "key")  # non-ASCII: refused, no crash
    cloud = HOSTS["bitbucket-cloud"]
    assert cloud.verify(delivery({"X-Hub-Signature": signed}), "key")
    assert cloud.verify(delivery(query={"secret": "key"}), "key")
    assert not cloud.verify(delivery({"X-Hub-Signature": sign("x", BODY)}, {"secret": "key"}), "key")
    assert HOSTS["gerrit"].verify(delivery(query={"secret": "key"}), "key")
    assert not HOSTS["gerrit"].verify(delivery({"X-Gitlab-Token": "key"}), "key")


@pytest.mark.parametrize(
    ("host", "headers", "data", "event"),
    [
        ("github", {"X-GitHub-Event": "push"}, {}, Event.PUSH),
        ("github", {"X-GitHub-Event": "ping"}, {}, Event.PING),
        ("github", {"X-GitHub-Event": "pull_request"}, {}, Event.OTHER),
        ("gitlab", {"X-Gitlab-Event": "Tag Push Hook"}, {}, Event.PUSH),
        ("gitlab", {"X-Gitlab-Event": "System Hook"}, {"event_name": "push"}, Event.PUSH),
        ("gitlab", {"X-Gitlab-Event": "System Hook"}, {"event_name": "user_create"}, Event.OTHER),
        ("gitlab", {"X-Gitlab-Event": "Merge Request Hook"}, {}, Event.OTHER),
        ("bitbucket-server", {"X-Event-Key": "repo:refs_changed"}, {}, Event.PUSH),
        ("bitbucket-server", {"X-Event-Key": "diagnostics:ping"}, {}, Event.PING),
        ("bitbucket-cloud", {"X-Event-Key": "repo:push"}, {}, Event.PUSH),
        ("bitbucket-cloud", {"X-Event-Key": "pullrequest:created"}, {}, Event.OTHER),
        ("gerrit", {}, {"type": "ref-updated"}, Event.PUSH),
        ("gerrit", {}, {"type": "patchset-created"}, Event.OTHER),
    ],
)
def test_events(host: str, headers: dict[str, str], data: dict[str, str], event: Event) -> None:
    assert HOSTS[host].event(delivery(headers), data) is event


def test_repository_keys_of_each_payload() -> None:
    assert HOSTS["github"].repo({"repository": {"id": 7, "full_name": "o/r"}}) == RepoKeys("7", "o/r")
    assert HOSTS["gitlab"].repo({"project_id": 9, "project": {"path_with_namespace": "g/s/p"}}) == RepoKeys(
        "9", "g/s/p"
    )
    server = {"repository": {"id": 3, "slug": "app", "project": {"key": "KEY"}}}
    assert HOSTS["bitbucket-server"].repo(server) == RepoKeys("3", "KEY/app")
    cloud = {"repository": {"uuid": "{abc}", "full_name": "ws/app"}}
    assert HOSTS["bitbucket-cloud"].repo(cloud) == RepoKeys("{abc}", "ws/app")
    assert HOSTS["gerrit"].repo({"refUpdate": {"project": "a/b"}}) == RepoKeys("a%2Fb", "a/b")
    assert HOSTS["gerrit"].repo({"project": {"name": "c"}}) == RepoKeys("c", "c")
    # Shapes that name nothing: no keys (and no crash) whatever the types.
    for junk in ({}, {"repository": "x"}, {"repository": {"id": True, "full_name": ["a"]}}, {"project": 5}):
        assert HOSTS["github"].repo(junk) == RepoKeys(None, None)
    assert HOSTS["gerrit"].repo({"refUpdate": {"project": ""}}) == RepoKeys(None, None)


def test_payloads_are_json_objects() -> None:
    assert payload(delivery(body=BODY)) == {"ref": "refs/heads/main"}
    form = delivery({"Content-Type": "application/x-www-form-urlencoded"}, body=b"payload=%7B%22a%22%3A1%7D")
    assert payload(form) == {"a": 1}
    for bad in (b"", b"[]", b"nope", b"\xff", json.dumps("text").encode()):
        with pytest.raises(InvalidInput):
            payload(delivery(body=bad))
