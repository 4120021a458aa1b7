"""code_finder's repository matching: the cheap substring test in front of the per-name regex drops nothing."""

from __future__ import annotations

from dataclasses import dataclass

from codewell.agents.finder import named_repositories


@dataclass(frozen=True)
class _Ref:
    name: str


REPOS = [_Ref("github.com/acme/Kit"), _Ref("local/sparse"), _Ref("local/mini"), _Ref("other/tool")]


def names(task: str) -> list[str]:
    return [r.name for r in named_repositories(task, REPOS)]


def test_full_and_short_names_match_case_insensitively() -> None:
    assert names("where is retrying done in GITHUB.COM/acme/kit") == ["github.com/acme/Kit"]
    assert names("how does the repo TOOL parse flags") == ["other/tool"]
    assert names("where is nothing at all") == []


def test_characters_that_ignorecase_folds_onto_ascii_letters_still_match() -> None:
    # re.IGNORECASE matches these with k, s and i although str.lower() does not map them there; the
    # substring prefilter must not drop what the regex would have found.
    assert names("where is X in github.com/acme/\u212ait") == ["github.com/acme/Kit"]
    assert names("where is X in local/\u017fparse") == ["local/sparse"]
    assert names("where is X in local/m\u0131n\u0130") == ["local/mini"]
