"""Authorization header parsing: every form and error case of behaviour-notes §2."""

from __future__ import annotations

import pytest

from codewell.auth.header import Credentials, MalformedHeader, Scheme, parse_authorization


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # The reference's own cases.
        ("token tok", Credentials(Scheme.TOKEN, "tok")),
        ("token tok==", Credentials(Scheme.TOKEN, "tok==")),
        ("token token=tok", Credentials(Scheme.TOKEN, "tok")),
        ('token token="tok=="', Credentials(Scheme.TOKEN, "tok==")),
        ('token-sudo token="tok==", user="alice"', Credentials(Scheme.TOKEN_SUDO, "tok==", "alice")),
        ('token-sudo token=tok, user="alice"', Credentials(Scheme.TOKEN_SUDO, "tok", "alice")),
        # Keys are case-insensitive, values quoted or bare, whitespace around commas is optional.
        ("token-sudo TOKEN=tok,User=alice", Credentials(Scheme.TOKEN_SUDO, "tok", "alice")),
        ('token-sudo user="bob" , token="t"', Credentials(Scheme.TOKEN_SUDO, "t", "bob")),
        ('token token="a\\"b"', Credentials(Scheme.TOKEN, 'a"b')),
        # Scheme names are case-insensitive; Bearer carries access tokens and OAuth tokens alike.
        ("Bearer abc", Credentials(Scheme.BEARER, "abc")),
        ("bearer abc", Credentials(Scheme.BEARER, "abc")),
        ("BEARER abc==", Credentials(Scheme.BEARER, "abc==")),
        ("Token abc", Credentials(Scheme.TOKEN, "abc")),
        ("token   spaced  ", Credentials(Scheme.TOKEN, "spaced")),
    ],
)
def test_recognized_forms(value: str, expected: Credentials) -> None:
    assert parse_authorization(value) == expected


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        ('token-sudo user="alice"', "token auth-param"),
        ('token-sudo token="",user="alice"', "token auth-param"),
        ("token k=v, k=v", "duplicate"),
        ('token-sudo token="t", token="u", user="a"', "duplicate"),
        ('token-sudo token="t"', "user"),
        ('token-sudo token="t", user=""', "user"),
        ("token-sudo tok", "neither"),
        ("token k=v", "token auth-param"),
        ("token", "no credentials"),
        ("token   ", "no credentials"),
        ("Bearer", "no credentials"),
        ("Bearer a b", "one token"),
        ("token a b", "neither"),
        ('token token="unterminated', "neither"),
    ],
)
def test_malformed_known_schemes(value: str, detail: str) -> None:
    with pytest.raises(MalformedHeader) as raised:
        parse_authorization(value)
    assert detail in raised.value.detail


@pytest.mark.parametrize("value", ["Basic dXNlcjpwYXNz", "Digest username=x", "tokens abc", "sudo x", "", "   "])
def test_other_schemes_are_not_ours(value: str) -> None:
    assert parse_authorization(value) is None
