"""Parsing the Authorization header (spec "Authorization header handling"; behaviour notes §2).

Recognized schemes, case-insensitive: `token <t>`, `token token="<t>"`, `token-sudo token="<t>",user="<u>"`
and `Bearer <t>`. Auth-params are comma separated, keys case-insensitive, values quoted or bare; a duplicate
key is an error. Any other scheme is *unrecognized*: the caller ignores it (an auth proxy may use it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class Scheme(StrEnum):
    TOKEN = "token"
    TOKEN_SUDO = "token-sudo"
    BEARER = "bearer"


class MalformedHeader(ValueError):
    """A recognized scheme with unusable credentials; `detail` says what is wrong (for logs, not callers)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Credentials:
    scheme: Scheme
    token: str
    sudo_user: str = ""


# One auth-param: key = "quoted value" | bare-value (bare values may carry `=` padding, never start with it).
_PARAM = re.compile(r'\s*([A-Za-z][A-Za-z0-9_-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s",=][^\s",]*))\s*')
_TOKEN68 = re.compile(r"^[^\s\",]+$")


def parse_params(text: str) -> dict[str, str] | None:
    """The comma-separated auth-params of `text` (keys lower-cased); None when `text` is not params.

    Raises MalformedHeader for a duplicate key.
    """
    params: dict[str, str] = {}
    pos = 0
    while True:
        match = _PARAM.match(text, pos)
        if match is None:
            return None
        key = match.group(1).lower()
        if key in params:
            raise MalformedHeader(f"duplicate auth-param {key!r}")
        quoted, bare = match.group(2), match.group(3)
        params[key] = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare
        pos = match.end()
        if pos == len(text):
            return params
        if text[pos] != ",":
            return None
        pos += 1


def parse_authorization(value: str) -> Credentials | None:
    """The credentials in an Authorization header value; None for an unrecognized (or empty) scheme.

    Raises MalformedHeader when the scheme is recognized but the rest is unusable.
    """
    scheme_text, _, rest = value.strip().partition(" ")
    try:
        scheme = Scheme(scheme_text.lower())
    except ValueError:
        return None
    rest = rest.strip()
    if not rest:
        raise MalformedHeader(f"no credentials after the {scheme_text!r} scheme")
    if scheme is Scheme.BEARER:
        if not _TOKEN68.match(rest):
            raise MalformedHeader("a Bearer credential must be one token")
        return Credentials(scheme, rest)
    params = parse_params(rest)
    if params is None:
        if scheme is Scheme.TOKEN and _TOKEN68.match(rest):
            return Credentials(scheme, rest)  # the bare form: `token <t>`
        raise MalformedHeader("credentials are neither a token nor auth-params")
    token = params.get("token", "")
    if not token:
        raise MalformedHeader("the token auth-param is missing or empty")
    if scheme is Scheme.TOKEN:
        return Credentials(scheme, token)
    user = params.get("user", "")
    if not user:
        raise MalformedHeader("token-sudo needs a non-empty user auth-param")
    return Credentials(scheme, token, user)
