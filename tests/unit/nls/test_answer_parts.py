"""The parts of an nls_search answer that need no index: repository names in a question, and cut lines."""

from __future__ import annotations

from pathlib import Path

from codewell.nls.render import LINE_CHARS, cap_line
from codewell.nls.service import named_repos
from codewell.repos.service import Repo


def _repo(name: str) -> Repo:
    return Repo(
        id=1,
        name=name,
        description="",
        default_branch="main",
        private=False,
        fork=False,
        archived=False,
        stars=None,
        clone_url="",
        mirror_path=Path("/nonexistent"),
        sync_state="ready",
        last_error=None,
        last_fetched_at=None,
        size_bytes=None,
        extra_branches=(),
    )


REPOS = [_repo(n) for n in ("github.com/spf13/cobra", "pallets/click", "acme/the", "acme/go", "expressjs/express")]


def test_a_repository_is_named_whole_from_a_slash_on_or_by_its_last_part() -> None:
    for question in (
        "where does github.com/spf13/cobra generate the bash completion script",
        "where does spf13/cobra generate the bash completion script",
        "where does Cobra generate the bash completion script",
    ):
        named, rest = named_repos(question, REPOS)
        assert named == ["github.com/spf13/cobra"], question
        assert "cobra" not in rest.lower(), question
        assert "bash completion script" in rest
    named, rest = named_repos("how do click and express parse arguments?", REPOS)
    assert named == ["pallets/click", "expressjs/express"]
    assert rest.split() == ["how", "do", "and", "parse", "arguments?"]


def test_short_names_stop_words_and_parts_of_words_name_nothing() -> None:
    for question in ("how does the parser go back", "where are cobras and clicking handled", "other/cobra"):
        assert named_repos(question, REPOS) == ([], question), question
    # Written in full, even a short name counts; a longer name that ends with a repository's whole name names it.
    assert named_repos("what does acme/go export", REPOS)[0] == ["acme/go"]
    assert named_repos("where does github.com/spf13/cobra parse flags", [_repo("spf13/cobra")]) == (
        ["spf13/cobra"],
        "where does   parse flags",
    )


def test_cut_lines_say_how_much_was_left_out() -> None:
    assert cap_line("x" * LINE_CHARS) == "x" * LINE_CHARS
    assert cap_line("é" * (LINE_CHARS + 7)) == "é" * LINE_CHARS + "…(+7 chars)"
