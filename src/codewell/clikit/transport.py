"""The HTTP transport of `codewell --server URL` (clikit/remote.py): the standard library's urllib.request, with
proxies from the environment and certificates checked against the system's.

Not requests: requests and urllib3 took 0.2-0.3 s to import on this machine, half of what a remote command may
take in all (issue #32: at most 0.5 s). What requests gave is kept: a connect timeout apart from the read
timeout, and redirects followed on the server's own origin only (the token never goes to another address).
"""

from __future__ import annotations

import http.client
import ssl
import urllib.error
import urllib.request
from email.message import Message
from typing import Any
from urllib.parse import urlsplit

from codewell.clikit.remote import CONNECT_TIMEOUT_S, READ_TIMEOUT_S, RemoteError


class TimedOut(Exception):
    """The server accepted the connection and then said nothing for READ_TIMEOUT_S."""


class Unreachable(Exception):
    """No answer at all; the message is the innermost reason ("[Errno 111] Connection refused")."""


class _Connection(http.client.HTTPConnection):
    """Plain HTTP with two timeouts, as the client had with requests: CONNECT_TIMEOUT_S to connect (a server that
    is not there is said at once), READ_TIMEOUT_S for each read (a long search is waited for)."""

    def connect(self) -> None:
        self.timeout = CONNECT_TIMEOUT_S
        super().connect()
        self.sock.settimeout(READ_TIMEOUT_S)


class _TLSConnection(http.client.HTTPSConnection):
    def connect(self) -> None:
        self.timeout = CONNECT_TIMEOUT_S
        super().connect()
        self.sock.settimeout(READ_TIMEOUT_S)


class _HTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_Connection, req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_TLSConnection, req, context=ssl.create_default_context())


class _SameOrigin(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only on the server's own origin: the token is never sent to another address (an http://
    URL redirected to https:// included: the person is told to use the address it redirects to)."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: Any,
        code: int,
        msg: str,
        headers: Any,
        newurl: str,
    ) -> urllib.request.Request | None:
        old, new = urlsplit(req.full_url), urlsplit(newurl)
        if (old.scheme, old.netloc) != (new.scheme, new.netloc):
            origin = f"{new.scheme}://{new.netloc}"
            fp.close()  # the redirect's own answer, which urllib closes only when it follows
            raise RemoteError(
                f"{old.scheme}://{old.netloc} redirects to {origin}",
                hint=f"use --server {origin} (the token is not sent to another address)",
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def exchange(method: str, url: str, data: bytes | None, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """(status, headers by lower-case name, body) of one request, 4xx and 5xx included; TimedOut or Unreachable
    when there is no answer."""
    opener = urllib.request.build_opener(_HTTPHandler, _HTTPSHandler, _SameOrigin)
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with opener.open(request) as response:
            return response.status, _lower(response.headers), response.read()
    except urllib.error.HTTPError as error:  # the server answered, with an error status
        with error:
            return error.code, _lower(error.headers), error.read()
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        if isinstance(reason, TimeoutError):
            raise TimedOut() from None
        raise Unreachable(str(reason)) from None


def _lower(headers: Message[str, str]) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}
