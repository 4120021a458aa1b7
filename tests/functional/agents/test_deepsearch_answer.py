"""Deep search without a model, as the agent that asked reads it: the completed answer quotes the code that
answers (pinned `repo@commit:path#Lx-y` ranges, and why each was picked), cites only the repositories the
question names (every readable one when it names none), leaves docs and CI files out, shows the question
once and carries the conversation's link. Real database, real git repositories, the real answering path."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from codewell.agents.render import render_answer
from codewell.agents.service import AgentService
from codewell.capabilities import wire
from codewell.core.actors import INTERNAL
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from codewell.search.service import SearchService
from tests.factories import actor_of_user, make_user
from tests.gitfixtures import make_repo, register_local_repo

pytestmark = pytest.mark.database

COBRA = {
    "completions.go": (
        "package cobra\n\n"
        "// GenBashCompletion writes the bash completion script of the command to w.\n"
        "func (c *Command) GenBashCompletion(w io.Writer) error {\n"
        "\treturn c.genBashCompletion(w, false)\n"
        "}\n"
    ),
    "command.go": (
        "package cobra\n\n// Execute runs the command.\nfunc (c *Command) Execute() error {\n\treturn nil\n}\n"
    ),
    "README.md": "# cobra\n\nCobra generates the bash completion script for your command.\n",
    "History.md": "## 1.2\n\n- generate the bash completion script faster\n",
    "site/content/completions/bash.md": "# Bash completion\n\nGenerate the bash completion script with cobra.\n",
    ".github/workflows/test.yml": "name: bash completion script\non: push\n",
}
OTHER = {"bash.py": "def generate_bash_completion_script():\n    # bash completion script generation\n    return ''\n"}


def _ask(runtime: Runtime, tmp_path: Path, question: str) -> tuple[str, str]:
    wire(runtime)  # indexing a repository builds its shard, then codenav's symbols and nls's chunks
    for name, files in (("github.com/spf13/cobra", COBRA), ("acme/other", OTHER)):
        register_local_repo(runtime, make_repo(tmp_path / name.replace("/", "_"), files), name)
        runtime.get(SearchService).index(runtime.get(RepoService).get(INTERNAL, name))
    alice = actor_of_user(runtime, make_user(runtime, "alice"))
    service = runtime.get(AgentService)
    view = service.deepsearch(alice, question)
    assert service.jobs.run_pending() == 1
    view = service.read(alice, view.url)
    assert view.conversation.status == "completed"
    return render_answer(view), view.url


def test_no_model_answer_quotes_code_of_the_named_repository_once_with_its_link(
    runtime: Runtime, tmp_path: Path
) -> None:
    question = "Where does github.com/spf13/cobra generate the bash completion script?"
    text, url = _ask(runtime, tmp_path, question)
    assert text.startswith(f"Link: {url}\n\n# {question}\n\n")
    assert text.count(question) == 1
    # Code, quoted with its pinned range and why it was picked.
    answer = text.split("## Sources", 1)[0]
    assert re.search(r"`github\.com/spf13/cobra@[0-9a-f]{40}:completions\.go#L\d+-\d+`", answer)
    assert "4: func (c *Command) GenBashCompletion(w io.Writer) error {" in answer
    assert "Why: " in answer
    assert "bash, completion, script" in answer
    # The repository's name is a filter, not a search term: `github`, `com`, `spf13` are not searched for.
    assert "for: generate, bash, completion, script\n" in answer
    # Docs, changelogs and CI files are not where it is done; the other repository is not named.
    for not_code in ("README.md", "History.md", ".github/workflows", "site/content", "acme/other"):
        assert not_code not in text


def test_a_question_naming_no_repository_searches_every_readable_one(runtime: Runtime, tmp_path: Path) -> None:
    text, _url = _ask(runtime, tmp_path, "Where is the bash completion script generated?")
    answer = text.split("## Sources", 1)[0]
    assert "github.com/spf13/cobra – `completions.go`" in answer
    assert "acme/other – `bash.py`" in answer
    assert "README.md" not in text
