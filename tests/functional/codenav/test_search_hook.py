"""codenav wired into search (issue #16): symbols built when search indexes, type:symbol/sym:, the ranking tier.

The app (the `client` fixture) runs every capability's setup, so these go through the real listeners: a sync
indexes the repository for search, search's index listener extracts the symbols, and search reads them back
through the SymbolSource codenav registered.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from codewell.codenav.service import CodeNavService
from codewell.core.actors import INTERNAL
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from codewell.search.render import render_results
from codewell.search.service import SearchService
from tests.factories import actor_of_user, make_user
from tests.gitfixtures import commit, make_repo, register_local_repo

FILES = {
    "pkg/config.py": (
        "class Config:\n    def load(self, path):\n        return open(path).read()\n\n\n"
        "def load_config(path):\n    return Config().load(path)\n"
    ),
    "pkg/app.py": "from pkg.config import load_config\n\n\ndef run():\n    return load_config('x')\n",
    "web/loader.js": "export function loadAll(items) {\n  return items.map((i) => i.load());\n}\n",
    "docs/usage.md": "Call load_config to load the settings.\n",
}


@pytest.fixture
def wired(runtime: Runtime, client: TestClient) -> Runtime:
    """The runtime with every capability's setup done (listeners, symbol source), as in the server."""
    return runtime


def index_files(runtime: Runtime, repo_id: int) -> set[str]:
    folder = runtime.get(CodeNavService).root / str(repo_id)
    return {p.stem for p in folder.glob("*.sqlite")}


def test_indexing_for_search_builds_symbols_and_drops_replaced_ones(tmp_path: Path, wired: Runtime) -> None:
    work = make_repo(tmp_path / "work", FILES)
    repo = register_local_repo(wired, work, "acme/nav")  # synced, then indexed for search
    first = wired.get(SearchService).status(INTERNAL, "acme/nav")[0].branches["main"]
    assert index_files(wired, repo.id) == {first}  # built without any navigation query

    second = commit(work, {"pkg/extra.py": "def extra():\n    return 1\n"})
    wired.get(RepoService).sync_repo(INTERNAL, "acme/nav")  # a new generation replaces the first
    assert index_files(wired, repo.id) == {second}
    assert wired.get(SearchService).search(INTERNAL, "sym:extra").files[0].labels == {1: "function extra"}

    # A commit some branch still points at keeps its index.
    wired.get(CodeNavService).on_indexed(repo, {"main": second, "release": first})
    assert index_files(wired, repo.id) == {first, second}


def test_type_symbol_ranks_definitions_above_text_matches(tmp_path: Path, wired: Runtime) -> None:
    register_local_repo(wired, make_repo(tmp_path / "nav", FILES), "acme/nav")
    results = wired.get(SearchService).search(INTERNAL, "type:symbol load")
    labelled = [(f.path, sorted(f.labels.values())) for f in results.files if f.labels]
    # Exact names first (class method `load`), then longer names; functions before variables.
    assert labelled[0] == ("pkg/config.py", ["function load_config", "method Config.load"])
    assert ("web/loader.js", ["function loadAll"]) in labelled
    # Then the text matches of files that define no matching name.
    kinds = [bool(f.labels) for f in results.files]
    assert kinds == sorted(kinds, reverse=True)
    assert {f.path for f in results.files if not f.labels} == {"pkg/app.py", "docs/usage.md"}
    text = render_results(results, "type:symbol load").text
    assert "# acme/nav – pkg/config.py\n(method Config.load)\n2:     def load(self, path):" in text
    assert "(function load_config)\n6: def load_config(path):" in text


def test_sym_filters_by_language_and_regex(tmp_path: Path, wired: Runtime) -> None:
    register_local_repo(wired, make_repo(tmp_path / "nav", FILES), "acme/nav")
    search = wired.get(SearchService)
    js = search.search(INTERNAL, "sym:load lang:javascript")
    assert [(f.path, list(f.labels.values())) for f in js.files] == [("web/loader.js", ["function loadAll"])]
    exact = search.search(INTERNAL, "sym:/^load$/ file:^pkg/")
    assert [(f.path, list(f.labels.values())) for f in exact.files if f.labels] == [
        ("pkg/config.py", ["method Config.load"])
    ]


def test_without_a_symbol_table_type_symbol_is_text_search(tmp_path: Path, wired: Runtime) -> None:
    repo = register_local_repo(wired, make_repo(tmp_path / "nav", FILES), "acme/nav")
    wired.get(CodeNavService).drop(repo)  # the revision has no symbol table (yet)
    results = wired.get(SearchService).search(INTERNAL, "type:symbol load_config")
    assert not any(f.labels for f in results.files)
    assert {f.path for f in results.files} == {"pkg/config.py", "pkg/app.py", "docs/usage.md"}


def test_unreadable_repositories_give_no_symbols(tmp_path: Path, wired: Runtime) -> None:
    register_local_repo(wired, make_repo(tmp_path / "secret", FILES), "acme/secret", private=True)
    bob = actor_of_user(wired, make_user(wired, "bob"))
    assert wired.get(SearchService).search(bob, "sym:load").files == []
