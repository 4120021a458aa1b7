"""HistoryService against real git repositories and the real database."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select

from codewell.capabilities import wire
from codewell.core.actors import ANONYMOUS, INTERNAL, Actor
from codewell.core.errors import InvalidInput, NotFound
from codewell.history.models import HistoryCommit, HistoryWordCommit
from codewell.history.service import HistoryService
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from tests.unit.history.builders import RepoBuilder, register, resync

pytestmark = pytest.mark.database

STRANGER = Actor.user(4242, "stranger")


@pytest.fixture
def world(runtime: Runtime, tmp_path: Path) -> dict[str, RepoBuilder]:
    """Two public repositories and one private one, with known authors, dates, branches and tags."""
    alpha = RepoBuilder(tmp_path / "alpha")
    alpha.commit("Initial import", {"README.md": "alpha\n"}, date="2024-01-01T10:00:00Z", label="init")
    alpha.commit(
        "Fix parser crash\n\nThe tokenizer dropped the last byte.",
        {"src/parser.py": "def parse():\n    return tokenize()\n"},
        author="Bob Builder <bob@builder.org>",
        date="2024-02-01T10:00:00Z",
        label="fix",
    )
    alpha.git("checkout", "-q", "-b", "release-1.0")
    alpha.commit("Release notes", {"NOTES.md": "1.0\n"}, date="2024-03-01T10:00:00Z", label="notes")
    alpha.git("tag", "-a", "v1.0", "-m", "v1.0")
    alpha.git("checkout", "-q", "main")
    alpha.commit("Add feature flag", {"src/flags.py": "ENABLE_FOO = True\n"}, date="2024-04-01T10:00:00Z", label="flag")
    beta = RepoBuilder(tmp_path / "beta")
    beta.commit(
        "beta start",
        {"main.go": "package main\n"},
        author="Bob Builder <bob@builder.org>",
        date="2024-01-15T10:00:00Z",
        label="start",
    )
    beta.commit(
        "Remove feature flag",
        {"main.go": "package main\n// ENABLE_FOO removed\n"},
        author="Carol <carol@example.com>",
        date="2024-05-01T10:00:00Z",
        label="remove",
    )
    secret = RepoBuilder(tmp_path / "secret")
    secret.commit(
        "Fix secret thing",
        {"s.txt": "ENABLE_FOO\n"},
        author="Bob Builder <bob@builder.org>",
        date="2024-06-01T10:00:00Z",
    )
    register(runtime, alpha.path, "example.com/alpha")
    register(runtime, beta.path, "example.com/beta")
    register(runtime, secret.path, "example.com/secret", private=True)
    return {"alpha": alpha, "beta": beta, "secret": secret}


def svc(runtime: Runtime) -> HistoryService:
    return runtime.get(HistoryService)


ALL = ["/^example.com//"]


def test_sync_indexes_every_ref_with_metadata(runtime: Runtime, world: dict[str, RepoBuilder]) -> None:
    result = svc(runtime).commit_search(INTERNAL, ["example.com/alpha"])
    assert [c.subject for c in result.commits] == [
        "Add feature flag",
        "Release notes",
        "Fix parser crash",
        "Initial import",
    ]
    fix = result.commits[2]
    assert fix.sha == world["alpha"].shas["fix"]
    assert fix.parents == (world["alpha"].shas["init"],)
    assert (fix.author_name, fix.author_email) == ("Bob Builder", "bob@builder.org")
    assert fix.message.endswith("dropped the last byte.")
    assert fix.paths == ("src/parser.py",)
    assert fix.refs == ("refs/heads/main", "refs/heads/release-1.0")
    assert result.commits[1].refs == ("refs/heads/release-1.0",)
    assert not result.limit_hit


def test_filters_are_anded_and_values_ored(runtime: Runtime, world: dict[str, RepoBuilder]) -> None:
    service = svc(runtime)
    ored = service.commit_search(INTERNAL, ALL, message_terms=["PARSER", "feature flag"])
    assert {c.subject for c in ored.commits} == {"Fix parser crash", "Add feature flag", "Remove feature flag"}
    anded = service.commit_search(INTERNAL, ALL, message_terms=["feature flag"], authors=["carol"])
    assert [c.subject for c in anded.commits] == ["Remove feature flag"]
    by_email = service.commit_search(INTERNAL, ALL, authors=["BOB@BUILDER"])
    assert [c.subject for c in by_email.commits] == ["Fix secret thing", "Fix parser crash", "beta start"]
    by_file = service.commit_search(INTERNAL, ALL, files=["src/"])
    assert [c.subject for c in by_file.commits] == ["Add feature flag", "Fix parser crash"]


def test_date_bounds_and_relative_forms(runtime: Runtime, world: dict[str, RepoBuilder]) -> None:
    service = svc(runtime)
    window = service.commit_search(INTERNAL, ALL, after="2024-02-01", before="2024-04-01")
    assert [c.subject for c in window.commits] == ["Release notes", "Fix parser crash"]
    assert service.commit_search(INTERNAL, ALL, after="1 week ago").commits == []
    with pytest.raises(InvalidInput, match="later than"):
        service.commit_search(INTERNAL, ALL, after="2024-05-01", before="2024-01-01")
    with pytest.raises(InvalidInput, match="`after`"):
        service.commit_search(INTERNAL, ALL, after="someday")


def test_count_and_limit_hit(runtime: Runtime, world: dict[str, RepoBuilder]) -> None:
    result = svc(runtime).commit_search(INTERNAL, ALL, count=2)
    assert [c.subject for c in result.commits] == ["Fix secret thing", "Remove feature flag"]
    assert result.limit_hit
    for bad in (0, 101, "5"):
        with pytest.raises(InvalidInput, match="`count`"):
            svc(runtime).commit_search(INTERNAL, ALL, count=bad)  # type: ignore[arg-type]


def test_revisions_branches_tags_globs_and_commits(runtime: Runtime, world: dict[str, RepoBuilder]) -> None:
    service = svc(runtime)
    alpha = ["example.com/alpha"]
    main = service.commit_search(INTERNAL, alpha, revisions=["main"])
    assert "Release notes" not in {c.subject for c in main.commits}
    assert len(main.commits) == 3
    glob = service.commit_search(INTERNAL, alpha, revisions=["refs/heads/release-*"])
    assert [c.subject for c in glob.commits] == ["Release notes", "Fix parser crash", "Initial import"]
    tag = service.commit_search(INTERNAL, alpha, revisions=["v1.0"], message_terms=["notes"])
    assert [c.subject for c in tag.commits] == ["Release notes"]
    by_sha = service.commit_search(INTERNAL, alpha, revisions=[world["alpha"].shas["fix"][:10]])
    assert [c.subject for c in by_sha.commits] == ["Fix parser crash", "Initial import"]
    with pytest.raises(InvalidInput, match="nope"):
        service.commit_search(INTERNAL, alpha, revisions=["main", "nope"])


def test_content_terms_pickaxe(runtime: Runtime, world: dict[str, RepoBuilder]) -> None:
    result = svc(runtime).commit_search(INTERNAL, ALL, content_terms=["enable_foo"])
    # Added in alpha, changed in beta (added line mentions it), added in secret.
    assert [c.subject for c in result.commits] == ["Fix secret thing", "Remove feature flag", "Add feature flag"]
    stopped = svc(runtime).commit_search(INTERNAL, ALL, content_terms=["enable_foo"], count=1)
    assert len(stopped.commits) == 1
    assert stopped.limit_hit


def test_unknown_repos_are_reported_and_the_rest_searched(runtime: Runtime, world: dict[str, RepoBuilder]) -> None:
    result = svc(runtime).commit_search(INTERNAL, ["example.com/beta", "example.com/nope", "/zzz/"])
    assert result.unknown_repos == ["example.com/nope", "/zzz/"]
    assert len(result.commits) == 2
    with pytest.raises(NotFound, match=r"example\.com/nope"):
        svc(runtime).commit_search(INTERNAL, ["example.com/nope"])
    with pytest.raises(InvalidInput, match="regular expression"):
        svc(runtime).commit_search(INTERNAL, ["/(unclosed/"])
    with pytest.raises(InvalidInput, match="at least one"):
        svc(runtime).commit_search(INTERNAL, [])


def test_private_repositories_are_invisible_everywhere(runtime: Runtime, world: dict[str, RepoBuilder]) -> None:
    service = svc(runtime)
    for actor in (ANONYMOUS, STRANGER):
        everything = service.commit_search(actor, ALL, authors=["bob"])
        assert "Fix secret thing" not in {c.subject for c in everything.commits}
        # The private repository reads exactly like a missing one.
        result = service.commit_search(actor, ["example.com/beta", "example.com/secret"])
        assert result.unknown_repos == ["example.com/secret"]
        with pytest.raises(NotFound):
            service.commit_search(actor, ["example.com/secret"])
        repos = service.contributor_repos(actor, ["bob"])
        assert [r.repo for r in repos] == ["example.com/alpha", "example.com/beta"]
        diff = service.diff_search(actor, "ENABLE_FOO", ALL)
        assert "example.com/secret" not in {m.commit.repo for m in diff.matches}
        with pytest.raises(NotFound):
            service.compare(actor, "example.com/secret", "HEAD", "HEAD")
    admin = service.contributor_repos(INTERNAL, ["bob"])
    assert admin[0].repo == "example.com/secret"


def test_contributor_repos_order_and_limits(runtime: Runtime, world: dict[str, RepoBuilder]) -> None:
    service = svc(runtime)
    repos = service.contributor_repos(INTERNAL, ["alice@example.com", "carol"])
    assert [(r.repo, r.commit_count) for r in repos] == [("example.com/alpha", 3), ("example.com/beta", 1)]
    assert repos[0].last_commit_at.isoformat() == "2024-04-01T10:00:00+00:00"
    assert [r.repo for r in service.contributor_repos(INTERNAL, ["alice", "carol"], min_commits=2)] == [
        "example.com/alpha"
    ]
    assert len(service.contributor_repos(INTERNAL, ["bob"], limit=1)) == 1
    with pytest.raises(InvalidInput, match="at most 5"):
        service.contributor_repos(INTERNAL, ["a", "b", "c", "d", "e", "f"])
    with pytest.raises(InvalidInput, match="`limit`"):
        service.contributor_repos(INTERNAL, ["a"], limit=101)
    with pytest.raises(InvalidInput, match="`minCommits`"):
        service.contributor_repos(INTERNAL, ["a"], min_commits=0)


def test_diff_search_marks_matches(runtime: Runtime, world: dict[str, RepoBuilder]) -> None:
    service = svc(runtime)
    result = service.diff_search(INTERNAL, r"ENABLE_\w+ = True", ALL)
    assert [m.commit.subject for m in result.matches] == ["Add feature flag"]
    path, hunk = result.matches[0].hunks[0]
    assert path == "src/flags.py"
    marked = [line for line in hunk.lines if line.ranges]
    assert [(line.origin, line.text, line.ranges) for line in marked] == [("+", "ENABLE_FOO = True", [(0, 17)])]
    removed_only = service.diff_search(INTERNAL, "ENABLE_FOO", ALL, removed=True)
    assert removed_only.matches == []
    added_only = service.diff_search(INTERNAL, "ENABLE_FOO", ALL, added=True, authors=["carol"])
    assert [m.commit.subject for m in added_only.matches] == ["Remove feature flag"]
    limited = service.diff_search(INTERNAL, "ENABLE_FOO", ALL, count=1)
    assert len(limited.matches) == 1
    assert limited.limit_hit
    with pytest.raises(InvalidInput, match="regular expression"):
        service.diff_search(INTERNAL, "foo(", ALL)
    with pytest.raises(InvalidInput, match="`count`"):
        service.diff_search(INTERNAL, "foo", ALL, count=51)


def test_compare_statuses_counts_and_pagination(
    runtime: Runtime, world: dict[str, RepoBuilder], tmp_path: Path
) -> None:
    gamma = RepoBuilder(tmp_path / "gamma")
    gamma.commit(
        "base",
        {
            "keep.txt": "a\nb\nc\n",
            "old.txt": "x\n",
            "gone.txt": "bye\n",
            "moved.txt": "".join(f"line {i}\n" for i in range(20)),
        },
    )
    gamma.git("tag", "base")
    gamma.git("mv", "moved.txt", "renamed.txt")
    gamma.commit("head", {"keep.txt": "a\nB\nc\n", "gone.txt": None, "new.txt": "hi\n"})
    register(runtime, gamma.path, "example.com/gamma")
    service = svc(runtime)
    first = service.compare(INTERNAL, "example.com/gamma", "base", "main", first=2)
    assert (first.total_files, first.total_added, first.total_deleted) == (4, 2, 2)
    assert [(f.path, f.status) for f in first.files] == [("gone.txt", "deleted"), ("keep.txt", "modified")]
    keep = first.files[1]
    assert (keep.added, keep.deleted) == (1, 1)
    assert keep.hunks[0].body() == " a\n-b\n+B\n c\n"
    assert first.has_next_page
    assert first.end_cursor is not None
    second = service.compare(INTERNAL, "example.com/gamma", "base", "main", first=2, after=first.end_cursor)
    assert [(f.path, f.status) for f in second.files] == [("new.txt", "added"), ("renamed.txt", "renamed")]
    assert second.files[1].old_path == "moved.txt"
    assert not second.has_next_page
    with pytest.raises(InvalidInput, match="cursor"):
        service.compare(INTERNAL, "example.com/gamma", "base", "main", after="garbage!")
    with pytest.raises(NotFound):
        service.compare(INTERNAL, "example.com/gamma", "base", "no-such-branch")
    with pytest.raises(InvalidInput, match="`first`"):
        service.compare(INTERNAL, "example.com/gamma", "base", "main", first=101)


def test_incremental_indexing_follows_pushes_force_pushes_and_deletions(
    runtime: Runtime, world: dict[str, RepoBuilder]
) -> None:
    alpha = world["alpha"]
    service = svc(runtime)
    alpha.commit("Late fix", {"late.txt": "1\n"}, date="2024-07-01T10:00:00Z")
    resync(runtime, "example.com/alpha")
    late = service.commit_search(INTERNAL, ["example.com/alpha"], message_terms=["late fix"])
    assert [c.refs for c in late.commits] == [("refs/heads/main",)]
    alice = service.contributor_repos(INTERNAL, ["alice@example.com"])
    assert [(r.repo, r.commit_count, r.last_commit_at.isoformat()) for r in alice] == [
        ("example.com/alpha", 4, "2024-07-01T10:00:00+00:00")
    ]
    # Force-push release-1.0 back to the fix commit and delete the tag: the branch no longer contains notes.
    alpha.git("branch", "-f", "release-1.0", alpha.shas["fix"])
    alpha.git("tag", "-d", "v1.0")
    resync(runtime, "example.com/alpha")
    notes = service.commit_search(INTERNAL, ["example.com/alpha"], message_terms=["release notes"])
    assert [c.refs for c in notes.commits] == [()]
    with pytest.raises(InvalidInput, match=r"v1\.0"):
        service.commit_search(INTERNAL, ["example.com/alpha"], revisions=["v1.0"])
    stats = service.index_repo(runtime.get(HistoryService).repos.get(INTERNAL, "example.com/alpha"))
    assert (stats.new_commits, stats.refs_updated, stats.refs_removed) == (0, 0, 0)


def test_message_terms_are_substrings_whether_or_not_the_word_index_is_used(
    runtime: Runtime, world: dict[str, RepoBuilder]
) -> None:
    service = svc(runtime)

    def subjects(term: str) -> list[str]:
        return [c.subject for c in service.commit_search(INTERNAL, ALL, message_terms=[term]).commits]

    assert subjects("parser cra") == ["Fix parser crash"]  # spans two words, partial last word
    assert subjects("arse") == ["Fix parser crash"]  # inside a word
    assert subjects("ix p") == ["Fix parser crash"]  # tokens too short for the index: scanned
    assert subjects("last byte.") == ["Fix parser crash"]  # in the body, with punctuation
    assert subjects("100%_literal") == []  # LIKE wildcards are escaped


def test_removing_a_repository_drops_its_history(runtime: Runtime, world: dict[str, RepoBuilder]) -> None:
    def counts() -> tuple[int, int]:
        with runtime.db.session() as session:
            return (
                session.scalar(select(func.count()).select_from(HistoryCommit)) or 0,
                session.scalar(select(func.count()).select_from(HistoryWordCommit)) or 0,
            )

    commits_before, postings_before = counts()
    wire(runtime)  # as in every real process: the removal enqueues history.sweep, which remove_repo waits for
    runtime.get(RepoService).remove_repo(INTERNAL, "example.com/alpha")
    commits_after, postings_after = counts()
    assert commits_after == commits_before - 4
    assert 0 < postings_after < postings_before
    with pytest.raises(NotFound):
        svc(runtime).commit_search(INTERNAL, ["example.com/alpha"])


def test_pickaxe_reads_changed_lines_not_file_headers(runtime: Runtime, tmp_path: Path) -> None:
    sql = RepoBuilder(tmp_path / "sql")
    sql.commit("schema", {"a.sql": "-- old comment\nSELECT 1;\n"}, date="2024-01-01T00:00:00Z")
    sql.commit("drop comment", {"a.sql": "SELECT 1;\n"}, date="2024-01-02T00:00:00Z")
    sql.commit("touch b", {"b.sql": "SELECT 2;\n"}, date="2024-01-03T00:00:00Z")
    register(runtime, sql.path, "example.com/sql")
    service = svc(runtime)
    found = service.commit_search(INTERNAL, ["example.com/sql"], content_terms=["-- old"])
    assert [c.subject for c in found.commits] == ["drop comment", "schema"]
    # "a/b.sql" appears only in the headers of "touch b": headers are not changed lines.
    assert service.commit_search(INTERNAL, ["example.com/sql"], content_terms=["b/b.sql"]).commits == []
