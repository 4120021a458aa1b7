"""HTTP to a code host's API, for sign-in (auth's providers) and connections (codehosts) alike: authentication
headers, pagination, rate limits with back-off, conditional requests, and one error mapping.

- Pagination: `Link: <...>; rel="next"` (GitHub, GitLab), GitLab's `X-Next-Page`, Bitbucket Cloud's `next` in
  the body, Bitbucket Server's `isLastPage`/`nextPageStart`, Gerrit's `_more_changes`-free lists with `S=`.
  A next link must stay on the API's origin: the token never travels elsewhere.
- Rate limits: a 429, or a 403 with `X-RateLimit-Remaining: 0`, waits for `Retry-After` /
  `X-RateLimit-Reset` / `RateLimit-Reset` when that is within `max_wait` seconds, then retries; otherwise
  `RateLimited` is raised (the caller keeps what it already synced).
- Conditional requests: responses with an `ETag` are remembered per URL; the next request sends
  `If-None-Match` and a `304 Not Modified` reuses the remembered body (GitHub does not count it against the
  rate limit).
- Gerrit prefixes every JSON body with `)]}'`; it is stripped.
- Errors: `HostError` and its kinds (`Unauthorized` 401, `Forbidden` 403, `Missing` 404, `RateLimited`,
  `HostUnavailable` for no answer or 5xx), each with a message safe to show (the address without its query, never
  the token or the response body); each caller maps them to its own errors.
- Lists: at most `MAX_PAGES` pages (`HostError` past it), or the caller's `limit` of pages, past which the rest is
  left unread and logged (a sign-in reads memberships at most `limit` pages deep: a bound on its latency).
"""

from __future__ import annotations

import base64
import email.utils
import json
import logging
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import requests
import requests.adapters
import requests.utils
from requests.structures import CaseInsensitiveDict

HTTP_TIMEOUT = 20.0
MAX_PAGES = 1000
GERRIT_PREFIX = ")]}'"
log = logging.getLogger(__name__)


class HostError(Exception):
    """A code host request failed; `message` is safe to show admins (no token, no response body)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class HostUnavailable(HostError):
    """The host could not be reached or answered 5xx."""


class RateLimited(HostError):
    """The host's rate limit is exhausted for longer than we are willing to wait."""


class Unauthorized(HostError):
    """401: the token is missing, wrong, expired or revoked."""


class Forbidden(HostError):
    """403 (not a rate limit): the token may not read this (e.g. OAuth App access restrictions)."""


class Missing(HostError):
    """404: the object does not exist or the token may not see it."""


@dataclass
class Page:
    url: str
    status: int
    headers: Mapping[str, str]
    body: Any
    links: dict[str, str] = field(default_factory=dict)
    from_cache: bool = False

    def entries(self) -> list[Any]:
        """The entries of a list page: a JSON array, or the `values` of a Bitbucket page."""
        body = self.body
        if isinstance(body, dict) and isinstance(body.get("values"), list):
            return list(body["values"])
        if isinstance(body, list):
            return body
        raise HostError(f"{_where(self.url)} answered something other than a list")


@dataclass
class _Cached:
    etag: str
    body: Any
    headers: Mapping[str, str]
    links: dict[str, str]


@dataclass
class Stats:
    requests: int = 0
    not_modified: int = 0
    rate_limit_waits: int = 0


class HostHTTP:
    """One authenticated conversation with a host API (thread-safe; one per token)."""

    def __init__(
        self,
        base: str,
        *,
        bearer: str | None = None,
        basic: tuple[str, str] | None = None,
        header: tuple[str, str] | None = None,
        max_wait: float = 60.0,
        retries: int = 3,
        gerrit: bool = False,
        etags: dict[str, _Cached] | None = None,
        session: requests.Session | None = None,
    ) -> None:
        self.base = base
        self.max_wait = max_wait
        self.retries = retries
        self.gerrit = gerrit
        self.stats = Stats()
        self._etags: dict[str, _Cached] = etags if etags is not None else {}
        self._lock = threading.Lock()
        self._session = session or new_session(base)
        self._owns_session = session is None
        self._headers = {"User-Agent": "codewell", "Accept": "application/json"}
        if bearer is not None:
            self._headers["Authorization"] = f"Bearer {bearer}"
        elif basic is not None:
            raw = f"{basic[0]}:{basic[1]}".encode()
            self._headers["Authorization"] = "Basic " + base64.b64encode(raw).decode()
        if header is not None:
            self._headers[header[0]] = header[1]

    def close(self) -> None:
        """Close the connections of a session this conversation opened itself (a shared one is its owner's)."""
        if self._owns_session:
            self._session.close()

    def use_etags(self, store: dict[str, Any]) -> HostHTTP:
        """Remember ETags in `store` (shared across syncs of the same token owner)."""
        self._etags = store
        return self

    def url(self, path: str) -> str:
        return path if "://" in path else self.base + path.lstrip("/")

    # -- one request --------------------------------------------------------------------------------------
    def text(self, path: str, params: dict[str, Any] | None = None) -> str:
        """The body of a request that does not answer JSON (Bitbucket Server's whoami servlet), as text."""
        url = self.url(path)
        if params:
            url = _with_params(url, params)
        response = self._send(url, dict(self._headers))
        self._check(url, response)
        return response.text

    def get(self, path: str, params: dict[str, Any] | None = None) -> Page:
        url = self.url(path)
        if params:
            url = _with_params(url, params)
        headers = dict(self._headers)
        with self._lock:
            cached = self._etags.get(url)
        if cached is not None:
            headers["If-None-Match"] = cached.etag
        return self._page(url, self._send(url, headers), cached)

    def _send(self, url: str, headers: dict[str, str]) -> requests.Response:
        """One GET, retried on transport errors and 5xx, waiting out a rate limit within `max_wait`."""
        for attempt in range(self.retries + 1):
            try:
                response = self._session.get(url, headers=headers, timeout=HTTP_TIMEOUT, allow_redirects=False)
            except requests.RequestException as exc:
                if attempt < self.retries:
                    time.sleep(min(2.0, 0.2 * 2**attempt))
                    continue
                raise HostUnavailable(f"could not reach {_where(url)}: {type(exc).__name__}") from None
            self.stats.requests += 1
            wait = _rate_limit_wait(response)
            if wait is not None:
                if wait > self.max_wait or attempt >= self.retries:
                    raise RateLimited(
                        f"rate limit of {_where(url)} exhausted (resets in {int(wait)} s)", response.status_code
                    )
                self.stats.rate_limit_waits += 1
                time.sleep(max(wait, 0.05))
                continue
            if response.status_code >= 500:
                if attempt < self.retries:
                    time.sleep(min(2.0, 0.2 * 2**attempt))
                    continue
                raise HostUnavailable(f"{_where(url)} answered {response.status_code}", response.status_code)
            return response
        raise HostUnavailable(f"{_where(url)} kept failing")  # pragma: no cover - the loop returns or raises

    def _check(self, url: str, response: requests.Response) -> None:
        """Raise the HostError of a 4xx answer."""
        status = response.status_code
        if status == 401:
            raise Unauthorized(f"{_where(url)} refused the token (401)", 401)
        if status == 403:
            raise Forbidden(f"{_where(url)} answered 403{_reason(response)}", 403)
        if status == 404:
            raise Missing(f"{_where(url)} answered 404", 404)
        if status >= 400:
            raise HostError(f"{_where(url)} answered {status}", status)

    def _page(self, url: str, response: requests.Response, cached: _Cached | None) -> Page:
        status = response.status_code
        if status == 304 and cached is not None:
            self.stats.not_modified += 1
            return Page(url, 304, cached.headers, cached.body, cached.links, from_cache=True)
        self._check(url, response)
        text = response.text
        if self.gerrit and text.startswith(GERRIT_PREFIX):
            text = text[len(GERRIT_PREFIX) :]
        try:
            body = json.loads(text) if text.strip() else None
        except ValueError:
            raise HostError(f"{_where(url)} answered something other than JSON", status) from None
        links = {rel: str(link.get("url", "")) for rel, link in response.links.items()}
        headers: Mapping[str, str] = CaseInsensitiveDict(response.headers)
        etag = response.headers.get("ETag")
        if etag:
            with self._lock:
                self._etags[url] = _Cached(etag, body, headers, links)
        return Page(url, status, headers, body, links)

    # -- lists --------------------------------------------------------------------------------------------
    def pages(self, path: str, params: dict[str, Any] | None = None, *, limit: int | None = None) -> Iterator[Page]:
        """Every page of a list endpoint, following the host's pagination (same origin only), lazily: a caller
        may stop early. Past MAX_PAGES pages HostError; past `limit` pages the rest is left unread (logged)."""
        first = self.url(path)
        page = self.get(first, params)
        yield page
        for _ in range((limit or MAX_PAGES) - 1):
            following = next_url(page, first)
            if following is None:
                return
            page = self.get(following)
            yield page
        if next_url(page, first) is None:
            return
        if limit is None:
            raise HostError(f"{_where(first)} has more than {MAX_PAGES} pages")
        log.warning("%s has more than %d pages; the rest is not read", _where(first), limit)

    def items(self, path: str, params: dict[str, Any] | None = None, *, limit: int | None = None) -> Iterator[Any]:
        """The entries of every page (a JSON array, or `values` of Bitbucket pages), lazily."""
        for page in self.pages(path, params, limit=limit):
            yield from page.entries()


def new_session(base: str) -> requests.Session:
    """A pooled session for `base`. Proxies come from the environment once (requests would otherwise scan the
    environment on every request, which cost more than the request itself at thousands of users)."""
    session = requests.Session()
    session.trust_env = False
    session.proxies.update(requests.utils.get_environ_proxies(base))
    adapter = requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=32)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def _with_params(url: str, params: dict[str, Any]) -> str:
    parts = urlsplit(url)
    query = [*parse_qsl(parts.query, keep_blank_values=True), *((k, str(v)) for k, v in params.items())]
    return urlunsplit((*parts[:3], urlencode(query), ""))


def _where(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


def _reason(response: requests.Response) -> str:
    try:
        message = response.json().get("message", "")
    except (ValueError, AttributeError):
        return ""
    return f" ({str(message)[:200]})" if message else ""


def _rate_limit_wait(response: requests.Response) -> float | None:
    """Seconds to wait before retrying when `response` says the rate limit is exhausted, else None."""
    status = response.status_code
    headers = response.headers
    exhausted = status == 429 or (status == 403 and headers.get("X-RateLimit-Remaining") == "0")
    if not exhausted:
        return None
    retry_after = headers.get("Retry-After", "").strip()
    if retry_after.isdigit():
        return float(retry_after)
    if retry_after:
        parsed = email.utils.parsedate_to_datetime(retry_after)
        return max(0.0, parsed.timestamp() - time.time())
    for name in ("X-RateLimit-Reset", "RateLimit-Reset"):
        value = headers.get(name, "").strip()
        if value.isdigit():
            reset = float(value)
            # GitHub and GitLab send an epoch time; small values are seconds from now.
            return max(0.0, reset - time.time()) if reset > 1e9 else reset
    return 60.0


def next_url(page: Page, first_url: str) -> str | None:
    """The address of the page after `page`, or None on the last: a `rel="next"` link (GitHub, GitLab), Bitbucket
    Cloud's `next`, Bitbucket Server's `nextPageStart`, GitLab's `X-Next-Page`. HostError when it points at
    another origin than the first page's (the token must not travel there)."""
    origin = urlsplit(first_url)[:2]
    candidate: str | None = page.links.get("next")
    body = page.body
    if not candidate and isinstance(body, dict):
        if isinstance(body.get("next"), str):  # Bitbucket Cloud
            candidate = body["next"]
        elif body.get("isLastPage") is False and "nextPageStart" in body:  # Bitbucket Server
            parts = urlsplit(page.url)
            query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "start"]
            query.append(("start", str(body["nextPageStart"])))
            candidate = urlunsplit((*parts[:3], urlencode(query), ""))
    if not candidate:
        following = page.headers.get("X-Next-Page", "").strip()
        if following.isdigit():
            parts = urlsplit(page.url)
            query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "page"]
            candidate = urlunsplit((*parts[:3], urlencode([*query, ("page", following)]), ""))
    if not candidate:
        return None
    if urlsplit(candidate)[:2] != origin:
        raise HostError(f"the pagination link of {_where(first_url)} points at another host")
    return candidate
