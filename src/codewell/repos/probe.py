"""Before a repository is registered by hand: ask git whether the path or URL is a git repository at all.

`repos add` and the site admin's form call `check_git_source` before the row exists, so a directory that is not
a repository (or a URL that answers nothing) is refused with git's reason and leaves nothing behind: no entry
that every search then reports as skipped (issue #32, item 6). `git ls-remote` is the check: it reads the
refs of a local path, a `file://` URL or a remote one over the same transport and credentials a clone uses,
without writing anything.
"""

from __future__ import annotations

import os
from pathlib import Path

from codewell.core.errors import InvalidInput
from codewell.repos.git import GitCommandError, run_git
from codewell.repos.sources import redact_url_credentials
from codewell.repos.sync import Credentials, make_redactor

# Seconds `git ls-remote` may take: a reachable host answers in a few; an unreachable one fails fast or not at all.
PROBE_TIMEOUT_SECONDS = 60.0


def check_git_source(
    url: str, *, local: bool, credentials_env: str | None = None, timeout: float = PROBE_TIMEOUT_SECONDS
) -> None:
    """Raise InvalidInput unless `git ls-remote` reads refs from `url` (a local path when `local`).

    A `credentials_env` variable this process does not have (the server may have it, a CLI beside it not) skips
    the check of a remote URL: the first sync reports its error instead.
    """
    credentials: Credentials | None = None
    if local:
        path = Path(url).expanduser()
        if not path.is_dir():
            raise InvalidInput(f"local path {url!r} is not a directory", hint="give the path of a git repository")
        target = str(path.resolve())
    else:
        target = url
        if credentials_env:
            secret = os.environ.get(credentials_env)
            if not secret:
                return
            credentials = Credentials(secret)
    try:
        run_git(
            ["ls-remote", "--heads", "--", target],
            env=credentials.env() if credentials else {},
            timeout=timeout,
            redact=make_redactor(credentials),
        )
    except GitCommandError as exc:
        shown = redact_url_credentials(url)
        raise InvalidInput(
            f"{shown!r} is not a git repository git can read: {exc.message}",
            hint="give the path of a git work tree or bare repository, or a clone URL that `git clone` accepts;"
            " nothing was registered",
        ) from None
