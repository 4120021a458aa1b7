"""SCIP uploads answering go_to_definition / find_references first (codenav/precise.py), over real git repositories.

The main index comes from the real indexer: `scip-python` (npm `@sourcegraph/scip-python`, pinned by
tests/scip/package-lock.json and installed by scripts/test) runs once per session on a small Python project.
Other indexes (re-uploads, another repository's) are built with codenav's own schema module: a real protobuf
round trip too. REST and CLI run in-process.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select
from starlette.testclient import TestClient

from codewell.capabilities import wire
from codewell.cli.main import cli
from codewell.codenav import scip
from codewell.codenav.models import ScipDocument, ScipOccurrence, ScipUpload
from codewell.codenav.precise import PreciseService
from codewell.codenav.results import PRECISE, SEARCH_BASED, SYNTACTIC
from codewell.codenav.service import CodeNavService
from codewell.core.actors import INTERNAL, Actor
from codewell.core.errors import InvalidInput, NotFound, PermissionDenied
from codewell.repos.service import Repo, RepoService
from codewell.runtime import Runtime
from tests.factories import actor_of_user, auth_headers, make_token, make_user
from tests.gitfixtures import make_repo, register_local_repo

pytestmark = pytest.mark.database

INDEXER = Path(__file__).resolve().parents[2] / "scip" / "node_modules" / ".bin" / "scip-python"
MAIN_CALL = '    label = "é→"; total = helper(21)'
FILES = {
    "app/__init__.py": "",
    "app/util.py": (
        "class Config:\n    def load(self):\n        return 1\n\n\n"
        "class Cache:\n    def load(self):\n        return 2\n\n\n"
        "def helper(x):\n    return x * 2\n\n\n"
        "def make():\n    return Config()\n"
    ),
    "app/main.py": (
        "from app.util import helper, make\n\n\n"
        f"def run():\n    c = make()\n    c.load()\n{MAIN_CALL}\n    return label, total\n"
    ),
    "app/extra.py": "def unindexed():\n    return 0\n",  # added to the commit after indexing: not in the upload
}


@pytest.fixture(scope="session")
def scip_python_index(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """index.scip of FILES (without app/extra.py), written by the real scip-python 0.6.6."""
    assert INDEXER.exists(), "run scripts/test (npm ci in tests/scip) to install the scip-python test indexer"
    project = tmp_path_factory.mktemp("scip-project")
    for path, text in FILES.items():
        if path != "app/extra.py":
            (project / path).parent.mkdir(parents=True, exist_ok=True)
            (project / path).write_text(text)
    # An empty environment: scip-python does not ask pip about installed packages (slow, machine-dependent).
    (project.parent / "environment.json").write_text("[]")
    output = project.parent / "index.scip"
    subprocess.run(
        [
            str(INDEXER),
            "index",
            ".",
            "--project-name",
            "fixture",
            "--project-version",
            "0.1",
            "--environment",
            str(project.parent / "environment.json"),
            "--output",
            str(output),
        ],
        cwd=project,
        check=True,
        capture_output=True,
        timeout=300,
    )
    return output.read_bytes()


@dataclass
class World:
    runtime: Runtime
    nav: CodeNavService
    precise: PreciseService
    repo: Repo
    admin: Actor
    reader: Actor
    admin_token: str
    reader_token: str


@pytest.fixture
def world(runtime: Runtime, tmp_path: Path) -> World:
    repo = register_local_repo(runtime, make_repo(tmp_path / "app", FILES), "acme/app")
    register_local_repo(
        runtime, make_repo(tmp_path / "secret", {"s.py": "def s():\n    return 1\n"}), "acme/secret", private=True
    )
    admin, reader = make_user(runtime, "root", site_admin=True), make_user(runtime, "reader")
    return World(
        runtime,
        runtime.get(CodeNavService),
        runtime.get(PreciseService),
        repo,
        actor_of_user(runtime, admin),
        actor_of_user(runtime, reader),
        make_token(runtime, admin),
        make_token(runtime, reader),
    )


def _counts(runtime: Runtime) -> tuple[int, int, int]:
    with runtime.db.session() as session:
        return tuple(  # type: ignore[return-value]
            session.execute(select(func.count()).select_from(model)).scalar_one()
            for model in (ScipUpload, ScipDocument, ScipOccurrence)
        )


Occ = tuple[list[int], str, int, list[int]]  # range, symbol, roles, enclosing range


def build_index(documents: dict[str, Iterable[Occ]], tool: str = "scip-test") -> bytes:
    index = scip.index_class()()
    index.metadata.tool_info.name = tool
    index.metadata.tool_info.version = "9.9"
    for path, occurrences in documents.items():
        document = index.documents.add(relative_path=path, language="Python")
        for rng, symbol, roles, enclosing in occurrences:
            document.occurrences.add(range=rng, symbol=symbol, symbol_roles=roles, enclosing_range=enclosing)
    return bytes(index.SerializeToString())


# --- precise answers from the real indexer's output ---------------------------------------------------------


def test_go_to_definition_answers_precisely_from_scip_python(world: World, scip_python_index: bytes) -> None:
    summary = world.precise.upload(world.admin, "acme/app", "main", scip_python_index)
    assert (summary.tool, summary.documents, summary.replaced) == ("scip-python 0.6.6", 3, False)
    assert summary.commit == world.runtime.get(RepoService).resolve(INTERNAL, "acme/app").commit
    assert summary.missing_files == []
    assert summary.skipped_occurrences == 0

    found = world.nav.go_to_definition(world.reader, "acme/app", "app/main.py", "helper")
    (helper,) = found.candidates
    assert (helper.how, helper.path, helper.line, helper.kind, helper.name) == (
        PRECISE,
        "app/util.py",
        11,
        "function",
        "helper",
    )
    assert "scip-python 0.6.6" in helper.reason
    assert helper.snippet == [(11, "def helper(x):"), (12, "    return x * 2")]  # the enclosing range

    # `c.load()` on what make() returns: only type inference knows it is Config's, not Cache's.
    (load,) = world.nav.go_to_definition(world.reader, "acme/app", "app/main.py", "load").candidates
    assert (load.how, load.container, load.line, load.kind) == (PRECISE, "Config", 2, "method")
    # A local variable: defined in the same function.
    (local,) = world.nav.go_to_definition(world.reader, "acme/app", "app/main.py", "c").candidates
    assert (local.how, local.path, local.line) == (PRECISE, "app/main.py", 5)


def test_find_references_answers_precisely_with_byte_columns(world: World, scip_python_index: bytes) -> None:
    world.precise.upload(world.admin, "acme/app", "main", scip_python_index)
    refs = world.nav.find_references(world.reader, "acme/app", "app/util.py", "helper")
    assert refs.how == PRECISE
    assert refs.definition.line == 11
    (main,) = refs.files
    assert (main.path, main.scope, main.total) == ("app/main.py", "same package", 2)
    column = len(MAIN_CALL[: MAIN_CALL.index("helper(")].encode("utf-8")) + 1  # scip-python counts UTF-16 units
    assert [(line, col) for line, col, _ in main.lines] == [(1, 22), (7, column)]
    assert main.lines[1][2] == MAIN_CALL

    # Config.load, qualified: only the call through make()'s Config, not Cache.load.
    load = world.nav.find_references(world.reader, "acme/app", "app/util.py", "Config.load")
    assert load.how == PRECISE
    assert [(f.path, [x[0] for x in f.lines]) for f in load.files] == [("app/main.py", [6])]
    cache = world.nav.find_references(world.reader, "acme/app", "app/util.py", "Cache.load")
    assert cache.how == PRECISE
    assert cache.total == 0


def test_without_an_upload_the_syntactic_path_answers(world: World, scip_python_index: bytes) -> None:
    before = world.nav.go_to_definition(world.reader, "acme/app", "app/main.py", "load")
    # Without types, two classes define `load`: search-based candidates, not the one answer.
    assert {c.how for c in before.candidates} == {SEARCH_BASED}
    assert len(before.candidates) == 2
    assert world.nav.go_to_definition(world.reader, "acme/app", "app/main.py", "helper").candidates[0].how == SYNTACTIC

    world.precise.upload(world.admin, "acme/app", "main", scip_python_index)
    # A file the upload does not cover, and a name the upload's document does not have, still answer syntactically.
    extra = world.nav.find_references(world.reader, "acme/app", "app/extra.py", "unindexed")
    assert extra.how == SYNTACTIC
    other_revision = world.nav.go_to_definition(world.reader, "acme/app", "app/main.py", "helper", revision="main")
    assert other_revision.candidates[0].how == PRECISE  # the same commit by its branch name


# --- re-upload, bad uploads, permissions ---------------------------------------------------------------------

HELPER = "scip-test python fixture 0.1 `app.util`/helper()."


def test_a_re_upload_of_the_same_commit_replaces_the_old_one(world: World, scip_python_index: bytes) -> None:
    world.precise.upload(world.admin, "acme/app", "main", scip_python_index)
    first = _counts(world.runtime)
    # Another index of the same commit that (wrongly, but verifiably) puts helper's definition at make().
    again = build_index(
        {
            "app/util.py": [([14, 4, 8], HELPER, scip.DEFINITION, [14, 0, 15, 17])],
            "app/main.py": [([0, 21, 27], HELPER, scip.READ_ACCESS, [])],
        }
    )
    summary = world.precise.upload(
        world.admin, "acme/app", world.runtime.get(RepoService).resolve(INTERNAL, "acme/app").commit, again
    )
    assert summary.replaced
    assert summary.tool == "scip-test 9.9"
    assert _counts(world.runtime) == (1, 2, 2) != first
    (moved,) = world.nav.go_to_definition(world.reader, "acme/app", "app/main.py", "helper").candidates
    # The name is the identifier text at the occurrence, so the main.py occurrence is found under `helper`
    # while the definition site reads `make` (what the file says there).
    assert (moved.how, moved.line, moved.name, moved.reason) == (PRECISE, 15, "make", "SCIP index (scip-test 9.9)")


@pytest.mark.parametrize("data", [b"\x08garbage\xff", b"", b"\x12\x05abc"])
def test_bad_bytes_are_refused_and_nothing_is_stored(world: World, scip_python_index: bytes, data: bytes) -> None:
    world.precise.upload(world.admin, "acme/app", "main", scip_python_index)
    before = _counts(world.runtime)
    with pytest.raises(InvalidInput):
        world.precise.upload(world.admin, "acme/app", "main", data)
    assert _counts(world.runtime) == before  # the earlier upload is intact, no partial rows


def test_bad_document_paths_and_commits_are_clear_errors(world: World) -> None:
    outside = build_index({"../etc/passwd": [([0, 0, 1], HELPER, 1, [])]})
    with pytest.raises(InvalidInput, match=r"document path '../etc/passwd'.*contains '\.\.'"):
        world.precise.upload(world.admin, "acme/app", "main", outside)
    good = build_index({"app/util.py": [([10, 4, 10], HELPER, 1, [])]})
    with pytest.raises(NotFound, match="revision 'deadbeef' not found"):
        world.precise.upload(world.admin, "acme/app", "deadbeef", good)
    assert _counts(world.runtime) == (0, 0, 0)


def test_documents_that_are_not_files_of_the_commit_are_reported(world: World) -> None:
    index = build_index(
        {
            "app/util.py": [([10, 4, 10], HELPER, scip.DEFINITION, [])],
            "app/ghost.py": [([0, 0, 5], "local 1", scip.DEFINITION, []), ([0, 0], "local 2", 0, [])],
        }
    )
    summary = world.precise.upload(world.admin, "acme/app", "main", index)
    assert summary.missing_files == ["app/ghost.py"]
    assert summary.skipped_occurrences == 1  # a range of two numbers is malformed
    assert (summary.documents, summary.occurrences) == (2, 2)


def test_the_size_limit_is_a_clear_error(world: World) -> None:
    small = PreciseService(world.runtime, max_bytes=16)
    with pytest.raises(InvalidInput, match="over the 16 bytes limit of one upload"):
        small.upload(world.admin, "acme/app", "main", build_index({"app/util.py": [([10, 4, 10], HELPER, 1, [])]}))


def test_only_site_admins_upload_and_unreadable_reads_like_missing(world: World, scip_python_index: bytes) -> None:
    with pytest.raises(PermissionDenied):
        world.precise.upload(world.reader, "acme/app", "main", scip_python_index)
    secret = build_index({"s.py": [([0, 4, 5], "scip-test python s 1 s/s().", 1, [])]})
    world.precise.upload(world.admin, "acme/secret", "main", secret)
    # A reader who cannot see acme/secret: the same error as a repository that does not exist.
    with pytest.raises(NotFound) as hidden:
        world.nav.go_to_definition(world.reader, "acme/secret", "s.py", "s")
    with pytest.raises(NotFound) as missing:
        world.nav.go_to_definition(world.reader, "acme/nothing", "s.py", "s")
    assert hidden.value.message.replace("acme/secret", "X") == missing.value.message.replace("acme/nothing", "X")
    assert hidden.value.hint == missing.value.hint
    (own,) = world.nav.go_to_definition(world.admin, "acme/secret", "s.py", "s").candidates
    assert own.how == PRECISE


def test_removing_the_repository_deletes_its_uploads(world: World, scip_python_index: bytes) -> None:
    wire(world.runtime)
    world.precise.upload(world.admin, "acme/app", "main", scip_python_index)
    assert _counts(world.runtime)[0] == 1
    world.runtime.get(RepoService).remove_repo(INTERNAL, "acme/app")
    assert _counts(world.runtime) == (0, 0, 0)


# --- another repository's upload (SCIP package symbols) ------------------------------------------------------


def test_a_symbol_defined_in_another_repositorys_upload(world: World, tmp_path: Path) -> None:
    square = "scip-test python mathlib 1.0 `mathlib.ops`/square()."
    lib = register_local_repo(
        world.runtime,
        make_repo(tmp_path / "lib", {"mathlib/ops.py": "def square(x):\n    return x * x\n"}),
        "acme/mathlib",
        private=True,
    )
    app = register_local_repo(
        world.runtime,
        make_repo(tmp_path / "user", {"use.py": "from mathlib.ops import square\n\nsquare(3)\n"}),
        "acme/user",
    )
    world.precise.upload(
        world.admin, lib.name, "main", build_index({"mathlib/ops.py": [([0, 4, 10], square, 1, [0, 0, 1, 16])]})
    )
    world.precise.upload(
        world.admin,
        app.name,
        "main",
        build_index({"use.py": [([0, 24, 30], square, scip.IMPORT, []), ([2, 0, 6], square, scip.READ_ACCESS, [])]}),
    )
    (found,) = world.nav.go_to_definition(world.admin, "acme/user", "use.py", "square").candidates
    assert (found.repo, found.path, found.how, found.snippet[0]) == (
        "acme/mathlib",
        "mathlib/ops.py",
        PRECISE,
        (1, "def square(x):"),
    )
    assert "another repository" in found.reason
    refs = world.nav.find_references(world.admin, "acme/mathlib", "mathlib/ops.py", "square")
    assert [(f.repo, f.scope, f.total) for f in refs.files] == [("acme/user", "other repository", 2)]
    # A reader of acme/user who cannot read acme/mathlib never gets its answer: the syntactic path answers, and
    # finds nothing it may show.
    with pytest.raises(NotFound) as hidden:
        world.nav.go_to_definition(world.reader, "acme/user", "use.py", "square")
    assert "mathlib/" not in str(hidden.value)


# --- REST and CLI --------------------------------------------------------------------------------------------


def test_rest_upload(world: World, client: TestClient, scip_python_index: bytes) -> None:
    url = "/.api/codeintel/upload"
    admin, reader = auth_headers(world.admin_token), auth_headers(world.reader_token)
    ok = client.post(url, params={"repo": "acme/app", "commit": "main"}, content=scip_python_index, headers=admin)
    assert ok.status_code == 200, ok.text
    assert ok.json()["documents"] == 3
    assert ok.json()["replaced"] is False
    assert client.post(
        url, params={"repo": "acme/app", "commit": "main"}, content=scip_python_index, headers=admin
    ).json()["replaced"]

    bad = client.post(url, params={"repo": "acme/app", "commit": "main"}, content=b"\x08garbage\xff", headers=admin)
    assert bad.status_code == 400
    assert "not a SCIP index" in bad.json()["error"]["message"]
    assert _counts(world.runtime)[0] == 1
    missing_commit = client.post(url, params={"repo": "acme/app"}, content=scip_python_index, headers=admin)
    assert missing_commit.status_code == 400
    unknown = client.post(url, params={"repo": "acme/none", "commit": "main"}, content=scip_python_index, headers=admin)
    assert unknown.status_code == 404
    # Non-admins are refused before the body is read, alike for a private, a public and a missing repository.
    refusals = [
        client.post(url, params={"repo": name, "commit": "main"}, content=b"x", headers=reader)
        for name in ("acme/secret", "acme/app", "acme/none")
    ]
    assert {(r.status_code, json.dumps(r.json())) for r in refusals} == {
        (refusals[0].status_code, json.dumps(refusals[0].json()))
    }
    assert refusals[0].status_code == 403
    assert client.post(url, params={"repo": "acme/app", "commit": "main"}, content=b"x").status_code == 401


def test_rest_refuses_an_oversized_body_by_its_length(world: World, client: TestClient) -> None:
    world.runtime.provide(PreciseService, PreciseService(world.runtime, max_bytes=1024))
    response = client.post(
        "/.api/codeintel/upload",
        params={"repo": "acme/app", "commit": "main"},
        content=b"\x00" * 2048,
        headers=auth_headers(world.admin_token),
    )
    assert response.status_code == 413
    assert response.json()["error"]["message"] == "the SCIP index is over the 1 KB limit of one upload"


def test_cli_upload_and_list(world: World, scip_python_index: bytes, tmp_path: Path) -> None:
    settings = world.runtime.settings
    root = ["--data-dir", str(settings.data_dir), "--database-url", settings.database_url]
    index_file = tmp_path / "index.scip"
    index_file.write_bytes(scip_python_index)
    result = CliRunner().invoke(
        cli, [*root, "codeintel", "upload", str(index_file), "--repo", "acme/app", "--commit", "main"]
    )
    assert result.exit_code == 0, result.stderr
    assert "acme/app@" in result.stdout
    assert "stored 3 documents" in result.stdout
    garbage = tmp_path / "bad.scip"
    garbage.write_bytes(b"\x08garbage\xff")
    bad = CliRunner().invoke(
        cli, [*root, "codeintel", "upload", str(garbage), "--repo", "acme/app", "--commit", "main"]
    )
    assert bad.exit_code == 1
    assert "not a SCIP index" in bad.stderr
    listed = CliRunner().invoke(cli, [*root, "codeintel", "list", "acme/app"])
    assert listed.exit_code == 0
    assert "scip-python 0.6.6" in listed.stdout
    assert len(listed.stdout.splitlines()) == 1
