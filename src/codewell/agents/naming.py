"""Which readable repositories a task or question names: shared by code_finder (exactly one) and the
retrieval pipeline (deep search without a model searches only the repositories its question names)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol, TypeVar

__all__ = ["REPO_LIKE", "named_repositories", "without_names"]

# A token that looks like a repository name someone typed: `org/name`, `host/org/name`.
REPO_LIKE = re.compile(r"(?<![\w./-])([A-Za-z0-9][\w.-]*(?:/[\w.-]+)+)(?![\w/-])")
# Words right before a repository's short name that say "this is the repository".
_LEAD = re.compile(r"(?:\bin|\bof|\bfrom|\brepo|\brepository|\bproject|\bcodebase)\s+(?:the\s+)?$", re.IGNORECASE)
# The only characters re.IGNORECASE matches with an ASCII letter that str.lower() maps elsewhere. Folding
# them first makes "the lowered name is in the folded task" a necessary condition of `_mentions` (names are
# ASCII: sources.check_name), checked before compiling one regex per readable repository (~30 µs each).
_ASCII_FOLDS = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})


class _Named(Protocol):
    @property
    def name(self) -> str: ...


_R = TypeVar("_R", bound=_Named)


def _mentions(task: str, name: str) -> list[int]:
    """Where `name` occurs in `task` as a whole name (case-insensitive; not inside a longer name or path, but
    possibly behind a host)."""
    # A host in front (`github.com/spf13/cobra` for `spf13/cobra`) is part of the same mention.
    host = r"(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+/)?"
    pattern = re.compile(r"(?<![\w./-])" + host + re.escape(name) + r"(?![\w/-]|\.\w)", re.IGNORECASE)
    return [m.start() for m in pattern.finditer(task)]


def named_repositories(task: str, readable: Sequence[_R]) -> list[_R]:
    """The readable repositories `task` names: full names first; else short names (the last segment of the
    name) that only one readable repository has; among several short names, the ones introduced as the
    repository ("in X", "repo X")."""
    folded = task.translate(_ASCII_FOLDS).lower()
    full = [r for r in readable if r.name.lower() in folded and _mentions(task, r.name)]
    # A full name inside another full name (`acme/app` in `github.com/acme/app`): keep the longest.
    full = [r for r in full if not any(o is not r and r.name in o.name and _mentions(task, o.name) for o in full)]
    if full:
        return full
    by_short: dict[str, list[_R]] = {}
    for r in readable:
        by_short.setdefault(r.name.rsplit("/", 1)[-1].lower(), []).append(r)
    short: list[tuple[_R, list[int]]] = []
    for key, repos in by_short.items():
        if len(repos) != 1 or "/" not in repos[0].name or key not in folded:
            continue
        at = _mentions(task, key)
        if at:
            short.append((repos[0], at))
    if len(short) > 1:
        introduced = [r for r, at in short if any(_LEAD.search(task[:i]) for i in at)]
        if introduced:
            return introduced
    return [r for r, _ in short]


def without_names(text: str, names: Sequence[str]) -> str:
    """`text` with every mention of `names` (full names, a host-prefixed form such as `github.com/<name>`,
    and their last segments) blanked out: a repository named in a task says where to look, not what."""
    for name in sorted(names, key=len, reverse=True):
        for form in (name, name.rsplit("/", 1)[-1]):
            pattern = re.compile(r"(?<![\w.-])(?:[\w.-]+/)*" + re.escape(form) + r"(?![\w/-]|\.\w)", re.IGNORECASE)
            text = pattern.sub(" ", text)
    return text
