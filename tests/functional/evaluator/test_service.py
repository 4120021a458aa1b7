"""Scripts calling the real SearchService and RepoService on real git repositories, through worker
processes: results, permissions of the caller, call limits and errors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from codewell.core.actors import ANONYMOUS, INTERNAL, Actor
from codewell.evaluator.sandbox import SandboxLimits
from codewell.evaluator.service import EvaluatorLimits, EvaluatorService
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from codewell.search.service import SearchService
from tests.factories import actor_of_user, make_user
from tests.gitfixtures import make_repo, register_local_repo

API_GO = 'package api\n\nimport "context"\n\nfunc Get() {\n\tctx := context.TODO()\n\t_ = ctx\n}\n'
WEB_GO = 'package web\n\nimport "context"\n\nfunc Run() { _ = context.TODO() }\nfunc Stop() { _ = context.TODO() }\n'
SECRET_GO = 'package secret\n\nimport "context"\n\nvar c = context.TODO()\n'


def add_repo(runtime: Runtime, tmp_path: Path, name: str, files: dict[str, str], *, private: bool = False) -> None:
    path = make_repo(tmp_path / "src" / name.replace("/", "-"), files)
    runtime.get(SearchService).index(register_local_repo(runtime, path, name, private=private))


@pytest.fixture
def api_repo(runtime: Runtime, tmp_path: Path) -> str:
    """One indexed public repository, acme/api."""
    add_repo(runtime, tmp_path, "acme/api", {"api.go": API_GO, "README.md": "# API\n\nline two\nline three\n"})
    return "acme/api"


@pytest.fixture
def repos(runtime: Runtime, tmp_path: Path, api_repo: str) -> list[str]:
    """Three indexed repositories: acme/api and other/web (public), acme/secret (private)."""
    add_repo(runtime, tmp_path, "other/web", {"web.go": WEB_GO})
    add_repo(runtime, tmp_path, "acme/secret", {"secret.go": SECRET_GO}, private=True)
    return [api_repo, "other/web", "acme/secret"]


@pytest.fixture
def evaluator(runtime: Runtime) -> Iterator[EvaluatorService]:
    limits = EvaluatorLimits(max_search_calls=3, max_read_file_calls=5, max_call_bytes=200_000)
    service = EvaluatorService(runtime, limits=limits, pool_size=1)
    runtime.provide(EvaluatorService, service)
    yield service
    service.close()


@pytest.fixture
def outsider(runtime: Runtime) -> Actor:
    return actor_of_user(runtime, make_user(runtime, "outsider"))


COUNT_BY_OWNER = """
local files, info = search("context.TODO count:1000")
local owners = {}
for _, f in ipairs(files) do
  local owner = f.repo:match("^([^/]+)/")
  owners[owner] = (owners[owner] or 0) + #f.matches
end
return {owners = owners, matchCount = info.matchCount, limitHit = info.limitHit}
"""


def test_search_results_grouped_by_owner(evaluator: EvaluatorService, repos: list[str]) -> None:
    result = evaluator.run(INTERNAL, COUNT_BY_OWNER)
    assert result.ok, result.error
    assert result.value == {"owners": {"acme": 2, "other": 2}, "matchCount": 4, "limitHit": False}
    assert result.search_calls == 1


def test_search_file_fields(evaluator: EvaluatorService, api_repo: str, runtime: Runtime) -> None:
    script = """
    local files = search("repo:^acme/api$ context.TODO")
    local f = files[1]
    return {n = #files, repo = f.repo, path = f.path, language = f.language, commit = f.commit,
            line = f.matches[1].line, text = f.matches[1].text}
    """
    result = evaluator.run(INTERNAL, script)
    assert result.ok, result.error
    head = runtime.get(RepoService).resolve(INTERNAL, "acme/api").commit
    assert result.value == {
        "n": 1,
        "repo": "acme/api",
        "path": "api.go",
        "language": "Go",
        "commit": head,
        "line": 6,
        "text": "\tctx := context.TODO()",
    }


def test_search_sees_only_what_the_caller_may_read(
    evaluator: EvaluatorService, repos: list[str], runtime: Runtime, outsider: Actor
) -> None:
    assert evaluator.run(INTERNAL, COUNT_BY_OWNER).value["owners"] == {"acme": 2, "other": 2}
    for actor in (ANONYMOUS, outsider):
        result = evaluator.run(actor, COUNT_BY_OWNER)
        assert result.ok, result.error
        # acme/secret's match is invisible, also in the total count.
        assert result.value == {"owners": {"acme": 1, "other": 2}, "matchCount": 3, "limitHit": False}
    assert outsider.user_id is not None
    runtime.get(RepoService).set_repo_users(INTERNAL, "acme/secret", [outsider.user_id])
    assert evaluator.run(outsider, COUNT_BY_OWNER).value["owners"] == {"acme": 2, "other": 2}


def test_read_file_returns_content_and_lines(evaluator: EvaluatorService, api_repo: str) -> None:
    script = """
    local whole = read_file("acme/api", "README.md")
    local part = read_file("acme/api", "README.md", 3, 4)
    return {content = whole.content, total = whole.totalLines, lines = part.lines,
            startLine = part.startLine, endLine = part.endLine, binary = part.binary}
    """
    result = evaluator.run(INTERNAL, script)
    assert result.ok, result.error
    assert result.value == {
        "content": "# API\n\nline two\nline three\n",
        "total": 4,
        "lines": ["line two", "line three"],
        "startLine": 3,
        "endLine": 4,
        "binary": False,
    }
    assert result.read_file_calls == 2


def test_private_repository_reads_as_not_found(evaluator: EvaluatorService, repos: list[str], outsider: Actor) -> None:
    script = 'local ok, err = pcall(read_file, "%s", "secret.go") return err'
    hidden = evaluator.run(outsider, script % "acme/secret").value
    missing = evaluator.run(outsider, script % "acme/nothing").value
    assert "not found" in hidden
    assert hidden == missing.replace("acme/nothing", "acme/secret")
    assert "context" not in hidden
    assert evaluator.run(INTERNAL, 'return read_file("acme/secret", "secret.go").content').value == SECRET_GO


def test_service_errors_are_catchable_with_messages(evaluator: EvaluatorService, api_repo: str) -> None:
    result = evaluator.run(INTERNAL, 'local ok, err = pcall(read_file, "acme/api", "nope.txt") return {ok, err}')
    assert result.ok
    ok, message = result.value
    assert ok is False
    assert message.startswith("read_file: file 'nope.txt' not found in acme/api@main")
    uncaught = evaluator.run(INTERNAL, 'local x = 1\nreturn read_file("acme/api", "README.md", 99)')
    assert uncaught.error is not None
    assert uncaught.error.kind == "runtime_error"
    assert "startLine 99 is past the end of the file (4 lines)" in uncaught.error.message


def test_bad_search_query_is_a_clear_error(evaluator: EvaluatorService) -> None:
    result = evaluator.run(INTERNAL, 'local files = search("lang:klingon foo")\nreturn #files')
    assert result.error is not None
    assert result.error.kind == "runtime_error"
    assert result.error.line == 1
    assert result.error.message.startswith("search: unknown language lang:klingon")


def test_search_call_limit_cannot_be_caught(evaluator: EvaluatorService, api_repo: str) -> None:
    script = "local n = 0 for i = 1, 10 do if pcall(search, 'context') then n = n + 1 end end return n"
    result = evaluator.run(INTERNAL, script)
    assert result.error is not None
    assert result.error.kind == "call_limit"
    assert result.error.message == "the script called search more than 3 times"
    assert result.search_calls == 4
    assert result.worker_recycled


def test_read_file_call_limit(evaluator: EvaluatorService, api_repo: str) -> None:
    script = "for i = 1, 10 do read_file('acme/api', 'api.go') end return 'done'"
    result = evaluator.run(INTERNAL, script)
    assert result.error is not None
    assert result.error.kind == "call_limit"
    assert result.error.message == "the script called read_file more than 5 times"


def test_bytes_returned_to_the_script_are_limited(runtime: Runtime, api_repo: str) -> None:
    limits = EvaluatorLimits(max_call_bytes=1000, sandbox=SandboxLimits())
    service = EvaluatorService(runtime, limits=limits, pool_size=1)
    try:
        result = service.run(INTERNAL, "for i = 1, 20 do read_file('acme/api', 'api.go') end")
    finally:
        service.close()
    assert result.error is not None
    assert result.error.kind == "call_limit"
    assert result.error.message == "search and read_file returned more than 1000 bytes to the script"
    assert 2 <= result.read_file_calls < 20


def test_search_never_materializes_more_than_the_byte_budget(runtime: Runtime, tmp_path: Path) -> None:
    path = make_repo(tmp_path / "many", {"many.txt": "needle\n" * 500})
    runtime.get(SearchService).index(register_local_repo(runtime, path, "acme/many"))
    limits = EvaluatorLimits(max_call_bytes=6400)
    service = EvaluatorService(runtime, limits=limits, pool_size=1)
    try:
        script = "local files, info = search('needle count:all') return {#files[1].matches, info.limitHit}"
        result = service.run(INTERNAL, script)
    finally:
        service.close()
    assert result.ok, result.error
    # 6400 bytes hold at most 200 matching lines: the search stops there and says so.
    assert result.value == [200, True]
