"""`codewell serve --demo` first run: this project's own checkout becomes a browsable repository."""

from __future__ import annotations

from codewell.core.actors import INTERNAL
from codewell.repos.bootstrap import DEMO_NAME, demo_repos_step, project_checkout
from codewell.repos.service import RepoService
from codewell.runtime import Runtime


def test_demo_registers_and_mirrors_this_checkout_once(runtime: Runtime) -> None:
    checkout = project_checkout()
    assert checkout is not None
    assert (checkout / "src" / "codewell").is_dir()
    assert demo_repos_step(runtime, False) == []
    lines = demo_repos_step(runtime, True)
    assert lines == [f"demo: registered {checkout} as {DEMO_NAME}"]
    service = runtime.get(RepoService)
    repo = service.get(INTERNAL, DEMO_NAME)
    assert repo.sync_state == "ready"
    assert "src/" in [e.path for e in service.list_files(INTERNAL, DEMO_NAME).entries]
    assert demo_repos_step(runtime, True) == []  # first run only
