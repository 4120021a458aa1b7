"""Naming, credentials and discovery of configured repository sources (pure logic, real directories)."""

from __future__ import annotations

from pathlib import Path

import pytest

from codewell.config.schema import GitRepoSource, LocalRepoSource
from codewell.core.errors import InvalidInput
from codewell.repos.sources import (
    check_name,
    discover,
    discover_git,
    find_git_repos,
    name_from_url,
    redact_url_credentials,
    split_credentials,
)
from tests.gitfixtures import make_bare, make_repo


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("https://github.com/org/repo.git", "github.com/org/repo"),
        ("https://user:tok@github.com/org/repo.git", "github.com/org/repo"),
        ("https://gitlab.example.com:8443/group/sub/project", "gitlab.example.com/group/sub/project"),
        ("git@github.com:org/repo.git", "github.com/org/repo"),
        ("ssh://git@host.example/org/repo.git/", "host.example/org/repo"),
        ("git://host/x.git", "host/x"),
        ("file:///srv/git/tools.git", "localhost/srv/git/tools"),
    ],
)
def test_names_come_from_host_and_path(url: str, name: str) -> None:
    assert name_from_url(url) == name


def test_prefix_replaces_the_host() -> None:
    assert name_from_url("https://github.com/org/repo.git", "mirror") == "mirror/org/repo"


@pytest.mark.parametrize("bad", ["https://host/", "a/../b", "a//b", "x/\x00"])
def test_unusable_names_are_rejected(bad: str) -> None:
    with pytest.raises(InvalidInput):
        name_from_url(bad) if "://" in bad else check_name(bad)


def test_credentials_are_split_off_https_urls_only() -> None:
    assert split_credentials("https://u:p%40ss@h/o/r.git") == ("https://h/o/r.git", "u:p@ss")
    assert split_credentials("https://h/o/r.git") == ("https://h/o/r.git", None)
    assert split_credentials("ssh://git@h/o/r.git") == ("ssh://git@h/o/r.git", None)


def test_redaction_removes_userinfo_from_any_url_in_text() -> None:
    text = "fatal: unable to access 'https://bob:s3cret@host/x.git/': nope"
    assert "s3cret" not in redact_url_credentials(text)
    assert "https://***@host/x.git/" in redact_url_credentials(text)


def test_local_source_finds_work_trees_and_bare_repos_without_descending_into_them(tmp_path: Path) -> None:
    root = tmp_path / "code"
    make_repo(root / "team" / "app", {"a.txt": "a\n"})
    make_repo(root / "team" / "app" / "vendor" / "inner", {"b.txt": "b\n"})  # inside a repo: not listed
    make_repo(root / "lib", {"c.txt": "c\n"})
    make_bare(root / "archive" / "old.git", root / "lib")
    (root / "empty-dir").mkdir()
    assert [p.relative_to(root).as_posix() for p in find_git_repos(root)] == ["archive/old.git", "lib", "team/app"]
    specs = discover(LocalRepoSource(kind="local", path=str(root), prefix="src", exclude=["archive/*"]))
    assert [s.name for s in specs] == ["src/lib", "src/team/app"]
    assert all(s.kind == "local" and Path(s.clone_url).is_dir() for s in specs)
    only = discover(LocalRepoSource(kind="local", path=str(root), include=["team/*", "archive/*"]))
    assert [s.name for s in only] == ["local/archive/old", "local/team/app"]


def test_a_local_source_that_is_itself_a_repository_is_named_after_its_directory(tmp_path: Path) -> None:
    make_repo(tmp_path / "solo", {"a.txt": "a\n"})
    specs = discover(LocalRepoSource(kind="local", path=str(tmp_path / "solo"), branches=["dev"], private=True))
    assert [(s.name, s.private, s.extra_branches) for s in specs] == [("local/solo", True, ("dev",))]


def test_git_source_keeps_secrets_out_of_names_and_urls() -> None:
    source = GitRepoSource(
        kind="git", urls=["https://x:tok123@h.example/o/r.git", "git@h.example:o/s.git"], syncIntervalSeconds=60
    )
    specs = discover_git(source)
    assert [s.name for s in specs] == ["h.example/o/r", "h.example/o/s"]
    assert specs[0].clone_url == "https://h.example/o/r.git"
    assert specs[0].secret == "x:tok123"
    assert "tok123" not in repr(specs[0])
    assert specs[1].sync_interval_seconds == 60


@pytest.mark.parametrize(
    "bad",
    [
        "-rf",
        "local/-rf",
        "host/org/-x",
        ".hidden/x",
        "~root/x",
        "host/with space",
        "host/tab\there",
        "host/line\n",
        "host/x\r",
        "host/semi;colon",
        "host/quote'd",
        "host/per%2Fcent",
        "host/q?x",
        "host/frag#x",
        "host/$(id)",
        "host/back`tick`",
        "host/ünïcode",
    ],
)
def test_names_a_shell_or_url_would_misread_are_refused(bad: str) -> None:
    with pytest.raises(InvalidInput, match="invalid repository name"):
        check_name(bad)


@pytest.mark.parametrize("good", ["github.com/org/repo", "github.com/org/.github", "h/a_b-c.d~e+f@g", "9x/y"])
def test_ordinary_names_are_kept(good: str) -> None:
    assert check_name(good) == good


def test_a_name_from_a_url_with_a_leading_dash_is_refused() -> None:
    with pytest.raises(InvalidInput, match="starts with '-'"):
        name_from_url("https://host.example/org/-rf.git")
