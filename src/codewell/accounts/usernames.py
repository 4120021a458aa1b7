"""Username rules (spec "Username normalization"): validating user-chosen names, normalizing external ones."""

from __future__ import annotations

import re
import secrets
import string

from codewell.core.errors import InvalidInput

MAX_USERNAME_LENGTH = 255
# The reference's valid-username pattern: starts with a word character; `.` and `-` only between word
# characters, except one trailing `-`. ASCII only, so the spec's character class `[a-zA-Z0-9-._]` holds.
VALID_USERNAME = re.compile(r"^\w(?:(?:[\w.-]\w|\w)*-?|)$", re.ASCII)
_DISALLOWED = re.compile(r"[^a-zA-Z0-9\-._]", re.ASCII)
_RUNS = re.compile(r"[-.]{2,}")

_HINT = "use letters, digits, '-', '.' and '_', e.g. jane.doe or jane-doe"


def username_problem(name: str) -> str | None:
    """The first rule `name` violates, as a sentence, or None when it is a valid username."""
    if not name:
        return "a username must not be empty"
    if len(name) > MAX_USERNAME_LENGTH:
        return f"a username must be at most {MAX_USERNAME_LENGTH} characters"
    bad = _DISALLOWED.search(name)
    if bad:
        return f"a username may contain only letters, digits, '-', '.' and '_' (found {bad.group()!r})"
    if name[0] in "-.":
        return "a username must not start with '-' or '.'"
    if name.endswith("."):
        return "a username must not end with '.'"
    if _RUNS.search(name):
        return "a username must not contain consecutive '-' or '.' characters"
    if not VALID_USERNAME.match(name):  # pragma: no cover - the checks above cover the pattern
        return "a username must match ^\\w(?:(?:[\\w.-]\\w|\\w)*-?|)$"
    return None


def validate_username(name: str) -> str:
    """Return `name` when it is a valid user-chosen username; raise InvalidInput naming the broken rule."""
    problem = username_problem(name)
    if problem:
        raise InvalidInput(f"invalid username {name[:64]!r}: {problem}", hint=_HINT)
    return name


def normalize_username(name: str) -> str:
    """Normalize an external provider's username by the spec's rules 1-5; InvalidInput if nothing is left."""
    # Rule 2: an e-mail address keeps its local part; rule 3: otherwise every `@` becomes `-`.
    name = name.split("@", 1)[0] if name.count("@") == 1 else name.replace("@", "-")
    name = _DISALLOWED.sub("-", name)  # rule 1
    name = _RUNS.sub("-", name)  # rule 4 (the reference turns any run, `..` included, into one `-`)
    name = name.lstrip(".-").rstrip(".")  # rule 5
    if username_problem(name):
        raise InvalidInput(f"the username {name!r} cannot be normalized into a valid one", hint=_HINT)
    return name


def with_random_suffix(name: str) -> str:
    """`name` plus `-` and five random lowercase letters (rule 6: telling apart names that normalize alike)."""
    suffix = "".join(secrets.choice(string.ascii_lowercase) for _ in range(5))
    return f"{name[: MAX_USERNAME_LENGTH - 6]}-{suffix}"
