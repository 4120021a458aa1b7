"""The command line against a remote codewell: `codewell --server URL ...` over the instance's public REST API.

The commands that read code (search, nls, read, definition, references, history search, deep search) call the
same REST routes a script would, with an access token, and print the `text` the route renders (the same text
the local command prints) or, with `--json`, the body itself. Nothing here imports the database layer or a
capability: a remote command starts as fast as `--help` (issue #32 asks for at most 0.5 s).

The token comes from `CODEWELL_TOKEN`, else from what `codewell login URL` stored for that server in
`$XDG_CONFIG_HOME/codewell/credentials.json` (by default `~/.config/codewell/`), a file only its owner may read.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import click

from codewell.core.errors import CodewellError

TOKEN_ENV = "CODEWELL_TOKEN"
SERVER_ENV = "CODEWELL_SERVER"
# A search of count:all or a deep search question can take a while on a big instance; a server that accepts the
# connection and then says nothing for this long is reported rather than waited on forever.
READ_TIMEOUT_S = 300.0
CONNECT_TIMEOUT_S = 10.0


class RemoteError(CodewellError):
    """The server could not be asked or refused: one `error:` line and one `hint:` line (clikit.handle_errors)."""


def config_dir() -> Path:
    """`$XDG_CONFIG_HOME/codewell`, by default `~/.config/codewell` (the XDG base directory rule)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "codewell"


def credentials_path() -> Path:
    return config_dir() / "credentials.json"


def normalize_url(url: str) -> str:
    """The server's base URL without a trailing slash; anything that is not an http(s) URL with a host is refused
    here, before a request is sent, with an example of what is expected."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RemoteError(
            f"not a server URL: {url!r}",
            hint="give the address you open codewell at in a browser, e.g. --server https://codewell.example.com",
        )
    return url.strip().rstrip("/")


def _read_credentials() -> dict[str, Any]:
    path = credentials_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"servers": {}}
    except (OSError, ValueError) as exc:
        raise RemoteError(f"cannot read {path}: {exc}", hint="remove it and run `codewell login URL` again") from None
    servers = data.get("servers") if isinstance(data, dict) else None
    return {"servers": servers if isinstance(servers, dict) else {}}


def _write_credentials(data: dict[str, Any]) -> None:
    """Write the file whole under a temporary name, created 0600 in a 0700 directory, then rename it: the token is
    never readable by others, not even for a moment, and a crash leaves the old file."""
    path = credentials_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".credentials-", suffix=".tmp")  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=2)
            out.write("\n")
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def stored_token(url: str) -> str | None:
    entry = _read_credentials()["servers"].get(normalize_url(url))
    token = entry.get("token") if isinstance(entry, dict) else None
    return token if isinstance(token, str) and token else None


def store_token(url: str, token: str) -> Path:
    data = _read_credentials()
    data["servers"][normalize_url(url)] = {"token": token}
    _write_credentials(data)
    return credentials_path()


def forget_token(url: str) -> bool:
    """Remove the stored token of `url`; whether there was one."""
    data = _read_credentials()
    if data["servers"].pop(normalize_url(url), None) is None:
        return False
    _write_credentials(data)
    return True


@dataclass
class Remote:
    """One codewell server and the token to call it with (None: anonymous, for instances with public access).

    The transport is the standard library's (`clikit/transport.py`)."""

    url: str
    token: str | None

    @classmethod
    def connect(cls, url: str, token: str | None) -> Remote:
        return cls(normalize_url(url), token)

    def get(self, path: str, params: dict[str, Any] | list[tuple[str, Any]] | None = None) -> dict[str, Any]:
        query = urlencode(list(params.items()) if isinstance(params, dict) else params or [], doseq=True)
        return self.request("GET", path + (f"?{query}" if query else ""))

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.request("POST", path, json.dumps(body).encode())

    def request(self, method: str, path: str, data: bytes | None = None) -> dict[str, Any]:
        """The JSON body of `method path`; every failure is a RemoteError saying what to do about it."""
        headers = {"Accept": "application/json", "User-Agent": "codewell-cli"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"token {self.token}"
        # The transport (urllib.request, ~0.1 s to import) only when a command talks to a server, not for the
        # `--help` of every command module that imports this one.
        from codewell.clikit import transport  # noqa: PLC0415 - lazy: see above

        try:
            return self._body(*transport.exchange(method, self.url + path, data, headers))
        except transport.TimedOut:
            raise RemoteError(
                f"{self.url} did not answer {method} {path.split('?', 1)[0]} in time",
                hint="the server may be overloaded; try again, or narrow the query",
            ) from None
        except transport.Unreachable as exc:
            raise RemoteError(
                f"cannot reach {self.url}: {exc}",
                hint="check the URL (--server or CODEWELL_SERVER) and that the server is running",
            ) from None

    def _body(self, status: int, headers: dict[str, str], raw: bytes) -> dict[str, Any]:
        if status == 401:
            how = f"the token from {TOKEN_ENV}" if os.environ.get(TOKEN_ENV) else "the stored token"
            raise RemoteError(
                f"{self.url} refused {how} (401)" if self.token else f"{self.url} needs a token (401)",
                hint=f"create an access token at {self.url}/settings/tokens, then `codewell login "
                f"{self.url}` or set {TOKEN_ENV}",
            )
        try:
            body = json.loads(raw)
        except ValueError:
            kind = headers.get("content-type", "no content type")
            raise RemoteError(
                f"{self.url} did not answer as a codewell server (HTTP {status}, {kind})",
                hint="check the URL: it is the address you open codewell at in a browser",
            ) from None
        if status >= 400:
            error = body.get("error") if isinstance(body, dict) else None
            if isinstance(error, dict) and isinstance(error.get("message"), str):
                hint = error.get("hint")
                raise RemoteError(error["message"], hint=hint if isinstance(hint, str) else None)
            raise RemoteError(f"{self.url} answered HTTP {status}")
        if not isinstance(body, dict):
            raise RemoteError(f"{self.url} answered JSON that is not an object (HTTP {status})")
        return body


def server_url(ctx: click.Context) -> str | None:
    """The root option `--server` (or CODEWELL_SERVER), None for the local data directory."""
    value = ctx.find_root().params.get("server")
    return normalize_url(value) if isinstance(value, str) and value else None


def remote_of(ctx: click.Context) -> Remote | None:
    """The server a command talks to, with its token (CODEWELL_TOKEN first, then `codewell login`'s), or None."""
    url = server_url(ctx)
    if url is None:
        return None
    token = os.environ.get(TOKEN_ENV) or stored_token(url)
    return Remote.connect(url, token)


def path_segment(name: str) -> str:
    """A repository name inside a REST path (`/.api/repos/{name}/-/file`): slashes kept, the rest quoted."""
    return quote(name, safe="/")
