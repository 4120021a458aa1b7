"""The agent's tools over the real services, as the caller: output format, locations shown, missing capabilities."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codewell.agents.toolbox import Location, Toolbox
from codewell.capabilities import wire
from codewell.core.actors import Actor
from codewell.runtime import Runtime
from tests.factories import actor_of_user, make_user
from tests.gitfixtures import commit, git, make_repo, register_local_repo

PY = {
    "pkg/__init__.py": "from .impl import exported\n",
    "pkg/impl.py": "def exported():\n    return 1\n\n\nclass Config:\n    def load(self):\n        return exported()\n",
    "app/main.py": "from pkg import exported\n\n\ndef run():\n    return exported() + 1\n",
}


@pytest.fixture
def box(runtime: Runtime, tmp_path: Path) -> tuple[Toolbox, str]:
    wire(runtime)
    source = make_repo(tmp_path / "py", PY)
    commit(
        source,
        {"pkg/impl.py": PY["pkg/impl.py"] + "\n\ndef retry_budget():\n    return 3\n"},
        message="Add retry budget",
    )
    register_local_repo(runtime, source, "acme/py")
    register_local_repo(
        runtime, make_repo(tmp_path / "secret", {"s.py": "def exported():\n    pass\n"}), "acme/secret", private=True
    )
    alice: Actor = actor_of_user(runtime, make_user(runtime, "alice"))
    return Toolbox(runtime, alice), git(source, "rev-parse", "HEAD").strip()


def call(box: Toolbox, name: str, **args: object) -> tuple[str, list[Location], bool]:
    out = box.run(name, json.dumps(args))
    return out.text, out.locations, out.is_error


def test_navigation_tools(box: tuple[Toolbox, str]) -> None:
    tools, sha = box
    text, locations, error = call(tools, "go_to_definition", repo="acme/py", path="app/main.py", symbol="exported")
    assert not error, text
    assert text.startswith(f"# acme/py@{sha} \u2013 pkg/impl.py (function exported,")
    assert "\n1: def exported():" in text
    assert locations == [Location("acme/py", sha, "pkg/impl.py", 1, 2)]
    text, locations, error = call(tools, "find_references", repo="acme/py", path="pkg/impl.py", symbol="exported")
    assert not error, text
    assert f"# acme/py@{sha} \u2013 app/main.py" in text
    assert Location("acme/py", sha, "app/main.py", 5, 5) in locations
    assert "acme/secret" not in text


def test_history_tools(box: tuple[Toolbox, str]) -> None:
    tools, sha = box
    text, _, error = call(tools, "commit_search", repos=["acme/py"], messageTerms=["retry budget"])
    assert not error, text
    assert text.startswith(f"acme/py@{sha} ")
    assert text.endswith("Add retry budget\n  files: pkg/impl.py")
    text, _, error = call(tools, "diff_search", pattern="def retry_budget", repos=["acme/py"])
    assert not error, text
    assert f"acme/py@{sha}" in text
    assert "--- pkg/impl.py" in text
    assert "+def retry_budget():" in text
    hidden, _, _ = call(tools, "commit_search", repos=["acme/secret"])
    absent, _, _ = call(tools, "commit_search", repos=["acme/nothing"])
    assert hidden.replace("secret", "X") == absent.replace("nothing", "X")


def test_search_and_files(box: tuple[Toolbox, str]) -> None:
    tools, sha = box
    text, locations, _ = call(tools, "keyword_search", query="exported")
    assert "acme/secret" not in text
    assert f"# acme/py@{sha} \u2013 pkg/impl.py" in text
    assert Location("acme/py", sha, "pkg/impl.py", 1, 1) in locations
    text, locations, _ = call(tools, "nls_search", question="where is the retry budget defined?")
    assert f"# acme/py@{sha} \u2013 pkg/impl.py" in text
    assert text.count("\n") < 80
    assert any(loc.path == "pkg/impl.py" for loc in locations)
    text, _, _ = call(tools, "list_files", repo="acme/py")
    assert text == f"# acme/py@{sha} \u2013 /\napp/\npkg/"
    text, locations, _ = call(tools, "read_file", repo="acme/py", path="pkg/impl.py", start_line=5, end_line=6)
    expected = [f"# acme/py@{sha} \u2013 pkg/impl.py", "5: class Config:", "6:     def load(self):"]
    assert text.splitlines() == [*expected, "(lines 5-6 of 11; pass start_line to read on)"]
    assert locations == [Location("acme/py", sha, "pkg/impl.py", 5, 6)]


def test_a_missing_capability_drops_its_tools(runtime: Runtime) -> None:
    alice = actor_of_user(runtime, make_user(runtime, "alice"))
    assert set(Toolbox(runtime, alice).tools) == {
        "keyword_search", "nls_search", "read_file", "list_files", "go_to_definition", "find_references",
        "commit_search", "diff_search",
    }  # fmt: skip
    bare = Toolbox(runtime, alice, capabilities=["repos", "search"])
    assert set(bare.tools) == {"keyword_search", "read_file", "list_files"}
    assert [s.name for s in bare.schemas] == ["keyword_search", "read_file", "list_files"]
    text, _, error = call(bare, "go_to_definition", repo="acme/py", path="a.py", symbol="x")
    assert error
    assert text == "error: unknown tool 'go_to_definition'; the tools are: keyword_search, list_files, read_file"
