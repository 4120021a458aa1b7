"""Mirroring: first clone and later fetches of a bare mirror with the git CLI.

A first clone goes to `<mirror>.tmp-<random>` and is renamed into place only when it succeeded, so a
half-cloned mirror is never visible; the tmp dir is removed on failure. Fetches use explicit refspecs
(branches and tags only: code hosts' `refs/pull/*` would multiply the size) and `--prune`.
"""

from __future__ import annotations

import base64
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from codewell.repos.git import GitCommandError, run_git
from codewell.repos.sources import redact_url_credentials

REFSPECS = ("+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*")


@dataclass(frozen=True, slots=True)
class Credentials:
    """Secret for https fetches: `user:token` or a bare token (sent as basic auth user `x-access-token`)."""

    secret: str

    def env(self) -> dict[str, str]:
        """Git config through the environment: the secret never appears in argv or in the mirror's config."""
        userpass = self.secret if ":" in self.secret else f"x-access-token:{self.secret}"
        header = "Authorization: Basic " + base64.b64encode(userpass.encode()).decode()
        return {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "http.extraHeader", "GIT_CONFIG_VALUE_0": header}

    def redact(self, text: str) -> str:
        for value in {self.secret, *self.secret.split(":", 1)}:
            if len(value) >= 4:
                text = text.replace(value, "***")
        return text


def make_redactor(credentials: Credentials | None) -> Callable[[str], str]:
    """A function removing URL userinfo and the given secret from text (errors, logs)."""

    def redact(text: str) -> str:
        text = redact_url_credentials(text)
        return credentials.redact(text) if credentials else text

    return redact


def clone_mirror(
    url: str,
    mirror: Path,
    *,
    credentials: Credentials | None = None,
    timeout: float = 3600.0,
    on_progress: Callable[[str, int], None] | None = None,
) -> None:
    """Create the bare mirror at `mirror` from `url`; nothing is left behind when it fails."""
    mirror.parent.mkdir(parents=True, exist_ok=True)
    # Clones of a process that died mid-way: syncs of one repository never run at once (their jobs share a
    # lock), so any temporary clone of this mirror is a dead one.
    for leftover in mirror.parent.glob(mirror.name + ".tmp-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=mirror.name + ".tmp-", dir=mirror.parent))
    env = credentials.env() if credentials else {}
    redact = make_redactor(credentials)
    try:
        run_git(
            # No template: a mirror needs none of git's sample hooks and descriptions (13 files per repository,
            # ~50 KB of disk each time, 10,000 times over for an organization's repositories).
            ["clone", "--bare", "--template=", "--progress", "--", url, str(tmp)],
            env=env,
            timeout=timeout,
            redact=redact,
            on_progress=on_progress,
        )
        # The clone stored the URL as remote.origin.url; fetches pass the URL explicitly, so drop it.
        run_git(["remote", "remove", "origin"], cwd=tmp, timeout=60, redact=redact)
        if mirror.exists():
            # A leftover from an earlier registration of the same name: replace it.
            shutil.rmtree(mirror)
        os.replace(tmp, mirror)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def fetch_mirror(url: str, mirror: Path, *, credentials: Credentials | None = None, timeout: float = 3600.0) -> None:
    """Bring the mirror's branches and tags up to date with `url`, pruning deleted ones."""
    if not mirror.is_dir():
        raise GitCommandError(f"mirror {mirror.name} is missing")
    run_git(
        ["fetch", "--prune", "--prune-tags", "--no-write-fetch-head", "--quiet", "--", url, *REFSPECS],
        cwd=mirror,
        env=credentials.env() if credentials else {},
        timeout=timeout,
        redact=make_redactor(credentials),
    )


def ensure_head(mirror: Path, branch: str) -> None:
    """Point the mirror's HEAD at `branch` (after a fetch pruned the branch HEAD pointed to)."""
    run_git(["symbolic-ref", "HEAD", f"refs/heads/{branch}"], cwd=mirror, timeout=60)


def remove_mirror(mirror: Path, root: Path) -> None:
    """Delete a mirror directory, tmp dirs of interrupted clones of it, and parent dirs left empty under `root`."""
    shutil.rmtree(mirror, ignore_errors=True)
    for leftover in mirror.parent.glob(mirror.name + ".tmp-*") if mirror.parent.exists() else []:
        shutil.rmtree(leftover, ignore_errors=True)
    parent = mirror.parent
    while parent != root and root in parent.parents:
        try:
            parent.rmdir()  # only succeeds when empty: another repository may share the parent
        except OSError:
            break
        parent = parent.parent
