"""read_file, list_files, list_refs and revisions on the sample fixture repository (real git mirror)."""

from __future__ import annotations

from pathlib import Path

import pytest

from codewell.core.actors import ANONYMOUS
from codewell.core.errors import InvalidInput, NotFound
from codewell.repos import render
from codewell.repos.service import Repo, RepoService
from codewell.runtime import Runtime
from tests.gitfixtures import git, make_repo, register_local_repo

NAME = "local/sample"


def sha_of(source: Path, revision: str) -> str:
    return git(source, "rev-parse", f"{revision}^{{commit}}").strip()


def test_read_file_numbers_lines_and_names_the_resolved_commit(
    service: RepoService, sample: Repo, sample_source: Path, runtime: Runtime
) -> None:
    content = service.read_file(ANONYMOUS, NAME, "src/util.py")
    head = sha_of(sample_source, "main")
    assert content.commit == head
    assert render.file_text(content) == (
        f"URL: {runtime.external_url}/{NAME}@{head}/-/blob/src/util.py\n1: def helper():\n2:     return 42"
    )
    assert content.total_lines == 2  # no spurious empty last line


def test_a_range_is_returned_with_the_range_in_the_url(service: RepoService, sample: Repo) -> None:
    content = service.read_file(ANONYMOUS, NAME, "src/app.py", start_line=4, end_line=5)
    text = render.file_text(content)
    assert text.splitlines()[1:] == ["4: def main():", "5:     return util.helper() + 1"]
    assert text.splitlines()[0].endswith("/-/blob/src/app.py%3FL4-5")


def test_an_end_line_past_the_end_is_clamped(service: RepoService, sample: Repo) -> None:
    content = service.read_file(ANONYMOUS, NAME, "src/app.py", start_line=5, end_line=99)
    assert content.lines == ["    return util.helper() + 1"]
    assert content.url.endswith("%3FL5-5")


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [(6, None, r"past the end of the file \(5 lines\)"), (0, 3, "startLine must be 1"), (4, 2, "before startLine")],
)
def test_out_of_range_lines_are_clear_errors(
    service: RepoService, sample: Repo, start: int, end: int | None, message: str
) -> None:
    with pytest.raises(InvalidInput, match=message) as error:
        service.read_file(ANONYMOUS, NAME, "src/app.py", start_line=start, end_line=end)
    assert error.value.hint


def test_files_over_128_kb_return_200_lines_and_say_how_to_read_on(service: RepoService, sample: Repo) -> None:
    content = service.read_file(ANONYMOUS, NAME, "big.txt")
    assert content.truncated
    assert len(content.lines) == 200
    assert content.total_lines == 5000
    assert content.lines[-1].startswith("line 000200 ")
    assert content.notice is not None
    assert "startLine=201" in content.notice
    assert render.file_text(content).splitlines()[-1] == content.notice
    further = service.read_file(ANONYMOUS, NAME, "big.txt", start_line=201, end_line=260)
    assert not further.truncated
    assert further.lines[0].startswith("line 000201 ")
    assert len(further.lines) == 60


def test_binary_files_report_size_and_type_instead_of_bytes(service: RepoService, sample: Repo) -> None:
    content = service.read_file(ANONYMOUS, NAME, "assets/logo.png")
    assert content.binary
    assert content.content_type == "image/png"
    assert content.lines == []
    text = render.file_text(content)
    assert "Binary file (97 bytes, image/png)" in text
    assert "\x00" not in text
    assert "PNG" not in text


@pytest.mark.parametrize(
    ("path", "error", "message"),
    [
        ("src", InvalidInput, "is a directory"),
        ("missing.txt", NotFound, "not found"),
        ("../etc/passwd", InvalidInput, "'..'"),
        ("/etc/passwd", InvalidInput, "absolute"),
        ("src/app.py\x00", InvalidInput, "NUL"),
        ("", InvalidInput, "path is required"),
    ],
)
def test_bad_paths_get_specific_errors(
    service: RepoService, sample: Repo, path: str, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        service.read_file(ANONYMOUS, NAME, path)


@pytest.mark.parametrize(
    ("revision", "expected"),
    [("main", "main"), ("HEAD", "main"), ("feature", "feature"), ("v1.0", "v1.0"), ("v2.0", "v1.0"), ("v3.0", "main")],
)
def test_revisions_resolve_branches_tags_and_head_with_annotated_tags_peeled(
    service: RepoService, sample: Repo, sample_source: Path, revision: str, expected: str
) -> None:
    resolved = service.resolve(ANONYMOUS, NAME, revision)
    assert resolved.commit == sha_of(sample_source, expected)
    assert service.read_file(ANONYMOUS, NAME, "README.md", revision=revision).commit == resolved.commit


def test_full_and_short_shas_resolve(service: RepoService, sample: Repo, sample_source: Path) -> None:
    first = sha_of(sample_source, "v1.0")
    assert service.resolve(ANONYMOUS, NAME, first).commit == first
    assert service.resolve(ANONYMOUS, NAME, first[:7]).commit == first
    assert service.resolve(ANONYMOUS, NAME).revision == "main"


@pytest.mark.parametrize("revision", ["-n", "main:README.md", "main@{1}", "a b", "x..y"])
def test_revision_syntax_beyond_names_and_shas_is_rejected(service: RepoService, sample: Repo, revision: str) -> None:
    with pytest.raises(InvalidInput, match="invalid revision"):
        service.read_file(ANONYMOUS, NAME, "README.md", revision=revision)


def test_unknown_revisions_are_not_found(service: RepoService, sample: Repo) -> None:
    with pytest.raises(NotFound, match="revision 'nope' not found") as error:
        service.read_file(ANONYMOUS, NAME, "README.md", revision="nope")
    assert "list_refs" in (error.value.hint or "")


def test_renames_are_visible_per_revision(service: RepoService, sample: Repo) -> None:
    assert service.read_file(ANONYMOUS, NAME, "old_name.py", revision="v1.0").lines == ["print('renamed')"]
    assert service.read_file(ANONYMOUS, NAME, "new_name.py").lines == ["print('renamed')"]
    with pytest.raises(NotFound):
        service.read_file(ANONYMOUS, NAME, "old_name.py")


def test_list_files_puts_directories_first_with_a_slash(service: RepoService, sample: Repo) -> None:
    listing = service.list_files(ANONYMOUS, NAME)
    assert render.files_text(listing).splitlines() == [
        "assets/",
        "d1/",
        "docs/",
        "src/",
        "README.md",
        "big.txt",
        "new_name.py",
    ]
    assert [e.path for e in service.list_files(ANONYMOUS, NAME, "src/").entries] == ["src/app.py", "src/util.py"]
    assert "feature.txt" in render.files_text(service.list_files(ANONYMOUS, NAME, revision="feature"))


def test_deep_trees_can_be_walked_and_read(service: RepoService, sample: Repo) -> None:
    deep = "/".join(f"d{n}" for n in range(1, 13))
    assert [e.path for e in service.list_files(ANONYMOUS, NAME, deep).entries] == [f"{deep}/leaf.txt"]
    assert service.read_file(ANONYMOUS, NAME, f"{deep}/leaf.txt").lines == ["deep"]
    assert [e.path for e in service.list_files(ANONYMOUS, NAME, "d1/d2").entries] == ["d1/d2/d3/"]


@pytest.mark.parametrize(
    ("path", "error", "message"),
    [("README.md", InvalidInput, "is a file"), ("nope", NotFound, "not found"), ("a/../b", InvalidInput, "'..'")],
)
def test_list_files_bad_paths(
    service: RepoService, sample: Repo, path: str, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        service.list_files(ANONYMOUS, NAME, path)


def test_list_files_stops_at_1000_entries_with_a_notice(runtime: Runtime, tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {f"f{n:04d}.txt": "" for n in range(1003)}
    files["zdir/x.txt"] = "x\n"
    register_local_repo(runtime, make_repo(tmp_path / "wide", files), "local/wide")
    listing = runtime.get(RepoService).list_files(ANONYMOUS, "local/wide")
    assert listing.truncated
    assert listing.total == 1004
    assert len(listing.entries) == 1000
    assert listing.entries[0].path == "zdir/"  # directories first, even when cut
    assert "first 1000 of 1004" in render.files_text(listing)


def test_list_refs_lists_branches_then_tags_with_the_default_first(
    service: RepoService, sample: Repo, sample_source: Path
) -> None:
    refs = service.list_refs(ANONYMOUS, NAME)
    assert [r.name for r in refs.refs] == [
        "refs/heads/main",
        "refs/heads/feature",
        "refs/tags/v1.0",
        "refs/tags/v2.0",
        "refs/tags/v3.0",
    ]
    by_name = {r.short_name: r for r in refs.refs}
    assert by_name["main"].default
    assert not by_name["feature"].default
    assert by_name["v2.0"].annotated
    assert not by_name["v1.0"].annotated
    assert by_name["v2.0"].commit == by_name["v1.0"].commit == sha_of(sample_source, "v1.0")  # peeled
    assert render.refs_text(refs).splitlines()[0] == f"refs/heads/main {by_name['main'].commit} (default branch)"


def test_list_refs_filters_combine(service: RepoService, sample: Repo, sample_source: Path) -> None:
    assert [r.short_name for r in service.list_refs(ANONYMOUS, NAME, tags_only=True).refs] == ["v1.0", "v2.0", "v3.0"]
    assert [r.short_name for r in service.list_refs(ANONYMOUS, NAME, heads_only=True).refs] == ["main", "feature"]
    feature_only = sha_of(sample_source, "feature")
    assert [r.short_name for r in service.list_refs(ANONYMOUS, NAME, contains_commit=feature_only).refs] == ["feature"]
    second = sha_of(sample_source, "main")
    assert [r.short_name for r in service.list_refs(ANONYMOUS, NAME, tags_only=True, contains_commit=second).refs] == [
        "v3.0"
    ]
    with pytest.raises(NotFound):
        service.list_refs(ANONYMOUS, NAME, contains_commit="0" * 40)


def test_list_refs_limit(service: RepoService, sample: Repo) -> None:
    page = service.list_refs(ANONYMOUS, NAME, limit=2)
    assert len(page.refs) == 2
    assert page.has_more
    assert page.total == 5
    assert "showing 2 of 5 refs" in render.refs_text(page)
    for bad in (0, 501):
        with pytest.raises(InvalidInput, match="between 1 and 500"):
            service.list_refs(ANONYMOUS, NAME, limit=bad)


def test_unknown_repositories_are_not_found(service: RepoService, sample: Repo) -> None:
    for call in (
        lambda: service.read_file(ANONYMOUS, "local/nope", "README.md"),
        lambda: service.list_files(ANONYMOUS, "local/nope"),
        lambda: service.list_refs(ANONYMOUS, "local/nope"),
        lambda: service.resolve(ANONYMOUS, "local/nope"),
    ):
        with pytest.raises(NotFound, match="repository 'local/nope' not found"):
            call()
