"""Username rules: user-chosen names are validated, external ones normalized (spec + behaviour notes §3)."""

from __future__ import annotations

import re

import pytest

from codewell.accounts.usernames import normalize_username, username_problem, validate_username, with_random_suffix
from codewell.core.errors import InvalidInput


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("username", "username"),
        ("john@gmail.com", "john"),
        ("john.appleseed@gmail.com", "john.appleseed"),
        ("john+test@gmail.com", "john-test"),
        ("this@is@not-an-email", "this-is-not-an-email"),
        ("user.na$e", "user.na-e"),
        ("john(test)@gmail.com", "john-test-"),
        ("bob!", "bob-"),
        ("john_doe", "john_doe"),
        ("_john", "_john"),
        ("user_@name", "user_"),
        ("a-", "a-"),
        ("--username-", "username-"),
        ("bob.!bob", "bob-bob"),
        ("bob@@bob", "bob-bob"),
        ("username.", "username"),
        (".username", "username"),
        ("user..name", "user-name"),
        ("user.-name", "user-name"),
    ],
)
def test_normalization_table(raw: str, normalized: str) -> None:
    assert normalize_username(raw) == normalized
    assert username_problem(normalized) is None


@pytest.mark.parametrize("raw", [".", "-", "@", "..", ""])
def test_names_that_cannot_be_normalized(raw: str) -> None:
    with pytest.raises(InvalidInput, match="cannot be normalized"):
        normalize_username(raw)


@pytest.mark.parametrize("name", ["alice", "a", "a-", "j.doe", "j-doe", "j_doe", "_x", "A1", "x" * 255])
def test_valid_user_chosen_names(name: str) -> None:
    assert validate_username(name) == name


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("", "must not be empty"),
        ("x" * 256, "at most 255"),
        ("john@example.com", "only letters, digits"),
        ("bob!", "only letters, digits"),
        ("jürgen", "only letters, digits"),
        ("has space", "only letters, digits"),
        (".alice", "must not start"),
        ("-alice", "must not start"),
        ("alice.", "must not end with '.'"),
        ("al..ice", "consecutive"),
        ("al.-ice", "consecutive"),
        ("al--ice", "consecutive"),
    ],
)
def test_invalid_user_chosen_names_name_the_rule(name: str, rule: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        validate_username(name)
    assert rule in raised.value.message
    assert raised.value.hint


def test_random_suffix_is_five_lowercase_letters_and_stays_valid() -> None:
    name = with_random_suffix("x" * 255)
    assert re.fullmatch(r"x+-[a-z]{5}", name)
    assert len(name) <= 255
    assert username_problem(name) is None
