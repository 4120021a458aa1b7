"""Follow-up fixes: bounded scans for unindexed filters, long message words, git-prefiltered diff_search."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import delete, select

from codewell.core.actors import INTERNAL
from codewell.history import prefilter
from codewell.history import scan as scan_module
from codewell.history.indexer import MAX_WORDS_PER_COMMIT, OVERFLOW_WORD, CommitIndexer, message_words
from codewell.history.models import HistoryWord, HistoryWordCommit
from codewell.history.service import HistoryService
from codewell.runtime import Runtime
from tests.unit.history.builders import RepoBuilder, register

pytestmark = pytest.mark.database

NAME = "example.com/many"


@pytest.fixture
def many(runtime: Runtime, tmp_path: Path) -> RepoBuilder:
    """14 commits, one per day; every third message contains the short term "qq", every 4th touches docs/."""
    repo = RepoBuilder(tmp_path / "many")
    for i in range(14):
        message = f"change {i} qq" if i % 3 == 0 else f"change {i}"
        name = f"docs/n{i}.md" if i % 4 == 0 else f"src/f{i}.py"
        repo.commit(message, {name: f"line {i}\n"}, date=f"2024-01-{i + 1:02d}T12:00:00Z", label=str(i))
    register(runtime, repo.path, NAME)
    return repo


@pytest.fixture
def small_windows(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Tiny windows and batches so a 14-commit repository spans many of them; records each window size."""
    monkeypatch.setattr(scan_module, "FIRST_WINDOW", 2)
    monkeypatch.setattr(scan_module, "MAX_WINDOW", 4)
    monkeypatch.setattr(scan_module, "SCAN_BATCH", 1)
    sizes: list[int] = []
    original = scan_module.Scanner.window_floor

    def spy(self: scan_module.Scanner, conditions: Any, upper: Any, size: int) -> Any:
        sizes.append(size)
        return original(self, conditions, upper, size)

    monkeypatch.setattr(scan_module.Scanner, "window_floor", spy)
    return sizes


def test_short_message_terms_are_found_window_by_window(
    runtime: Runtime, many: RepoBuilder, small_windows: list[int]
) -> None:
    history = runtime.get(HistoryService)
    found = history.commit_search(INTERNAL, [NAME], message_terms=["qq"])
    assert [c.subject for c in found.commits] == [
        "change 12 qq",
        "change 9 qq",
        "change 6 qq",
        "change 3 qq",
        "change 0 qq",
    ]
    assert (found.limit_hit, found.timed_out) == (False, False)
    # The walk was cut into windows (2 rows, then 4 at most), never one unbounded statement.
    assert small_windows[:3] == [2, 4, 4]
    assert len(small_windows) >= 4
    first = history.commit_search(INTERNAL, [NAME], message_terms=["qq"], count=2)
    assert [c.subject for c in first.commits] == ["change 12 qq", "change 9 qq"]
    assert first.limit_hit
    assert not first.timed_out


def test_unindexed_filters_combine_with_indexed_ones(
    runtime: Runtime, many: RepoBuilder, small_windows: list[int]
) -> None:
    history = runtime.get(HistoryService)
    docs = history.commit_search(INTERNAL, [NAME], files=["docs/"], after="2024-01-03", before="2024-01-12")
    assert [c.subject for c in docs.commits] == ["change 8", "change 4"]
    both = history.commit_search(INTERNAL, [NAME], files=["docs/"], message_terms=["qq"])
    assert [c.subject for c in both.commits] == ["change 12 qq", "change 0 qq"]
    assert small_windows  # the short term is scanned in windows


def test_unindexed_scan_stops_at_the_time_budget(runtime: Runtime, many: RepoBuilder) -> None:
    history = runtime.get(HistoryService)
    stopped = history.commit_search(INTERNAL, [NAME], message_terms=["qq"], timeout=0.0)
    assert stopped.timed_out
    assert not stopped.limit_hit
    assert stopped.commits == []
    full = history.commit_search(INTERNAL, [NAME], message_terms=["qq"], timeout=30.0)
    assert len(full.commits) == 5
    assert not full.timed_out


def test_terms_inside_words_longer_than_the_index_keeps_are_found(runtime: Runtime, tmp_path: Path) -> None:
    long_word = "x" * 60 + "needle" + "y" * 40  # indexed as "x"*60+"need" and "le"+"y"*40
    repo = RepoBuilder(tmp_path / "long")
    repo.commit(f"blob {long_word} end", {"a": "1\n"}, date="2024-01-01T00:00:00Z")
    many_words = " ".join(f"w{i:03d}" for i in range(MAX_WORDS_PER_COMMIT + 50))
    repo.commit(f"release notes\n\n{many_words}", {"b": "1\n"}, date="2024-01-02T00:00:00Z")
    repo.commit("plain needle", {"c": "1\n"}, date="2024-01-03T00:00:00Z")
    register(runtime, repo.path, "example.com/long")
    history = runtime.get(HistoryService)

    def subjects(term: str) -> list[str]:
        return [c.subject for c in history.commit_search(INTERNAL, ["example.com/long"], message_terms=[term]).commits]

    assert subjects("needle") == ["plain needle", f"blob {long_word} end"]  # across the 64-character cut
    assert subjects("x" * 58 + "needleyyyy") == [f"blob {long_word} end"]  # a token longer than 64
    assert subjects("y" * 40 + " end") == [f"blob {long_word} end"]
    assert subjects(f"w{MAX_WORDS_PER_COMMIT + 40:03d}") == ["release notes"]  # beyond the indexed words
    assert subjects("zzzneedle") == []


def test_message_words_mark_messages_with_more_words_than_indexed() -> None:
    few = message_words("fix the parser")
    assert few == {"fix", "the", "parser"}
    many = message_words(" ".join(f"w{i:03d}" for i in range(MAX_WORDS_PER_COMMIT + 5)))
    assert OVERFLOW_WORD in many
    assert len(many) == MAX_WORDS_PER_COMMIT + 1
    repeated = message_words(" ".join(f"w{i:03d}" for i in range(MAX_WORDS_PER_COMMIT)) + " w000 w001")
    assert OVERFLOW_WORD not in repeated  # repeats of indexed words lose nothing


@pytest.mark.parametrize(
    ("pattern", "literal"),
    [
        (r"value_\d+ = parser_99\d{4}\b", " = parser_99"),
        ("TODO", "TODO"),
        (r"func Open\(", "func Open("),
        ("ab{2}cdef", "cdef"),
        ("hello world?", "hello worl"),
        ("foo(bar|baz)qux1", "qux1"),
        ("[abc]defg", "defg"),
        ("a|bcdef", None),  # top-level alternation: nothing is required
        ("abc*de", None),  # "c" is optional: only 2-character runs remain
        ("(?i)hello", None),  # case-insensitive
        (r"\pLfoo", None),  # escape with an argument
        (r"\x41BCD", None),
        ("[]abc]xyz", "xyz"),
    ],
)
def test_required_literal(pattern: str, literal: str | None) -> None:
    assert prefilter.required_literal(pattern) == literal


def test_ere_escape_makes_git_match_the_literal_only(runtime: Runtime, tmp_path: Path) -> None:
    repo = RepoBuilder(tmp_path / "ere")
    wanted = repo.commit("wanted", {"a.txt": "call x.y(z) [1]+$\n"}, date="2024-01-01T00:00:00Z")
    repo.commit("decoy", {"b.txt": "call xAy(z) 1\n"}, date="2024-01-02T00:00:00Z")
    mirror = register(runtime, repo.path, "example.com/ere").mirror_path
    found = prefilter.candidate_shas({1: mirror}, "x.y(z) [1]+$", None, None, 30.0)
    assert found == {1: {wanted}}
    # A repository git cannot read is not narrowed (None), never an error.
    assert prefilter.candidate_shas({2: tmp_path / "missing.git"}, "abc", None, None, 30.0) == {2: None}


def test_diff_search_with_the_git_prefilter_returns_identical_results(
    runtime: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = RepoBuilder(tmp_path / "pre")
    repo.commit("add", {"m.py": "value_1 = parser_991234\nother = 1\n"}, date="2024-01-01T00:00:00Z")
    repo.commit("noise", {"n.py": "nothing here\n"}, date="2024-01-02T00:00:00Z")
    # A pure rename: renames are detected (issue #22), so it adds and removes no line; git's prefilter runs
    # with --no-renames and names it as a candidate, which the exact in-process check then drops.
    repo.git("mv", "m.py", "moved.py")
    repo.commit("rename", {}, date="2024-01-03T00:00:00Z")
    repo.commit("drop", {"moved.py": "other = 1\n"}, date="2024-01-04T00:00:00Z")
    repo.commit("near miss", {"n.py": "value_1 = parser_99123\n"}, date="2024-01-05T00:00:00Z")
    register(runtime, repo.path, "example.com/pre")
    history = runtime.get(HistoryService)
    patterns = [r"value_\d+ = parser_99\d{4}\b", "other = 1", "nothing", r"parser_99\d{5}"]

    def run(pattern: str) -> list[tuple[str, list[str]]]:
        result = history.diff_search(INTERNAL, pattern, ["example.com/pre"], after="2023-12-01")
        return [(m.commit.subject, [h.body() for _, h in m.hunks]) for m in result.matches]

    plain = {p: run(p) for p in patterns}
    assert [s for s, _ in plain[patterns[0]]] == ["drop", "add"]
    calls: list[str] = []
    original = prefilter.candidate_shas

    def spy(mirrors: Any, literal: str, *args: Any) -> Any:
        calls.append(literal)
        return original(mirrors, literal, *args)

    monkeypatch.setattr(prefilter, "candidate_shas", spy)
    monkeypatch.setattr(scan_module, "PREFILTER_AFTER", 0.0)
    monkeypatch.setattr(scan_module, "SCAN_BATCH", 1)  # later batches come from the SQL-restricted query
    assert {p: run(p) for p in patterns} == plain
    assert calls == [" = parser_99", "other = 1", "nothing", "parser_99"]

    def unanswered(mirrors: Any, literal: str, *args: Any) -> Any:
        return dict.fromkeys(mirrors)  # git failed everywhere: nothing may be narrowed

    monkeypatch.setattr(prefilter, "candidate_shas", unanswered)
    assert {p: run(p) for p in patterns} == plain


def test_new_author_and_word_ids_are_shared_only_after_commit(
    runtime: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another indexing thread must never use an id from an uncommitted transaction (PostgreSQL FK error)."""
    indexer = runtime.get(HistoryService).indexer
    seen: list[tuple[bool, bool]] = []
    original = CommitIndexer._count_authors

    def inside_transaction(self: CommitIndexer, session: Any, repo_id: int, inserted: Any) -> None:
        seen.append((("Dora", "dora@example.com") in self._authors, "zanzibar" in self._words))
        original(self, session, repo_id, inserted)

    monkeypatch.setattr(CommitIndexer, "_count_authors", inside_transaction)
    repo = RepoBuilder(tmp_path / "ids")
    repo.commit("zanzibar trip", {"a": "1\n"}, author="Dora <dora@example.com>", date="2024-01-01T00:00:00Z")
    register(runtime, repo.path, "example.com/ids")
    assert seen == [(False, False)]  # not visible to other threads while the transaction was open
    assert ("Dora", "dora@example.com") in indexer._authors  # published once committed
    assert "zanzibar" in indexer._words


def test_migration_marks_messages_indexed_before_the_overflow_marker(runtime: Runtime, tmp_path: Path) -> None:
    repo = RepoBuilder(tmp_path / "old")
    many_words = " ".join(f"w{i:03d}" for i in range(MAX_WORDS_PER_COMMIT + 50))
    repo.commit(f"release notes\n\n{many_words}", {"b": "1\n"}, date="2024-01-02T00:00:00Z")
    repo.commit("short", {"c": "1\n"}, date="2024-01-03T00:00:00Z")
    register(runtime, repo.path, "example.com/old")
    history = runtime.get(HistoryService)
    with runtime.db.session() as session:  # as indexed before the marker existed
        marker = select(HistoryWord.id).where(HistoryWord.word == OVERFLOW_WORD)
        session.execute(delete(HistoryWordCommit).where(HistoryWordCommit.word_id.in_(marker)))
    term = f"w{MAX_WORDS_PER_COMMIT + 40:03d}"
    assert history.commit_search(INTERNAL, ["example.com/old"], message_terms=[term]).commits == []
    command.downgrade(runtime.db._alembic_config(), "history_0002")
    runtime.db.upgrade()
    found = history.commit_search(INTERNAL, ["example.com/old"], message_terms=[term]).commits
    assert [c.subject for c in found] == ["release notes"]
