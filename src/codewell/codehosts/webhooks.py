"""Push webhooks from code hosts: how each host proves a delivery and names the repository (docs/codehosts.md).

Pure functions over the parts of one request (headers, query, raw body): no database, no network. The service
(`CodeHostService.receive_webhook`) checks a delivery against the secret of every connection of the host's kind,
then asks for a sync of the repository the payload names.

Addresses under `/.api/webhooks/`, the proof each host sends, and the events that request a sync:
- `github`: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>`; `X-GitHub-Event: push` (`ping` answered).
- `gitlab`: `X-Gitlab-Token: <secret>`; `Push Hook`, `Tag Push Hook`, and a system hook's push events.
- `bitbucket-server` (and Data Center): `X-Hub-Signature: sha256=<hex HMAC>`; `X-Event-Key: repo:refs_changed`
  (`diagnostics:ping` answered).
- `bitbucket-cloud`: `X-Hub-Signature: sha256=<hex HMAC>` when the webhook has a secret, else `?secret=` in the
  URL; `X-Event-Key: repo:push`.
- `gerrit` (the webhooks plugin, which sends no custom headers): `?secret=` in the URL; body `type: ref-updated`.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import parse_qs, quote

from codewell.core.errors import InvalidInput, Unauthenticated
from codewell.http.bodies import parse_json

WEBHOOKS_PREFIX = "/.api/webhooks"
# Push payloads name the repository near the top; GitHub's largest (2,048 commits) stay well under this. A bigger
# body is refused before it is read whole (anyone may post here), and the periodic sync still picks the push up.
MAX_BODY_BYTES = 5 * 1024 * 1024


class Event(StrEnum):
    PUSH = "push"
    PING = "ping"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class Delivery:
    """One webhook request as received: lower-cased header names, the query parameters, the raw body."""

    headers: Mapping[str, str]
    query: Mapping[str, str]
    body: bytes


@dataclass(frozen=True, slots=True)
class RepoKeys:
    """How a payload names its repository: the host's ID (as discovery stores it) and its path there."""

    external_id: str | None
    path: str | None


@dataclass(frozen=True, slots=True)
class HostHooks:
    """The webhook dialect of one connection kind."""

    kind: str  # CodeHostConnection.kind
    verify: Callable[[Delivery, str], bool]
    event: Callable[[Delivery, dict[str, Any]], Event]
    repo: Callable[[dict[str, Any]], RepoKeys]


class PayloadTooLarge(InvalidInput):
    code = "payload_too_large"
    http_status = 413


def too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"the webhook body is over the {limit // (1024 * 1024)} MB limit",
        hint="only push events are needed: subscribe the webhook to pushes only",
    )


def unverified() -> Unauthenticated:
    # One message for every refusal: it says nothing of which connections or repositories exist.
    return Unauthenticated(
        "the webhook's signature or secret is missing or wrong",
        hint="set the same secret at the code host and in the connection's webhookSecretEnv or webhookSecretFile "
        "(docs/codehosts.md, Webhooks)",
    )


def payload(delivery: Delivery) -> dict[str, Any]:
    """The delivery's JSON object (GitHub's form-encoded `payload=` too); InvalidInput (400) otherwise."""
    body = delivery.body
    if delivery.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        values = parse_qs(body.decode("utf-8", "replace")).get("payload", [""])
        body = values[0].encode()
    # The body policy's parser (depth limit, no NaN): a verified host's body is still read like anyone's.
    data = parse_json(body, what="the webhook body")
    if not isinstance(data, dict):
        raise InvalidInput("the webhook body must be a JSON object", hint="send the host's JSON payload")
    return data


# -- proofs -------------------------------------------------------------------------------------------------
def _same(expected: str, given: str) -> bool:
    # Bytes: compare_digest refuses non-ASCII str, and a header is whatever the caller sent.
    return hmac.compare_digest(expected.encode(), given.encode())


def signature_ok(secret: str, body: bytes, header: str) -> bool:
    """Whether `header` is `sha256=<hex HMAC-SHA256 of body keyed by secret>` (constant-time)."""
    scheme, _, given = header.strip().partition("=")
    if scheme.lower() != "sha256" or not given:
        return False
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return _same(expected, given.lower())


def sign(secret: str, body: bytes) -> str:
    """The `sha256=<hex>` header value a host sends for `body` (tests, docs)."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _github_verify(delivery: Delivery, secret: str) -> bool:
    return signature_ok(secret, delivery.body, delivery.headers.get("x-hub-signature-256", ""))


def _gitlab_verify(delivery: Delivery, secret: str) -> bool:
    given = delivery.headers.get("x-gitlab-token")
    return given is not None and _same(secret, given)


def _bitbucket_server_verify(delivery: Delivery, secret: str) -> bool:
    return signature_ok(secret, delivery.body, delivery.headers.get("x-hub-signature", ""))


def _query_secret_ok(delivery: Delivery, secret: str) -> bool:
    given = delivery.query.get("secret")
    return given is not None and _same(secret, given)


def _bitbucket_cloud_verify(delivery: Delivery, secret: str) -> bool:
    # Bitbucket Cloud signs deliveries of webhooks that have a secret (since 2023); older webhooks cannot, and
    # carry the secret in their URL. A signature, when present, must verify: the URL secret is not a fallback.
    header = delivery.headers.get("x-hub-signature")
    if header is not None:
        return signature_ok(secret, delivery.body, header)
    return _query_secret_ok(delivery, secret)


# -- events -------------------------------------------------------------------------------------------------
def _github_event(delivery: Delivery, data: dict[str, Any]) -> Event:
    name = delivery.headers.get("x-github-event", "")
    return Event.PUSH if name == "push" else Event.PING if name == "ping" else Event.OTHER


def _gitlab_event(delivery: Delivery, data: dict[str, Any]) -> Event:
    name = delivery.headers.get("x-gitlab-event", "")
    if name in ("Push Hook", "Tag Push Hook"):
        return Event.PUSH
    if name == "System Hook" and data.get("event_name") in ("push", "tag_push"):
        return Event.PUSH  # an instance-wide system hook covers every project in one place
    return Event.OTHER


def _bitbucket_server_event(delivery: Delivery, data: dict[str, Any]) -> Event:
    name = delivery.headers.get("x-event-key", "")
    if name == "repo:refs_changed":
        return Event.PUSH
    return Event.PING if name == "diagnostics:ping" else Event.OTHER  # the "Test connection" button


def _bitbucket_cloud_event(delivery: Delivery, data: dict[str, Any]) -> Event:
    return Event.PUSH if delivery.headers.get("x-event-key", "") == "repo:push" else Event.OTHER


def _gerrit_event(delivery: Delivery, data: dict[str, Any]) -> Event:
    return Event.PUSH if data.get("type") == "ref-updated" else Event.OTHER


# -- repositories -------------------------------------------------------------------------------------------
def _text(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | str) and str(value):
        return str(value)
    return None


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _github_repo(data: dict[str, Any]) -> RepoKeys:
    repository = _object(data.get("repository"))
    return RepoKeys(_text(repository.get("id")), _text(repository.get("full_name")))


def _gitlab_repo(data: dict[str, Any]) -> RepoKeys:
    project = _object(data.get("project"))
    return RepoKeys(
        _text(data.get("project_id")) or _text(project.get("id")),
        _text(project.get("path_with_namespace")) or _text(data.get("path_with_namespace")),
    )


def _bitbucket_server_repo(data: dict[str, Any]) -> RepoKeys:
    repository = _object(data.get("repository"))
    key, slug = _text(_object(repository.get("project")).get("key")), _text(repository.get("slug"))
    return RepoKeys(_text(repository.get("id")), f"{key}/{slug}" if key and slug else None)


def _bitbucket_cloud_repo(data: dict[str, Any]) -> RepoKeys:
    repository = _object(data.get("repository"))
    return RepoKeys(_text(repository.get("uuid")), _text(repository.get("full_name")))


def _gerrit_repo(data: dict[str, Any]) -> RepoKeys:
    project = _object(data.get("refUpdate")).get("project") or data.get("project")
    name = _text(_object(project).get("name")) if isinstance(project, dict) else _text(project)
    # Discovery stores Gerrit's project ID: the URL-encoded name.
    return RepoKeys(quote(name, safe="") if name else None, name)


HOSTS: dict[str, HostHooks] = {
    "github": HostHooks("github", _github_verify, _github_event, _github_repo),
    "gitlab": HostHooks("gitlab", _gitlab_verify, _gitlab_event, _gitlab_repo),
    "bitbucket-server": HostHooks(
        "bitbucketserver", _bitbucket_server_verify, _bitbucket_server_event, _bitbucket_server_repo
    ),
    "bitbucket-cloud": HostHooks(
        "bitbucketcloud", _bitbucket_cloud_verify, _bitbucket_cloud_event, _bitbucket_cloud_repo
    ),
    "gerrit": HostHooks("gerrit", _query_secret_ok, _gerrit_event, _gerrit_repo),
}
# The address segment of each connection kind (the site-admin page and status print each connection's address).
ADDRESSES = {hooks.kind: host for host, hooks in HOSTS.items()}
