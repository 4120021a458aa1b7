"""First-run step of `codewell serve --demo`: register and mirror this project's own git checkout."""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path

import codewell
from codewell.core.actors import INTERNAL
from codewell.core.errors import CodewellError
from codewell.repos.service import RepoService
from codewell.runtime import Runtime

log = logging.getLogger(__name__)

DEMO_NAME = "local/codewell"


def project_checkout() -> Path | None:
    """The git work tree holding the running codewell source (editable install), else the current directory's."""
    candidates = [Path(codewell.__file__).resolve().parent, Path.cwd()]
    for start in candidates:
        try:
            top = subprocess.run(
                ["git", "rev-parse", "--show-toplevel"],
                cwd=start,
                capture_output=True,
                text=True,
                timeout=10,
                stdin=subprocess.DEVNULL,
                check=False,
            ).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            continue
        if top:
            return Path(top)
    return None


def demo_repos_step(runtime: Runtime, demo: bool) -> list[str]:
    """With --demo on first run: register this project's checkout as `local/codewell` and clone it."""
    if not demo:
        return []
    service = runtime.get(RepoService)
    # Reconcile first, so repositories configured in the site config show up in the demo right away.
    service.reconcile()
    if any(repo.name == DEMO_NAME for repo in service.all_repos(INTERNAL)):
        return []
    checkout = project_checkout()
    if checkout is None:
        return ["demo: no git checkout of codewell found; add repositories with `codewell repos add`"]
    try:
        service.add_repo(INTERNAL, str(checkout), name=DEMO_NAME, description="this codewell checkout")
        outcome = service.sync_repo(INTERNAL, DEMO_NAME)
    except CodewellError as exc:
        return [f"demo: could not register {checkout}: {exc}"]
    if not outcome.ok:
        return [f"demo: mirroring {checkout} failed: {outcome.error}"]
    return [f"demo: registered {checkout} as {DEMO_NAME}"]
